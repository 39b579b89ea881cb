//! Snapshot ingest, cluster listing, nodes with utilization, pods.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, list, node, pod, small_cluster};

fn by_name<'a>(items: &'a Value, name: &str) -> &'a Value {
    items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {items:#}"))
}

#[tokio::test]
async fn snapshot_push_creates_replaces_and_serves_nodes_and_pods() {
    let server = TestServer::start().await;

    let (status, created) = server
        .put_json("/api/v1/clusters/east/snapshot", &small_cluster())
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    assert_eq!(created["name"], "east");
    assert_eq!(created["backend"], "simulated");
    assert_eq!(created["created"], true);
    assert_eq!(created["loaded"], true);
    assert_eq!(
        (&created["nodes"], &created["pods"]),
        (&json!(3), &json!(5))
    );
    assert_eq!(created["objects"], 9);
    assert_eq!(
        created["counts"],
        json!({"Namespace": 1, "Node": 3, "Pod": 5})
    );
    assert_eq!(created["warnings"], json!([]));
    for timing in ["receiveMs", "parseMs", "buildMs", "persistMs", "totalMs"] {
        assert!(
            created["timings"][timing].as_f64().unwrap() >= 0.0,
            "{timing}"
        );
    }
    let first_revision = created["revision"].as_i64().unwrap();

    let (status, clusters) = server.get("/api/v1/clusters").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(clusters["items"].as_array().unwrap().len(), 1);
    let (status, east) = server.get("/api/v1/clusters/east").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(east["revision"], first_revision);
    assert_eq!(east["counts"], created["counts"]);

    // Nodes: requests of the pods on them, against allocatable.
    let (status, nodes) = server.get("/api/v1/clusters/east/nodes").await;
    assert_eq!(status, StatusCode::OK, "{nodes:#}");
    let n1 = by_name(&nodes["items"], "n1");
    assert_eq!(n1["ready"], true);
    assert_eq!(n1["allocatable"]["cpuMilli"], 4000);
    assert_eq!(n1["requested"]["cpuMilli"], 2500);
    assert_eq!(n1["requested"]["memoryBytes"], 3584_i64 << 20);
    assert_eq!(n1["requested"]["pods"], 4);
    assert_eq!(n1["percent"]["cpu"], 62.5);
    assert_eq!(n1["percent"]["memory"], 43.75);
    let n3 = by_name(&nodes["items"], "n3");
    assert_eq!(n3["allocatable"]["cpuMilli"], 8000);
    assert_eq!(n3["requested"]["cpuMilli"], 0);

    // Pods, filtered and paginated.
    let (status, on_n1) = server.get("/api/v1/clusters/east/pods?node=n1").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = on_n1["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web-1", "web-2", "web-3", "db-0"]);
    assert_eq!(on_n1["items"][3]["cpuRequestMillis"], 1000);
    assert_eq!(on_n1["items"][3]["memoryRequestBytes"], 2_i64 << 30);
    assert_eq!(on_n1["items"][3]["ownerKind"], "StatefulSet");
    let (_, batch) = server
        .get("/api/v1/clusters/east/pods?namespace=batch")
        .await;
    assert_eq!(batch["items"][0]["name"], "job-1");
    assert_eq!(batch["items"].as_array().unwrap().len(), 1);

    let (_, page1) = server.get("/api/v1/clusters/east/pods?limit=2").await;
    assert_eq!(page1["items"].as_array().unwrap().len(), 2);
    let cursor = page1["next"].as_str().unwrap().to_string();
    let (_, page2) = server
        .get(&format!(
            "/api/v1/clusters/east/pods?limit=2&cursor={cursor}"
        ))
        .await;
    assert_eq!(page2["items"][0]["name"], "web-3");
    let (_, page3) = server
        .get(&format!(
            "/api/v1/clusters/east/pods?limit=2&cursor={}",
            page2["next"].as_str().unwrap()
        ))
        .await;
    assert_eq!(page3["items"].as_array().unwrap().len(), 1);
    assert!(page3["next"].is_null());

    // Replace: 200, a new revision, the new state everywhere.
    let smaller = list([
        node("n1").build(),
        node("n2").build(),
        pod("shop", "web-1")
            .on("n2")
            .owned_by("ReplicaSet", "web")
            .build(),
    ]);
    let (status, replaced) = server
        .put_json("/api/v1/clusters/east/snapshot", &smaller)
        .await;
    assert_eq!(status, StatusCode::OK, "{replaced:#}");
    assert_eq!(replaced["created"], false);
    assert!(replaced["revision"].as_i64().unwrap() > first_revision);
    assert_eq!(replaced["createdAt"], created["createdAt"]);
    let (_, nodes) = server.get("/api/v1/clusters/east/nodes").await;
    assert_eq!(nodes["items"].as_array().unwrap().len(), 2);

    // A cursor from the previous state is refused rather than silently skipping pods.
    let (status, body) = server
        .get(&format!(
            "/api/v1/clusters/east/pods?limit=2&cursor={cursor}"
        ))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&body, "stale_cursor");
    let (status, body) = server
        .get("/api/v1/clusters/east/pods?cursor=garbage")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_cursor");

    for path in ["/api/v1/clusters/west/nodes", "/api/v1/clusters/west/pods"] {
        let (status, body) = server.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_error(&body, "not_found");
    }
}

#[tokio::test]
async fn yaml_snapshots_are_accepted() {
    let server = TestServer::start().await;
    let yaml = serde_yaml::to_string(&small_cluster()).unwrap();
    let (status, body) = server
        .put_bytes(
            "/api/v1/clusters/from-yaml/snapshot",
            "application/yaml",
            yaml,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body:#}");
    assert_eq!((&body["nodes"], &body["pods"]), (&json!(3), &json!(5)));
    let (_, nodes) = server.get("/api/v1/clusters/from-yaml/nodes").await;
    assert_eq!(
        by_name(&nodes["items"], "n1")["requested"]["cpuMilli"],
        2500
    );
}

#[tokio::test]
async fn observed_at_sets_the_snapshot_time_and_a_bad_one_is_refused() {
    let server = TestServer::start().await;
    let (status, body) = server
        .put_json(
            "/api/v1/clusters/recorded/snapshot?observedAt=2026-11-20T12:00:00Z",
            &small_cluster(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body:#}");
    assert_eq!(body["snapshotTime"], "2026-11-20T12:00:00Z", "{body:#}");

    let (status, body) = server
        .put_json(
            "/api/v1/clusters/recorded/snapshot?observedAt=last-tuesday",
            &small_cluster(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    assert_error(&body, "invalid_observed_at");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("\"last-tuesday\""),
        "{body:#}"
    );
    let (_, kept) = server.get("/api/v1/clusters/recorded").await;
    assert_eq!(kept["snapshotTime"], "2026-11-20T12:00:00Z", "{kept:#}");
}

#[tokio::test]
async fn refused_documents_leave_the_previous_state_untouched() {
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.snapshot_body_limit = 256 << 10;
    })
    .await;
    let good = server.push("east", &small_cluster()).await;
    let (_, nodes_before) = server.get("/api/v1/clusters/east/nodes").await;
    let path = "/api/v1/clusters/east/snapshot";

    // Not JSON.
    let (status, body) = server
        .put_bytes(
            path,
            "application/json",
            "{\"kind\": \"List\", \"items\": [",
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    assert_error(&body, "malformed_document");
    assert_eq!(body["details"]["previousStateKept"], true);

    // An object without a name: the message says which item and which field.
    let mut nameless = small_cluster();
    nameless["items"][4]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    let (status, body) = server.put_json(path, &nameless).await;
    assert!(status.is_client_error(), "{status}: {body:#}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("item 4") && message.contains("name"),
        "{message}"
    );

    // An unparsable quantity: the node and the field are named.
    let mut bad_quantity = small_cluster();
    bad_quantity["items"][1]["status"]["allocatable"]["cpu"] = json!("four");
    let (status, body) = server.put_json(path, &bad_quantity).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let message = assert_error(&body, "invalid_object");
    assert!(message.contains("Node n2"), "{message}");
    assert!(message.contains("status.allocatable.cpu"), "{message}");
    assert_eq!(body["details"]["name"], "n2");

    // Over the body limit.
    let big = list((0..2000).map(|i| node(&format!("node-{i}")).build()));
    let (status, body) = server.put_json(path, &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_error(&body, "payload_too_large");

    // Neither JSON nor YAML; a bad cluster name.
    let (status, body) = server.put_bytes(path, "text/plain", "nodes").await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_error(&body, "unsupported_media_type");
    let (status, body) = server
        .put_json("/api/v1/clusters/East_1!/snapshot", &small_cluster())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_name");

    let (_, east) = server.get("/api/v1/clusters/east").await;
    assert_eq!(east["revision"], good["revision"]);
    assert_eq!(east["updatedAt"], good["updatedAt"]);
    let (_, nodes_after) = server.get("/api/v1/clusters/east/nodes").await;
    assert_eq!(nodes_after, nodes_before);
    let (_, all) = server.get("/api/v1/clusters").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn live_cluster_oddities_are_kept_and_reported() {
    let server = TestServer::start().await;
    let odd = list([
        node("n1").build(),
        node("n2").not_ready().build(),
        pod("shop", "orphan")
            .on("gone-node")
            .owned_by("ReplicaSet", "web")
            .build(),
        pod("shop", "pending").build(),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "shop", "uid": "uid-cm"},
            "data": {"a": "b"}
        }),
    ]);
    let (status, body) = server.put_json("/api/v1/clusters/odd/snapshot", &odd).await;
    assert_eq!(status, StatusCode::CREATED, "{body:#}");
    let codes: Vec<&str> = body["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"node-not-found"), "{body:#}");
    assert!(codes.contains(&"unknown-kind"), "{body:#}");
    let missing = body["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "node-not-found")
        .unwrap();
    assert!(
        missing["message"].as_str().unwrap().contains("orphan"),
        "{missing:#}"
    );
    assert_eq!(body["counts"]["ConfigMap"], 1);
    assert_eq!(body["objects"], 5);

    // Warnings stay with the cluster.
    let (_, stored) = server.get("/api/v1/clusters/odd").await;
    assert_eq!(stored["warnings"], body["warnings"]);
    let (_, nodes) = server.get("/api/v1/clusters/odd/nodes").await;
    assert_eq!(by_name(&nodes["items"], "n2")["ready"], false);
}

#[tokio::test]
async fn nodes_show_measured_usage_beside_requests_and_bad_usage_is_a_warning_not_a_refusal() {
    let server = TestServer::start().await;
    let mut cluster = small_cluster();
    let items = cluster["items"].as_array_mut().unwrap();
    items.push(json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": "n1"},
        "status": {
            "updateTime": "2026-01-01T00:00:00Z",
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "3", "memory": "2Gi"}}},
            "podsMetric": [{"namespace": "shop", "name": "web-1",
                            "podUsage": {"resources": {"cpu": "1200m"}}}]
        }
    }));
    items.push(json!({
        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
        "metadata": {"name": "n2"}, "timestamp": "2026-01-01T00:00:00Z", "window": "30s",
        "usage": {"cpu": "500m", "memory": "1Gi"}
    }));
    items.push(json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": "n3"}, "status": {"updateTime": "yesterday"}
    }));
    let (status, created) = server
        .put_json("/api/v1/clusters/east/snapshot", &cluster)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    let warnings = created["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0]["code"], "invalid-usage");
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap()
            .contains("NodeMetric n3: status.updateTime"),
        "{warnings:#?}"
    );

    let (status, nodes) = server.get("/api/v1/clusters/east/nodes").await;
    assert_eq!(status, StatusCode::OK, "{nodes:#}");
    let n1 = by_name(&nodes["items"], "n1");
    assert_eq!(n1["percent"]["cpu"], 62.5, "requests are unchanged");
    assert_eq!(n1["usage"]["source"], "nodeMetric");
    assert_eq!(n1["usage"]["updateMs"], 1_767_225_600_000_i64);
    assert_eq!(n1["usage"]["used"]["cpuMilli"], 3000);
    assert_eq!(n1["usage"]["used"]["memoryBytes"], 2_i64 << 30);
    assert_eq!(n1["usage"]["percent"]["cpu"], 75.0);
    assert_eq!(n1["usage"]["rawAllocatable"], false);
    let n2 = by_name(&nodes["items"], "n2");
    assert_eq!(n2["usage"]["source"], "metricsApi");
    assert_eq!(n2["usage"]["windowMs"], 30_000);
    assert_eq!(by_name(&nodes["items"], "n3")["usage"], Value::Null);
}

#[tokio::test]
async fn deleting_a_cluster_takes_its_state_schedules_and_open_proposals_and_keeps_history() {
    let server = TestServer::start_with(|s| s.demo = false).await;
    let pushed = server.push("east", &small_cluster()).await;
    server.push("west", &small_cluster()).await;
    let profile = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "calm",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"cooldown": "1h"}},
                {"name": "RemoveDuplicates"}
            ],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}
        }]
    });
    server.put_profile("calm", &profile).await;
    // A run with proposals: the cooldown is kept in the cluster's policy state.
    let (_, run) = server.run("east", "calm").await;
    assert_eq!(run["proposals"], 2, "{run:#}");
    let (status, schedule) = server
        .post_json(
            "/api/v1/schedules",
            &json!({"cluster": "east", "profile": "calm", "intervalSeconds": 3600}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{schedule:#}");

    let (status, deleted) = server.delete("/api/v1/clusters/east").await;
    assert_eq!(status, StatusCode::OK, "{deleted:#}");
    assert_eq!(deleted["name"], "east");
    assert_eq!(
        deleted["objects"], pushed["objects"],
        "{deleted:#} {pushed:#}"
    );
    assert_eq!(deleted["policyStateScopes"], 1, "{deleted:#}");
    assert_eq!(deleted["schedulesDeleted"], json!([schedule["id"]]));
    assert_eq!(deleted["decisionsExpired"], 2);

    let (status, body) = server.get("/api/v1/clusters/east").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
    let (status, _) = server.get("/api/v1/clusters/east/nodes").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, clusters) = server.get("/api/v1/clusters").await;
    let names: Vec<&str> = clusters["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["west"]);
    // The history stays: the run and its decisions, now expired with the reason.
    let (status, kept) = server.get(&format!("/api/v1/runs/{}", run["id"])).await;
    assert_eq!(status, StatusCode::OK, "{kept:#}");
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    for d in decisions["items"].as_array().unwrap() {
        assert_eq!(d["status"], "expired", "{d:#}");
        assert_eq!(d["statusReason"], "expired: cluster \"east\" was deleted");
    }
    let (status, _) = server
        .get(&format!("/api/v1/schedules/{}", schedule["id"]))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Pushed again, it starts afresh: no cooldown remembered from before.
    server.push("east", &small_cluster()).await;
    let (_, again) = server.run("east", "calm").await;
    assert_eq!(again["proposals"], 2, "{again:#}");

    let (status, body) = server.delete("/api/v1/clusters/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
    assert_error(&body, "not_found");
}
