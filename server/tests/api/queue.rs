//! The approval queue over HTTP (issue #24, items 1 and 2): a run's proposals superseding the
//! earlier open ones of the same pods (and the 409 for acting on a superseded one), the list's
//! order, total, filters, sorts and cursors, and approve/reject by filter with a preview — at
//! 10,000 decisions, with the figures printed (not asserted: machines differ).

use std::time::Instant;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, lifetime_profile, small_cluster};
use rebalancer_store::{NewDecision, NewRun, RunEnd};

fn by_pod(decisions: &Value, name: &str) -> Value {
    decisions["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["pod"]["name"] == name)
        .unwrap_or_else(|| panic!("no decision for {name} in {decisions:#}"))
        .clone()
}

async fn run_decisions(server: &TestServer, body: &Value) -> (i64, Value) {
    let (status, run) = server.post_json("/api/v1/runs", body).await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let id = run["id"].as_i64().unwrap();
    let (status, decisions) = server.get(&format!("/api/v1/decisions?run={id}")).await;
    assert_eq!(status, StatusCode::OK, "{decisions:#}");
    (id, decisions)
}

#[tokio::test]
async fn a_new_run_supersedes_the_open_proposals_of_the_same_pods() {
    let mut server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let lifetime = json!({"cluster": "east", "profile": "lifetime"});
    let (first_run, first) = run_decisions(&server, &lifetime).await;
    let pods = first["items"].as_array().unwrap().len();
    assert!(pods >= 4, "{first:#}");
    // Decided before the next run: never superseded.
    let decided = by_pod(&first, "job-1")["id"].as_i64().unwrap();
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{decided}/reject"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    // A dry run's proposals do not supersede a real run's.
    let (_, dry) = run_decisions(
        &server,
        &json!({"cluster": "east", "profile": "lifetime", "dryRun": true}),
    )
    .await;
    assert_eq!(by_pod(&dry, "web-1")["dryRun"], true);
    let (_, listed) = server
        .get(&format!(
            "/api/v1/decisions?run={first_run}&status=proposed"
        ))
        .await;
    assert_eq!(listed["total"], pods - 1, "{listed:#}");

    let (second_run, second) = run_decisions(&server, &lifetime).await;
    let old = by_pod(&first, "web-1");
    let new = by_pod(&second, "web-1");
    let (old_id, new_id) = (old["id"].as_i64().unwrap(), new["id"].as_i64().unwrap());
    assert_eq!(
        (old["dryRun"].clone(), new["dryRun"].clone()),
        (json!(false), json!(false))
    );
    assert!(new["supersededBy"].is_null(), "{new:#}");

    let (status, old) = server.get(&format!("/api/v1/decisions/{old_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(old["status"], "superseded", "{old:#}");
    assert_eq!(old["supersededBy"], new_id, "{old:#}");
    let last = old["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (
            last["from"].clone(),
            last["to"].clone(),
            last["actor"].clone()
        ),
        (
            json!("proposed"),
            json!("superseded"),
            json!("system:supersede")
        )
    );
    assert!(
        last["comment"]
            .as_str()
            .unwrap()
            .contains(&format!("decision {new_id}")),
        "{last:#}"
    );
    // Every open proposal of the first run and of the dry run was superseded; the rejected
    // one was not. One open proposal per pod is left: the second run's.
    let (_, open) = server
        .get("/api/v1/decisions?cluster=east&profile=lifetime&status=proposed&limit=1000")
        .await;
    let open_runs: Vec<i64> = open["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["run"].as_i64().unwrap())
        .collect();
    assert!(open_runs.iter().all(|r| *r == second_run), "{open:#}");
    assert_eq!(open["total"], pods, "{open:#}");
    let (_, rejected) = server.get(&format!("/api/v1/decisions/{decided}")).await;
    assert_eq!(rejected["status"], "rejected");
    let (_, superseded) = server.get("/api/v1/decisions?status=superseded").await;
    assert_eq!(superseded["total"], 2 * pods - 1, "{superseded:#}");

    // Acting on a superseded decision: 409 up front, naming the newer one.
    for verb in ["approve", "reject"] {
        let (status, body) = server
            .post_json(
                &format!("/api/v1/decisions/{old_id}/{verb}"),
                &json!({"comment": "too late"}),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{verb}: {body:#}");
        let message = assert_error(&body, "superseded");
        assert!(
            message.contains(&format!(
                "decision {old_id} was superseded by decision {new_id}"
            )),
            "{message}"
        );
        assert_eq!(body["details"]["supersededBy"], new_id, "{body:#}");
    }
    let (_, unchanged) = server.get(&format!("/api/v1/decisions/{old_id}")).await;
    assert_eq!(
        unchanged["history"], old["history"],
        "the 409 changed nothing"
    );
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{new_id}/approve"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");

    // The audit log: one entry per run that superseded something, on the run.
    let (_, audit) = server.get("/api/v1/audit?action=decision.supersede").await;
    let entries = audit["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{audit:#}");
    let entry = entries[0].to_string();
    assert!(entry.contains(&second_run.to_string()), "{entry}");
    assert!(
        entry.contains(&format!("\"superseded\":{}", 2 * pods - 1)),
        "{entry}"
    );
    server.stop().await;
}

/// Record `n` proposals in one run of profile `queue` on cluster `big`, straight in the store:
/// pods `pod-00000…` in namespaces `ns-{i % 10}` on nodes `node-{i % 20}`.
async fn big_queue(server: &TestServer, n: usize) -> i64 {
    let store = &server.state().store;
    let run = store
        .insert_run(&NewRun::manual("big", 1, "queue"))
        .await
        .unwrap();
    let pods: Vec<[String; 4]> = (0..n)
        .map(|i| {
            [
                format!("uid-{i}"),
                format!("ns-{}", i % 10),
                format!("pod-{i:05}"),
                format!("node-{}", i % 20),
            ]
        })
        .collect();
    let decisions: Vec<NewDecision> = pods
        .iter()
        .map(|[uid, namespace, name, node]| NewDecision {
            plugin_set: "default",
            plugin: "LowNodeUtilization",
            pod_uid: uid,
            pod_namespace: namespace,
            pod_name: name,
            node,
            reason: "node-0 is over its high threshold",
        })
        .collect();
    store
        .finish_run(
            run.id,
            RunEnd::Succeeded {
                report: &|_: &[usize]| "{}".to_string(),
                decisions: &decisions,
                state: &[],
            },
        )
        .await
        .unwrap();
    run.id
}

fn ids(page: &Value) -> Vec<i64> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn the_queue_at_ten_thousand_decisions_pages_sorts_and_filters() {
    let mut server = TestServer::start().await;
    big_queue(&server, 10_000).await;

    // Newest first, with the total.
    let started = Instant::now();
    let (status, page) = server.get("/api/v1/decisions?status=proposed").await;
    let first_page = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{page:#}");
    assert_eq!(page["total"], 10_000);
    let first = ids(&page);
    assert_eq!(first.len(), 100);
    assert!(first.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert_eq!(page["items"][0]["pod"]["name"], "pod-09999");

    // Every sort pages through all of them exactly once, in its order.
    let mut timings = Vec::new();
    for sort in [
        "newest",
        "oldest",
        "namespace",
        "pod",
        "node",
        "plugin",
        "status",
    ] {
        let started = Instant::now();
        let mut seen = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/api/v1/decisions?cluster=big&sort={sort}&limit=1000");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let (status, page) = server.get(&path).await;
            assert_eq!(status, StatusCode::OK, "{sort}: {page:#}");
            assert_eq!(page["total"], 10_000, "{sort}");
            for d in page["items"].as_array().unwrap() {
                seen.push(d["id"].as_i64().unwrap());
                keys.push(match sort {
                    "namespace" => format!("{}/{}", d["pod"]["namespace"], d["pod"]["name"]),
                    "pod" => d["pod"]["name"].to_string(),
                    "node" => d["node"].to_string(),
                    _ => String::new(),
                });
            }
            match page["next"].as_str() {
                Some(next) => {
                    assert!(
                        next.len() <= 2048
                            && next
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                        "{next}"
                    );
                    cursor = Some(next.to_string());
                }
                None => break,
            }
        }
        timings.push((sort, started.elapsed()));
        let mut unique = seen.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!((seen.len(), unique.len()), (10_000, 10_000), "{sort}");
        assert!(
            keys.windows(2).all(|w| w[0] <= w[1]),
            "{sort} is not sorted"
        );
        if sort == "oldest" {
            assert!(seen.windows(2).all(|w| w[0] < w[1]));
        }
    }

    // The pod search: a case-insensitive substring of namespace/name.
    let (status, found) = server
        .get("/api/v1/decisions?pod=NS-3/POD-001&sort=pod")
        .await;
    assert_eq!(status, StatusCode::OK, "{found:#}");
    let names: Vec<&str> = found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pod"]["name"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..10).map(|i| format!("pod-001{i}3")).collect();
    assert_eq!(names, expected);
    assert_eq!(found["total"], 10);
    let (_, none) = server.get("/api/v1/decisions?pod=%25").await;
    assert_eq!(none["total"], 0, "% is a plain character: {none:#}");

    // Cursors: another sort's, a forged one, a too long one → 400 saying what is wrong.
    let (_, by_node) = server.get("/api/v1/decisions?sort=node&limit=5").await;
    let node_cursor = by_node["next"].as_str().unwrap();
    let (status, body) = server
        .get(&format!("/api/v1/decisions?sort=pod&cursor={node_cursor}"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    let message = assert_error(&body, "invalid_cursor");
    assert!(message.contains("sort `node`, not `pod`"), "{message}");
    let long = "A".repeat(2049);
    for bad in ["123", "not-base64!", "W10", long.as_str()] {
        let (status, body) = server.get(&format!("/api/v1/decisions?cursor={bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body:#}");
        assert_error(&body, "invalid_cursor");
    }
    let (status, body) = server.get("/api/v1/decisions?sort=size").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    assert_error(&body, "invalid_query");

    eprintln!(
        "10,000 decisions: first page with total in {first_page:?}; every page of 1,000 per \
         sort: {timings:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn approve_and_reject_by_filter_with_a_preview() {
    let mut server = TestServer::start().await;
    let run = big_queue(&server, 10_000).await;
    let viewer = server.create_token("vera", "viewer").await;
    let approver = server.create_token("alice", "approver").await;
    let call = |token: &str, path: &'static str, body: Value| {
        let token = token.to_string();
        let server = &server;
        async move {
            server
                .call(Some(&token), Method::POST, path, Some(&body))
                .await
        }
    };

    // Reject needs the approver role, like approve, and a filter.
    let (status, body) = call(&viewer, "/api/v1/decisions/reject", json!({"run": run})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body:#}");
    let (status, body) = call(
        &approver,
        "/api/v1/decisions/reject",
        json!({"comment": "x"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    assert!(assert_error(&body, "invalid_request").contains("rejecting"));

    // A preview of rejecting node-7's 500: nothing changes; the answer says which.
    let filter =
        json!({"run": run, "node": "node-7", "comment": "node-7 is fine", "preview": true});
    let (status, preview) = call(&approver, "/api/v1/decisions/reject", filter.clone()).await;
    assert_eq!(status, StatusCode::OK, "{preview:#}");
    assert_eq!(
        (
            preview["matched"].as_u64(),
            preview["rejected"].as_u64(),
            preview["preview"].as_bool()
        ),
        (Some(500), Some(500), Some(true)),
        "{preview:#}"
    );
    assert_eq!(preview["ids"].as_array().unwrap().len(), 500);
    let sample = preview["sample"].as_array().unwrap();
    assert_eq!(sample.len(), 50);
    assert!(
        sample
            .iter()
            .all(|d| d["status"] == "proposed" && d["node"] == "node-7")
    );
    let (_, open) = server
        .get(&format!(
            "/api/v1/decisions?run={run}&status=proposed&limit=1"
        ))
        .await;
    assert_eq!(open["total"], 10_000, "the preview changed something");

    // Reject them.
    let mut filter = filter;
    filter["preview"] = json!(false);
    let (status, done) = call(&approver, "/api/v1/decisions/reject", filter.clone()).await;
    assert_eq!(status, StatusCode::OK, "{done:#}");
    assert_eq!(done["rejected"], 500);
    assert_eq!(done["ids"], preview["ids"]);
    assert!(
        done["sample"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["status"] == "rejected"),
        "{done:#}"
    );
    let one = done["ids"][0].as_i64().unwrap();
    let (_, detail) = server.get(&format!("/api/v1/decisions/{one}")).await;
    assert_eq!(detail["history"][0]["actor"], "alice");
    assert_eq!(detail["history"][0]["comment"], "node-7 is fine");
    // Again: all of them are decided now.
    let (_, again) = call(&approver, "/api/v1/decisions/reject", filter).await;
    assert_eq!(
        (
            again["matched"].as_u64(),
            again["notProposed"].as_u64(),
            again["rejected"].as_u64()
        ),
        (Some(500), Some(500), Some(0)),
        "{again:#}"
    );

    // Approve 1,000 by filter (namespace ns-1 holds 1,000 of the pods).
    let (status, preview) = call(
        &approver,
        "/api/v1/decisions/approve",
        json!({"run": run, "namespace": "ns-1", "preview": true}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{preview:#}");
    assert_eq!(
        (preview["approved"].as_u64(), preview["dryRun"].as_u64()),
        (Some(1000), Some(0))
    );
    let started = Instant::now();
    let (status, approved) = call(
        &approver,
        "/api/v1/decisions/approve",
        json!({"run": run, "namespace": "ns-1", "comment": "rebalance ns-1"}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{approved:#}");
    assert_eq!(approved["approved"], 1000, "{approved:#}");
    assert_eq!(approved["ids"], preview["ids"]);
    assert_eq!(approved["sample"].as_array().unwrap().len(), 50);
    let (_, migrations) = server.get("/api/v1/pod-migrations?limit=1000").await;
    assert_eq!(migrations["items"].as_array().unwrap().len(), 1000);
    // One audit entry per decision, as for a single approval.
    let (_, audit) = server
        .get("/api/v1/audit?action=decision.approve&limit=1000")
        .await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 1000);
    let (_, audit) = server
        .get("/api/v1/audit?action=decision.reject&limit=1000")
        .await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 500);
    eprintln!("approving 1,000 of 10,000 decisions by filter took {took:?}");
    server.stop().await;
}
