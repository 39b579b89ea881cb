//! Pod migrations end to end on the simulated backend: the API contract, arbitration waiting
//! with a reason, Koordinator's filters, abort, and the arbitration knobs.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::approval::proposals;
use crate::support::{TestServer, assert_error, metric_sum};

pub fn decision_of(decisions: &[Value], pod: &str) -> i64 {
    decisions
        .iter()
        .find(|d| d["pod"]["name"] == pod)
        .unwrap_or_else(|| panic!("no decision for {pod}"))["id"]
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
        message.starts_with("waiting: ReplicaSet shop/web used its eviction budget (objectLimiters.workload: 1 per 5m)"),
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
