//! A restart on the same database loses nothing.

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{TestServer, policy_module, small_cluster};

#[tokio::test]
async fn state_survives_a_restart() {
    let server = TestServer::start_with_demo().await;
    let pushed = server.push("east", &small_cluster()).await;
    server.upload(policy_module("test_misbehaving.wasm")).await;
    let profile = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "p",
            "pluginConfig": [{"name": "RemoveDuplicates"}],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}
        }]
    });
    server.put_profile("dedupe", &profile).await;
    let (status, run) = server.run("east", "dedupe").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let run_id = run["id"].as_i64().unwrap();
    let (_, nodes_before) = server.get("/api/v1/clusters/east/nodes").await;
    let (_, pods_before) = server.get("/api/v1/clusters/east/pods").await;
    let (_, decisions_before) = server.get(&format!("/api/v1/decisions?run={run_id}")).await;
    let (_, clusters_before) = server.get("/api/v1/clusters").await;

    let server = server.restart().await;

    // Clusters: the same records (the demo was not loaded a second time), snapshots rebuilt.
    let (_, clusters) = server.get("/api/v1/clusters").await;
    assert_eq!(clusters, clusters_before);
    let (_, east) = server.get("/api/v1/clusters/east").await;
    assert_eq!(east["revision"], pushed["revision"]);
    assert_eq!(east["loaded"], true);
    assert_eq!(
        server.get("/api/v1/clusters/east/nodes").await.1,
        nodes_before
    );
    assert_eq!(
        server.get("/api/v1/clusters/east/pods").await.1,
        pods_before
    );

    // Policies, profiles, runs and decisions.
    let (status, policy) = server.get("/api/v1/policies/TestMisbehaving").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(policy["loaded"], true, "{policy:#}");
    let (_, stored) = server.get("/api/v1/profiles/dedupe").await;
    assert_eq!(stored["document"], profile);
    let (_, run_after) = server.get(&format!("/api/v1/runs/{run_id}")).await;
    assert_eq!(run_after, run);
    let (_, decisions) = server.get(&format!("/api/v1/decisions?run={run_id}")).await;
    assert_eq!(decisions, decisions_before);

    // The restored snapshot runs exactly like the original, and new revisions keep growing.
    let (status, rerun) = server.run("east", "dedupe").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(rerun["clusterRevision"], run["clusterRevision"]);
    assert_eq!(rerun["report"]["proposals"], run["report"]["proposals"]);
    let repushed = server.push("east", &small_cluster()).await;
    let max_before = clusters_before["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["revision"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(repushed["revision"].as_i64().unwrap() > max_before);
    assert!(server.database().exists());
}
