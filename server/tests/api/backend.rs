//! The simulated backend on the demo cluster: proposals of the default profile migrated
//! through the backend (reserve → evict → replacement bound) move node utilization, and the
//! pods and nodes endpoints show it.

use std::collections::BTreeMap;

use rebalancer_server::backend::{
    EvictedPod, EvictionCheck, EvictionRequest, EvictionResult, ReservationRequest,
    ReservationState,
};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::TestServer;

/// An eviction of pod `uid` as the executor asks for it (names are not read by this backend).
fn ev(uid: &str) -> EvictionRequest {
    EvictionRequest {
        uid: uid.to_owned(),
        namespace: String::new(),
        name: String::new(),
        grace_period_seconds: None,
        reason: "test".into(),
        trigger: "Test".into(),
    }
}

/// The evicted pod `uid`, as the executor looks for its replacement.
fn gone(uid: &str) -> EvictedPod {
    EvictedPod {
        uid: uid.to_owned(),
        namespace: String::new(),
        owner_uid: None,
        evicted_at_ms: None,
        reservation: None,
    }
}

async fn cpu_percent(server: &TestServer) -> BTreeMap<String, f64> {
    let (status, nodes) = server.get("/api/v1/clusters/demo/nodes").await;
    assert_eq!(status, StatusCode::OK, "{nodes:#}");
    nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_owned(),
                n["percent"]["cpu"].as_f64().unwrap(),
            )
        })
        .collect()
}

async fn pod_uids_on(server: &TestServer, node: &str) -> Vec<String> {
    let (status, pods) = server
        .get(&format!(
            "/api/v1/clusters/demo/pods?node={node}&limit=1000"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{pods:#}");
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["uid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn migrating_demo_proposals_moves_node_utilization() {
    let server = TestServer::start_with_demo().await;
    let before = cpu_percent(&server).await;
    let (status, run) = server.run("demo", "default").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (status, decisions) = server
        .get(&format!("/api/v1/decisions?run={}&limit=1000", run["id"]))
        .await;
    assert_eq!(status, StatusCode::OK, "{decisions:#}");
    let proposals: Vec<Value> = decisions["items"].as_array().unwrap().clone();
    assert!(!proposals.is_empty());

    let backend = server.state().backend.clone();
    let mut moved: Vec<(String, String)> = Vec::new();
    for p in proposals.iter().take(12) {
        let (uid, source) = (
            p["pod"]["uid"].as_str().unwrap(),
            p["node"].as_str().unwrap(),
        );
        if !matches!(
            backend.eviction_check("demo", uid).await.unwrap(),
            EvictionCheck::Allowed { .. }
        ) {
            continue;
        }
        let name = format!("test-{uid}");
        let request = ReservationRequest {
            name: name.clone(),
            pod_uid: uid.to_owned(),
            target_node: None,
            exclude_nodes: vec![source.to_owned()],
        };
        let target = match backend.reserve("demo", &request).await.unwrap() {
            ReservationState::Scheduled { node } => node,
            ReservationState::Unschedulable { .. } => continue,
            other => panic!("unexpected reservation state {other:?}"),
        };
        assert_ne!(target, source);
        // The nodes endpoint shows the capacity the reservation holds.
        let (_, nodes) = server.get("/api/v1/clusters/demo/nodes").await;
        let held = nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == target.as_str())
            .map(|n| n["reserved"]["pods"].as_i64().unwrap())
            .unwrap();
        assert_eq!(held, 1, "{nodes:#}");
        assert_eq!(
            backend.evict("demo", &ev(uid)).await.unwrap(),
            EvictionResult::Evicted
        );
        let Some(new) = backend
            .replacements_of("demo", &gone(uid))
            .await
            .unwrap()
            .into_iter()
            .next()
        else {
            // A bare pod: evicted, not recreated; its reservation stays unused.
            backend.release("demo", &name).await.unwrap();
            continue;
        };
        assert_eq!(new.node.as_deref(), Some(target.as_str()));
        assert_eq!(new.reservation.as_deref(), Some(name.as_str()));
        assert!(new.ready);
        // The pods endpoint reflects the move.
        assert!(!pod_uids_on(&server, source).await.contains(&uid.to_owned()));
        assert!(pod_uids_on(&server, &target).await.contains(&new.uid));
        // Evicting again is a no-op.
        assert_eq!(
            backend.evict("demo", &ev(uid)).await.unwrap(),
            EvictionResult::NotFound
        );
        moved.push((source.to_owned(), target));
    }
    assert!(moved.len() >= 3, "only {} pods moved", moved.len());

    let after = cpu_percent(&server).await;
    let changed: Vec<_> = before
        .iter()
        .filter(|(n, p)| (after[*n] - **p).abs() > 0.5)
        .map(|(n, _)| n.clone())
        .collect();
    assert!(changed.len() >= 2, "before {before:?} after {after:?}");
    for (source, _) in &moved {
        assert!(
            after[source] < before[source],
            "{source}: {} → {}",
            before[source],
            after[source]
        );
    }
    // The hottest node cooled down.
    let hottest = |m: &BTreeMap<String, f64>| m.values().cloned().fold(0.0, f64::max);
    assert!(hottest(&after) <= hottest(&before));

    // And it all survives a restart.
    let server = server.restart().await;
    assert_eq!(cpu_percent(&server).await, after);
}
