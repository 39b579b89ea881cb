//! The decision lifecycle over HTTP: approve/reject (one, in bulk, concurrently), 409s, roles,
//! auto-approve rules, dry runs and proposal expiry.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, lifetime_profile, list, node, pod, small_cluster};

/// A profile whose PodLifeTime proposes every pod of the small cluster.
/// Push the small cluster, store the profile, run it; returns (run id, decisions).
pub async fn proposals(server: &TestServer) -> (i64, Vec<Value>) {
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (status, run) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let id = run["id"].as_i64().unwrap();
    let (status, decisions) = server.get(&format!("/api/v1/decisions?run={id}")).await;
    assert_eq!(status, StatusCode::OK);
    let items = decisions["items"].as_array().unwrap().clone();
    assert!(items.len() >= 4, "{decisions:#}");
    (id, items)
}

fn by_pod<'a>(decisions: &'a [Value], name: &str) -> &'a Value {
    decisions
        .iter()
        .find(|d| d["pod"]["name"] == name)
        .unwrap_or_else(|| panic!("no decision for {name}"))
}

#[tokio::test]
async fn fifty_concurrent_approvals_create_exactly_one_pod_migration() {
    let mut server = TestServer::start().await;
    let (_, decisions) = proposals(&server).await;
    let id = by_pod(&decisions, "web-1")["id"].as_i64().unwrap();

    let url = server.url(&format!("/api/v1/decisions/{id}/approve"));
    let requests = (0..50).map(|i| {
        let request = server
            .client
            .post(&url)
            .json(&json!({"comment": format!("attempt {i}")}));
        async move {
            let response = request.send().await.expect("sent");
            let status = response.status();
            (status, response.json::<Value>().await.expect("JSON"))
        }
    });
    let answers = futures::future::join_all(requests).await;
    let ok: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .map(|(_, b)| b)
        .collect();
    let conflicts: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CONFLICT)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(ok.len(), 1, "{answers:#?}");
    assert_eq!(conflicts.len(), 49, "{answers:#?}");
    for body in conflicts {
        assert_error(body, "not_proposed");
        // The loser sees the status the winner (or the executor after it) set.
        assert!(
            matches!(
                body["details"]["status"].as_str(),
                Some("approved" | "executing" | "succeeded" | "failed")
            ),
            "{body:#}"
        );
    }
    assert_eq!(ok[0]["id"], id);
    assert_eq!(ok[0]["history"][0]["to"], "approved");

    let (status, migrations) = server
        .get(&format!("/api/v1/pod-migrations?decision={id}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        migrations["items"].as_array().unwrap().len(),
        1,
        "{migrations:#}"
    );
    // Exactly one "approved" transition was recorded.
    let (_, d) = server.get(&format!("/api/v1/decisions/{id}")).await;
    let approvals = d["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["to"] == "approved")
        .count();
    assert_eq!(approvals, 1, "{d:#}");
    server.stop().await;
}

#[tokio::test]
async fn approve_reject_conflicts_roles_and_bulk() {
    let mut server = TestServer::start().await;
    let (run, decisions) = proposals(&server).await;
    let web2 = by_pod(&decisions, "web-2")["id"].as_i64().unwrap();
    let db = by_pod(&decisions, "db-0")["id"].as_i64().unwrap();

    // Roles: a viewer may read but not approve; an approver may.
    let viewer = server.create_token("vera", "viewer").await;
    let approver = server.create_token("alice", "approver").await;
    let (status, body) = server
        .call(
            Some(&viewer),
            Method::POST,
            &format!("/api/v1/decisions/{web2}/reject"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body:#}");

    // Reject with a comment: 200 with the decision, the history says who, when, why.
    let (status, body) = server
        .call(
            Some(&approver),
            Method::POST,
            &format!("/api/v1/decisions/{web2}/reject"),
            Some(&json!({"comment": "peak hour"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["status"], "rejected");
    assert_eq!(body["history"][0]["actor"], "alice");
    assert_eq!(body["history"][0]["comment"], "peak hour");
    assert_eq!(body["history"][0]["from"], "proposed");
    assert!(body["history"][0]["time"].as_str().unwrap().ends_with('Z'));
    assert!(body["podMigration"].is_null());

    // Approving a rejected decision: 409 with its status.
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{web2}/approve"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        assert_error(&body, "not_proposed").contains("rejected"),
        "{body:#}"
    );
    assert_eq!(body["details"]["status"], "rejected");

    // Approve without a body at all.
    let (status, body) = server
        .call(
            Some(&approver),
            Method::POST,
            &format!("/api/v1/decisions/{db}/approve"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["status"], "approved");
    assert!(body["podMigration"].as_i64().is_some());
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{db}/reject"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body:#}");

    // A body that is not a comment.
    let (status, body) = server
        .post_json(
            &format!("/api/v1/decisions/{db}/approve"),
            &json!({"coment": "typo"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_request");
    let (status, _) = server
        .post_json("/api/v1/decisions/999999/approve", &json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Bulk approval needs a filter; with one it approves what is still proposed.
    let (status, body) = server
        .post_json("/api/v1/decisions/approve", &json!({}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_request");
    let (status, body) = server
        .post_json(
            "/api/v1/decisions/approve",
            &json!({"run": run, "namespace": "shop", "comment": "bulk"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    // shop has web-1, web-2 (rejected), web-3, db-0 (approved before).
    assert_eq!(body["matched"], 4, "{body:#}");
    assert_eq!(body["approved"], 2, "{body:#}");
    assert_eq!(body["notProposed"], 2, "{body:#}");
    assert_eq!(body["preview"], false, "{body:#}");
    assert_eq!(body["sample"].as_array().unwrap().len(), 2, "{body:#}");
    assert_eq!(body["ids"].as_array().unwrap().len(), 2);
    let (_, listed) = server
        .get(&format!(
            "/api/v1/decisions?run={run}&namespace=shop&status=proposed"
        ))
        .await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 0, "{listed:#}");
    let (_, listed) = server
        .get(&format!(
            "/api/v1/decisions?run={run}&plugin=PodLifeTime&node=n2"
        ))
        .await;
    assert_eq!(listed["items"][0]["pod"]["name"], "job-1", "{listed:#}");
    // By ids.
    let job = by_pod(&decisions, "job-1")["id"].as_i64().unwrap();
    let (status, body) = server
        .post_json("/api/v1/decisions/approve", &json!({"ids": [job, web2]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(
        (body["matched"].as_u64(), body["approved"].as_u64()),
        (Some(2), Some(1))
    );

    // The audit log records the approvals and the rejection.
    let (_, audit) = server.get("/api/v1/audit?action=decision.reject").await;
    let entries = audit["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{audit:#}");
    assert!(entries[0].to_string().contains("alice"), "{audit:#}");
    assert!(entries[0].to_string().contains("peak hour"), "{audit:#}");
    server.stop().await;
}

#[tokio::test]
async fn auto_approve_rules_and_dry_runs() {
    let mut server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;

    // Invalid rules are refused with every problem.
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/lifetime/auto-approve",
            &json!({"rules": [{"name": "a b"}, {"name": "x", "podSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert_eq!(
        body["details"]["errors"].as_array().unwrap().len(),
        2,
        "{body:#}"
    );
    let (status, _) = server
        .put_json("/api/v1/profiles/nope/auto-approve", &json!({"rules": []}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Approve the web replicas automatically (label selector), nothing else.
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/lifetime/auto-approve",
            &json!({"rules": [{"name": "web-pods", "plugins": ["PodLifeTime"], "namespaces": ["shop"],
                               "podSelector": {"matchLabels": {"app": "web"}}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let (_, got) = server.get("/api/v1/profiles/lifetime/auto-approve").await;
    assert_eq!(got["rules"][0]["name"], "web-pods", "{got:#}");
    // The profile document itself is untouched (strict DeschedulerPolicy validation still holds).
    let (_, profile) = server.get("/api/v1/profiles/lifetime").await;
    assert!(!profile.to_string().contains("web-pods"), "{profile:#}");

    // A dry run is never auto-approved, and its decisions can never be approved.
    let (status, dry) = server
        .post_json(
            "/api/v1/runs",
            &json!({"cluster": "east", "profile": "lifetime", "dryRun": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{dry:#}");
    let dry_id = dry["id"].as_i64().unwrap();
    let (_, dry_decisions) = server.get(&format!("/api/v1/decisions?run={dry_id}")).await;
    let dry_items = dry_decisions["items"].as_array().unwrap();
    assert!(
        dry_items.iter().all(|d| d["status"] == "proposed"),
        "{dry_decisions:#}"
    );
    let (status, body) = server
        .post_json(
            &format!("/api/v1/decisions/{}/approve", dry_items[0]["id"]),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body:#}");
    assert_error(&body, "dry_run");
    let (_, bulk) = server
        .post_json("/api/v1/decisions/approve", &json!({"run": dry_id}))
        .await;
    assert_eq!(bulk["approved"], 0, "{bulk:#}");
    assert_eq!(bulk["dryRun"], dry_items.len(), "{bulk:#}");

    // A real run: the web pods are approved by the rule, the others stay proposed.
    let (status, run) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    for d in decisions["items"].as_array().unwrap() {
        let web = d["pod"]["name"].as_str().unwrap().starts_with("web-");
        let (_, detail) = server.get(&format!("/api/v1/decisions/{}", d["id"])).await;
        if web {
            assert_ne!(detail["status"], "proposed", "{detail:#}");
            assert_eq!(
                detail["history"][0]["actor"], "auto-approve:web-pods",
                "{detail:#}"
            );
            assert!(detail["podMigration"].as_i64().is_some());
        } else {
            assert_eq!(detail["status"], "proposed", "{detail:#}");
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn proposals_expire_after_the_proposal_ttl() {
    let mut server = TestServer::start_with(|s| {
        s.demo = false;
        s.proposal_ttl_ms = 1_500;
    })
    .await;
    server
        .push(
            "east",
            &list([
                node("n1").build(),
                node("n2").build(),
                pod("shop", "a")
                    .on("n1")
                    .owned_by("ReplicaSet", "a")
                    .build(),
            ]),
        )
        .await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (_, run) = server.run("east", "lifetime").await;
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let id = decisions["items"][0]["id"].as_i64().unwrap();
    // The background sweep marks it expired, with who and why.
    let mut detail = Value::Null;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        detail = server.get(&format!("/api/v1/decisions/{id}")).await.1;
        if detail["status"] == "expired" {
            break;
        }
    }
    assert_eq!(detail["status"], "expired", "{detail:#}");
    assert_eq!(detail["history"][0]["actor"], "system:expiry");
    assert!(
        detail["statusReason"]
            .as_str()
            .unwrap()
            .contains("proposal TTL"),
        "{detail:#}"
    );
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{id}/approve"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["details"]["status"], "expired");
    server.stop().await;
}
