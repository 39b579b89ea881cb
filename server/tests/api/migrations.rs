//! Pod migrations end to end on the simulated backend: the API contract, arbitration waiting
//! with a reason, Koordinator's filters, abort, the arbitration knobs, and clusters that share
//! names arbitrated apart.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::approval::proposals;
use crate::support::lifetime_profile;
use crate::support::{TestServer, assert_error, metric_sum, pod, small_cluster};

pub fn decision_of(decisions: &[Value], pod: &str) -> i64 {
    decisions
        .iter()
        .find(|d| d["pod"]["name"] == pod)
        .unwrap_or_else(|| panic!("no decision for {pod} among {decisions:#?}"))["id"]
        .as_i64()
        .unwrap()
}

pub async fn approve(server: &TestServer, decision: i64) -> i64 {
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{decision}/approve"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    body["podMigration"].as_i64().unwrap()
}

/// Poll a pod migration until `done` (20 s at most).
pub async fn wait_for(server: &TestServer, id: i64, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        let (status, body) = server.get(&format!("/api/v1/pod-migrations/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{body:#}");
        if done(&body) {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("pod migration {id} never got there: {last:#}");
}

pub fn finished(m: &Value) -> bool {
    matches!(
        m["phase"].as_str(),
        Some("Succeeded" | "Failed" | "Aborted")
    )
}

async fn pod_names_on(server: &TestServer, node: &str) -> Vec<String> {
    let (status, pods) = server
        .get(&format!("/api/v1/clusters/east/pods?node={node}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{pods:#}");
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_reservation_first_pod_migration_on_the_simulated_backend() {
    let mut server = TestServer::start().await;
    let (_, decisions) = proposals(&server).await;
    assert!(
        pod_names_on(&server, "n1")
            .await
            .contains(&"web-1".to_string())
    );
    let decision = decision_of(&decisions, "web-1");
    let id = approve(&server, decision).await;
    let m = wait_for(&server, id, finished).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");

    // The contract: the list by decision, and the detail with its events in order.
    let (status, list) = server
        .get(&format!("/api/v1/pod-migrations?decision={decision}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list:#}");
    let item = &items[0];
    for key in [
        "id",
        "decision",
        "mode",
        "phase",
        "reason",
        "message",
        "sourceNode",
        "targetNode",
        "reservation",
        "createdAt",
        "updatedAt",
    ] {
        assert!(item.get(key).is_some(), "{key} missing: {item:#}");
    }
    assert_eq!(item["id"], id);
    assert_eq!(item["decision"], decision);
    assert_eq!(item["mode"], "ReservationFirst");
    assert_eq!(item["sourceNode"], "n1");
    let target = item["targetNode"].as_str().unwrap().to_string();
    assert_ne!(target, "n1");
    assert_eq!(m["status"], "Complete");
    // By cluster and by node: the source, the target and a node it never touched.
    let ids_where = |query: String| {
        let server = &server;
        async move {
            let (status, list) = server.get(&format!("/api/v1/pod-migrations?{query}")).await;
            assert_eq!(status, StatusCode::OK, "{query}: {list:#}");
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_i64().unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(ids_where("cluster=east&node=n1".into()).await, [id]);
    assert_eq!(ids_where(format!("node={target}")).await, [id]);
    assert!(ids_where("cluster=west".into()).await.is_empty());
    let untouched = ["n1", "n2", "n3"]
        .into_iter()
        .find(|n| *n != target && *n != "n1")
        .unwrap();
    assert!(ids_where(format!("node={untouched}")).await.is_empty());
    let events = m["events"].as_array().unwrap();
    for e in events {
        for key in ["time", "type", "reason", "message"] {
            assert!(e.get(key).is_some(), "{key} missing in {e:#}");
        }
    }
    let reasons: Vec<&str> = events
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    let chain = [
        "Created",
        "PassedArbitration",
        "CreatingReservation",
        "ReservationCreated",
        "ReservationScheduled",
        "Evicting",
        "EvictComplete",
        "PodBoundReservation",
        "BoundPodReady",
        "Complete",
    ];
    let positions: Vec<usize> = chain
        .iter()
        .map(|r| {
            reasons
                .iter()
                .position(|x| x == r)
                .unwrap_or_else(|| panic!("no {r} event: {reasons:?}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{reasons:?}");

    // The cluster shows it: web-1 gone from n1, its replacement on the target node.
    assert!(
        !pod_names_on(&server, "n1")
            .await
            .contains(&"web-1".to_string())
    );
    let replacement = m["newPod"]["name"].as_str().unwrap().to_string();
    assert!(
        pod_names_on(&server, &target).await.contains(&replacement),
        "{m:#}"
    );
    let (_, d) = server.get(&format!("/api/v1/decisions/{decision}")).await;
    assert_eq!(d["status"], "succeeded", "{d:#}");

    // Koordinator's workload token bucket (1 per 5m for 3 replicas): the next web pod waits
    // and says why.
    let next = approve(&server, decision_of(&decisions, "web-2")).await;
    let waiting = wait_for(&server, next, |m| m["reason"] == "Waiting").await;
    assert_eq!(waiting["phase"], "Pending");
    // The cluster cannot be deleted under an unfinished pod migration.
    let (status, body) = server.delete("/api/v1/clusters/east").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body:#}");
    assert_error(&body, "pod_migrations_in_flight");
    assert_eq!(body["details"]["podMigrations"], json!([next]), "{body:#}");
    let message = waiting["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "waiting: ReplicaSet shop/web used its eviction budget: 1 of 1 eviction at once, one \
             more every 5m0s (objectLimiters.workload: 1 per 5m)"
        ),
        "{message}"
    );

    // Abort a waiting pod migration: Aborted, its decision failed with who did it.
    let approver = server.create_token("alice", "approver").await;
    let (status, body) = server
        .call(
            Some(&approver),
            Method::POST,
            &format!("/api/v1/pod-migrations/{next}/abort"),
            Some(&json!({"comment": "not today"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["phase"], "Aborted");
    assert_eq!(body["reason"], "Aborted");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("aborted by alice: not today")
    );
    let (_, d) = server
        .get(&format!(
            "/api/v1/decisions/{}",
            decision_of(&decisions, "web-2")
        ))
        .await;
    assert_eq!(d["status"], "failed");
    assert_eq!(
        d["history"].as_array().unwrap().last().unwrap()["actor"],
        "alice"
    );
    let (status, body) = server
        .post_json(&format!("/api/v1/pod-migrations/{next}/abort"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&body, "already_finished");
    let (status, _) = server.get("/api/v1/pod-migrations/424242").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A single-replica StatefulSet pod may never be migrated (expected replicas filter).
    let db = approve(&server, decision_of(&decisions, "db-0")).await;
    let m = wait_for(&server, db, finished).await;
    assert_eq!(
        (m["phase"].as_str(), m["reason"].as_str()),
        (Some("Failed"), Some("ForbiddenMigratePod")),
        "{m:#}"
    );
    assert!(
        m["message"]
            .as_str()
            .unwrap()
            .contains("StatefulSet shop/db has 1 replica"),
        "{m:#}"
    );
    assert!(
        pod_names_on(&server, "n1")
            .await
            .contains(&"db-0".to_string())
    );

    // The evictions and the finished pod migrations show in /metrics.
    let metrics = reqwest::Client::new()
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let total = |name: &str, filter: &str| metric_sum(&metrics, name, filter);
    assert!(
        total("rebalancer_pods_evicted_total", r#"result="success""#) >= 1.0,
        "{metrics}"
    );
    assert!(
        total("rebalancer_pod_migrations_total", r#"phase="Succeeded""#) >= 1.0,
        "{metrics}"
    );
    assert!(
        total(
            "rebalancer_pod_migrations_total",
            r#"reason="ForbiddenMigratePod""#
        ) >= 1.0,
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn arbitration_knobs_over_the_api() {
    let server = TestServer::start().await;
    let (status, config) = server.get("/api/v1/arbitration").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(config["maxMigratingPerNode"], 2);
    assert_eq!(config["evictQPS"], 10.0);
    assert_eq!(config["evictBurst"], 1);
    assert_eq!(config["defaultJobMode"], "ReservationFirst");
    assert_eq!(config["defaultJobTTL"], "5m");
    assert_eq!(config["objectLimiters"]["workload"]["duration"], "5m");

    let (status, body) = server
        .put_json(
            "/api/v1/arbitration",
            &json!({"evictQPS": 0, "defaultJobTTL": "soon"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert_error(&body, "invalid_config");
    assert_eq!(body["details"]["errors"].as_array().unwrap().len(), 2);
    let (status, body) = server
        .put_json("/api/v1/arbitration", &json!({"maxMigratingPerNod": 1}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");

    let approver = server.create_token("alice", "approver").await;
    let (status, _) = server
        .call(
            Some(&approver),
            Method::PUT,
            "/api/v1/arbitration",
            Some(&json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, body) = server
        .put_json(
            "/api/v1/arbitration",
            &json!({"maxMigratingPerNode": 1, "maxMigratingPerWorkload": "50%",
                    "objectLimiters": {"workload": null}, "defaultJobMode": "EvictDirectly"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["maxMigratingPerWorkload"], "50%");
    // Kept across a restart.
    let mut server = server.restart().await;
    let (_, config) = server.get("/api/v1/arbitration").await;
    assert_eq!(config["maxMigratingPerNode"], 1, "{config:#}");
    assert!(config["objectLimiters"]["workload"].is_null());
    assert_eq!(config["defaultJobMode"], "EvictDirectly");

    // New approvals use the mode in force.
    let (_, decisions) = proposals(&server).await;
    let id = approve(&server, decision_of(&decisions, "web-1")).await;
    let m = wait_for(&server, id, finished).await;
    assert_eq!(m["mode"], "EvictDirectly");
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    server.stop().await;
}

/// The small cluster plus a second pod of the batch Job.
fn two_job_pods() -> Value {
    let mut cluster = small_cluster();
    let items = cluster["items"].as_array_mut().unwrap();
    items.push(
        pod("batch", "job-2")
            .on("n2")
            .owned_by("Job", "job")
            .build(),
    );
    cluster
}

/// [`two_job_pods`] and a PodDisruptionBudget that lets no web pod go, so that an admitted web
/// pod migration stays Running, waiting on it (pushed after the run: the policies do not
/// propose pods it protects).
fn cluster_with_pdb() -> Value {
    let mut cluster = two_job_pods();
    cluster["items"].as_array_mut().unwrap().push(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-pdb-web"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}
    }));
    cluster
}

/// Run the lifetime profile on `cluster`; its decisions.
async fn lifetime_decisions(server: &TestServer, cluster: &str) -> Vec<Value> {
    let (status, run) = server.run(cluster, "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}&limit=100", run["id"]))
        .await;
    decisions["items"].as_array().unwrap().clone()
}

fn arbitration_source(body: &Value) -> (&str, &str) {
    (
        body["cluster"].as_str().unwrap(),
        body["source"].as_str().unwrap(),
    )
}

/// Two clusters pushed from the same manifests share every node, namespace, pod and controller
/// name and uid. Arbitration keeps them apart: the caps count the candidate's own cluster, the
/// token buckets are per cluster, and a cluster's own knobs apply to it alone.
#[tokio::test]
async fn clusters_sharing_names_are_arbitrated_apart() {
    let mut server = TestServer::start().await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let mut decisions = Vec::new();
    for cluster in ["east", "west"] {
        server.push(cluster, &two_job_pods()).await;
        decisions.push(lifetime_decisions(&server, cluster).await);
        server.push(cluster, &cluster_with_pdb()).await;
    }
    let (east, west) = (&decisions[0], &decisions[1]);

    // Every cap at 1, both token buckets one eviction per long while.
    let (status, body) = server
        .put_json(
            "/api/v1/arbitration",
            &json!({"maxMigratingGlobally": 1, "maxMigratingPerNode": 1,
                    "maxMigratingPerNamespace": 1, "skipCheckExpectedReplicas": true,
                    "objectLimiters": {"workload": null,
                                       "namespace": {"duration": "1h", "maxMigrating": 1}},
                    "evictQPS": 0.001}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");

    // East's web-1 is admitted and holds there (the PDB): one running in east, on n1, in shop,
    // of ReplicaSet web.
    let east_web_1 = approve(&server, decision_of(east, "web-1")).await;
    let m = wait_for(&server, east_web_1, |m| m["reason"] == "BlockedByPdb").await;
    assert_eq!(m["phase"], "Running", "{m:#}");
    // West's web-1 has the same node, namespace, workload and uid: none of east's counts.
    let west_web_1 = approve(&server, decision_of(west, "web-1")).await;
    let m = wait_for(&server, west_web_1, |m| {
        m["reason"] == "BlockedByPdb" || m["reason"] == "Waiting"
    })
    .await;
    assert_eq!(
        (m["phase"].as_str(), m["reason"].as_str()),
        (Some("Running"), Some("BlockedByPdb")),
        "west waited on east's pod migration: {m:#}"
    );
    assert_eq!(m["cluster"], "west");
    // East's next one does wait, on east's own.
    let east_web_2 = approve(&server, decision_of(east, "web-2")).await;
    let m = wait_for(&server, east_web_2, |m| m["reason"] == "Waiting").await;
    assert_eq!(
        m["message"],
        "waiting: 1 pod migration is running in cluster east (maxMigratingGlobally=1)"
    );
    for id in [east_web_1, west_web_1, east_web_2] {
        let (status, body) = server
            .post_json(&format!("/api/v1/pod-migrations/{id}/abort"), &json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body:#}");
    }

    // The token buckets: east evicts batch/job-1, which takes east's eviction token and east's
    // token for namespace batch; west's job-1 still goes at once.
    for (cluster, decisions) in [("east", east), ("west", west)] {
        let id = approve(&server, decision_of(decisions, "job-1")).await;
        let m = wait_for(&server, id, finished).await;
        assert_eq!(m["phase"], "Succeeded", "{cluster}: {m:#}");
        assert_eq!(m["mode"], "ReservationFirst");
    }
    let east_job_2 = approve(&server, decision_of(east, "job-2")).await;
    let m = wait_for(&server, east_job_2, |m| m["reason"] == "Waiting").await;
    let message = m["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "waiting: namespace batch used its eviction budget: 1 of 1 eviction at once, one more \
             every 1h0m0s (objectLimiters.namespace: 1 per 1h)"
        ),
        "{message}"
    );

    // West's own knobs: no namespace limiter, EvictDirectly.
    let (status, body) = server.get("/api/v1/clusters/west/arbitration").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(arbitration_source(&body), ("west", "global"));
    assert_eq!(body["config"]["maxMigratingGlobally"], 1);
    let (status, body) = server
        .put_json(
            "/api/v1/clusters/west/arbitration",
            &json!({"objectLimiters": {"workload": null}, "skipCheckExpectedReplicas": true,
                    "defaultJobMode": "EvictDirectly"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(arbitration_source(&body), ("west", "cluster"));
    // Fields left out are Koordinator's defaults, not the global knobs'.
    assert_eq!(body["config"]["maxMigratingPerNode"], 2);
    assert_eq!(body["config"]["maxMigratingGlobally"], Value::Null);
    let west_job_2 = approve(&server, decision_of(west, "job-2")).await;
    let m = wait_for(&server, west_job_2, finished).await;
    assert_eq!(
        (m["phase"].as_str(), m["mode"].as_str()),
        (Some("Succeeded"), Some("EvictDirectly")),
        "{m:#}"
    );
    let (_, east_knobs) = server.get("/api/v1/clusters/east/arbitration").await;
    assert_eq!(arbitration_source(&east_knobs), ("east", "global"));

    // Kept across a restart, and the buckets rebuilt per cluster: east's job-2 still waits.
    server = server.restart().await;
    let (_, body) = server.get("/api/v1/clusters/west/arbitration").await;
    assert_eq!(arbitration_source(&body), ("west", "cluster"));
    assert_eq!(body["config"]["defaultJobMode"], "EvictDirectly");
    // (West's web-2 reaching its PDB shows the executor has made passes since.)
    let west_web_2 = approve(&server, decision_of(west, "web-2")).await;
    let m = wait_for(&server, west_web_2, |m| m["reason"] == "BlockedByPdb").await;
    assert_eq!(m["mode"], "EvictDirectly");
    let (_, m) = server
        .get(&format!("/api/v1/pod-migrations/{east_job_2}"))
        .await;
    assert_eq!(
        (m["phase"].as_str(), m["reason"].as_str()),
        (Some("Pending"), Some("Waiting")),
        "{m:#}"
    );
    let (status, _) = server
        .post_json(
            &format!("/api/v1/pod-migrations/{west_web_2}/abort"),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Refusals: an unknown cluster, an impossible knob, a role other than admin.
    let (status, body) = server.get("/api/v1/clusters/north/arbitration").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
    assert!(assert_error(&body, "not_found").contains("cluster \"north\""));
    let (status, body) = server
        .put_json("/api/v1/clusters/north/arbitration", &json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
    let (status, body) = server
        .put_json("/api/v1/clusters/west/arbitration", &json!({"evictQPS": 0}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert!(assert_error(&body, "invalid_config").contains("cluster \"west\""));
    let approver = server.create_token("alice", "approver").await;
    let (status, _) = server
        .call(
            Some(&approver),
            Method::DELETE,
            "/api/v1/clusters/west/arbitration",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Back to the global knobs.
    let (status, body) = server.delete("/api/v1/clusters/west/arbitration").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(arbitration_source(&body), ("west", "global"));
    assert_eq!(body["config"]["maxMigratingGlobally"], 1);
    let (_, audit) = server.get("/api/v1/audit?kind=arbitration").await;
    let entries: Vec<(&str, &str)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["object"]["id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("arbitration.delete", "clusters/west"),
            ("arbitration.put", "clusters/west"),
            ("arbitration.put", "arbitration"),
        ]
    );

    // A cluster's knobs go with it.
    server
        .put_json("/api/v1/clusters/west/arbitration", &json!({}))
        .await;
    let (status, body) = server.delete("/api/v1/clusters/west").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["arbitrationConfigDeleted"], true);
    let (status, _) = server.get("/api/v1/clusters/west/arbitration").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    server.push("west", &cluster_with_pdb()).await;
    let (_, body) = server.get("/api/v1/clusters/west/arbitration").await;
    assert_eq!(arbitration_source(&body), ("west", "global"));
    server.stop().await;
}
