//! Snapshot ingest, cluster listing, nodes with utilization, pods.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{ADMIN_TOKEN, TestServer, assert_error, list, node, pod, small_cluster};

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
            // Enabled, so its first run starts at once: should it still be in progress when
            // the cluster is deleted, it must not commit its cooldown to the cluster pushed
            // again below (the run fails instead: `cluster_deleted`).
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
    let (_, log) = server.get("/api/v1/audit?action=cluster.delete").await;
    let entries = log["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{log:#}");
    assert_eq!(
        entries[0]["object"],
        json!({"kind": "cluster", "id": "east"})
    );
    assert_eq!(entries[0]["detail"], deleted);

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

// ---- Hostile and careless pushes ------------------------------------------------------------

/// `[[…]]` nested `n` deep.
fn deep(n: usize) -> String {
    format!("{}{}", "[".repeat(n), "]".repeat(n))
}

/// The positions where a value nested 10,000 deep once aborted the server (a scalar or a
/// string map expected), as `(item with DEEP where the value goes, path reported)`.
const DEEP_POSITIONS: [(&str, &str); 5] = [
    (
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":DEEP}}"#,
        "items[0].metadata.name",
    ),
    (
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n9","labels":DEEP}}"#,
        "items[0].metadata.labels",
    ),
    (
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"shop","annotations":{"note":DEEP}}}"#,
        "items[0].metadata.annotations.note",
    ),
    (
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"shop"},"spec":{"nodeSelector":DEEP}}"#,
        "items[0].spec.nodeSelector",
    ),
    (
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n9"},"status":{"allocatable":{"cpu":DEEP}}}"#,
        "items[0].status.allocatable.cpu",
    ),
];

#[tokio::test]
async fn values_nested_ten_and_a_hundred_thousand_deep_are_refused_and_the_server_lives_on() {
    let server = TestServer::start().await;
    let good = server.push("east", &small_cluster()).await;
    let path = "/api/v1/clusters/east/snapshot";
    for n in [10_000, 100_000] {
        for (item, at) in DEEP_POSITIONS {
            let doc = format!(
                r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
                item.replace("DEEP", &deep(n))
            );
            // JSON, and the same text as YAML (flow style).
            for content_type in ["application/json", "application/yaml"] {
                let (status, body) = server.put_bytes(path, content_type, doc.clone()).await;
                assert_eq!(
                    status,
                    StatusCode::BAD_REQUEST,
                    "{content_type} {at}: {body:#}"
                );
                let message = assert_error(&body, "document_too_deep");
                assert!(message.contains("more than 100 levels"), "{message}");
                let reported = body["details"]["path"].as_str().unwrap();
                assert!(
                    reported.starts_with(at),
                    "{content_type}: {reported} vs {at}"
                );
                assert_eq!(body["details"]["line"], 1);
                assert_eq!(body["details"]["previousStateKept"], true);
            }
        }
    }
    // Still serving, with the state it had.
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
    let (status, east) = server.get("/api/v1/clusters/east").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(east["revision"], good["revision"]);
    assert_eq!((&east["nodes"], &east["pods"]), (&json!(3), &json!(5)));
}

#[tokio::test]
async fn every_json_and_yaml_body_is_bounded_in_depth() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    let deep_json = format!(r#"{{"profiles":{}}}"#, deep(10_000));
    let deep_yaml = format!("profiles: {}\n", deep(10_000));
    for (method, path, content_type, body) in [
        (
            "PUT",
            "/api/v1/profiles/deep",
            "application/json",
            &deep_json,
        ),
        (
            "PUT",
            "/api/v1/profiles/deep",
            "application/yaml",
            &deep_yaml,
        ),
        ("POST", "/api/v1/runs", "application/json", &deep_json),
        ("POST", "/api/v1/schedules", "application/json", &deep_json),
        ("PUT", "/api/v1/arbitration", "application/json", &deep_json),
        (
            "POST",
            "/api/v1/decisions/1/approve",
            "application/json",
            &deep_json,
        ),
        (
            "POST",
            "/api/v1/pod-migrations/1/abort",
            "application/json",
            &deep_json,
        ),
    ] {
        let request = server
            .client
            .request(method.parse().unwrap(), server.url(path))
            .header("content-type", content_type)
            .body(body.clone());
        let (status, body) = server.send(request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {body:#}");
        assert_error(&body, "document_too_deep");
        assert_eq!(
            body["details"]["path"],
            "profiles[0][0][0][0][0][0][0][0][0][0][0]…"
        );
    }
    // Repeated keys, too.
    let (status, body) = server
        .put_bytes(
            "/api/v1/profiles/twice",
            "application/json",
            r#"{"apiVersion":"descheduler/v1alpha2","kind":"DeschedulerPolicy","kind":"X"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    assert_error(&body, "duplicate_key");
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn what_is_not_one_list_is_refused_and_an_empty_list_needs_allow_empty() {
    let server = TestServer::start().await;
    let good = server.push("east", &small_cluster()).await;
    let path = "/api/v1/clusters/east/snapshot";

    // Not a List at all: 400, whatever the format.
    for (content_type, body, says) in [
        ("application/yaml", "null\n", "the document is null"),
        ("application/yaml", "~\n", "the document is null"),
        ("application/yaml", "", "the body is empty"),
        ("application/json", "", "the body is empty"),
        ("application/json", "null", "found null"),
        (
            "application/json",
            r#"{"apiVersion":"v1","kind":"List"}"#,
            "has no `items`",
        ),
        (
            "application/yaml",
            "apiVersion: v1\nkind: List\n",
            "has no `items`",
        ),
        (
            "application/json",
            r#"{"apiVersion":"v1","kind":"List","items":null}"#,
            "`items` is null",
        ),
        (
            "application/yaml",
            "kind: List\nitems:\n",
            "`items` is null",
        ),
        (
            "application/json",
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"solo"}}"#,
            "a single Node object",
        ),
    ] {
        let (status, response) = server.put_bytes(path, content_type, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}: {response:#}");
        let message = assert_error(&response, "not_a_list");
        assert!(message.contains(says), "{body:?}: {message}");
        assert_eq!(response["details"]["previousStateKept"], true);
    }

    // A List of nothing, or of no node and no pod: 409 unless the client says so.
    let empty = json!({"apiVersion": "v1", "kind": "List", "items": []});
    let namespaces_only =
        list([json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})]);
    for (list, objects) in [(&empty, 0), (&namespaces_only, 1)] {
        let (status, body) = server.put_json(path, list).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body:#}");
        let message = assert_error(&body, "empty_snapshot");
        assert!(
            message.contains(
                "replace the state of cluster \"east\" (3 node(s), 5 pod(s)) with nothing"
            ),
            "{message}"
        );
        assert!(message.contains("?allowEmpty=true"), "{message}");
        assert_eq!(body["details"]["objects"], objects);
        assert_eq!(body["details"]["previousStateKept"], true);
    }
    let (status, body) = server
        .put_json("/api/v1/clusters/brand-new/snapshot", &empty)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body:#}");
    assert!(assert_error(&body, "empty_snapshot").contains("create cluster \"brand-new\""));

    // Nothing changed so far.
    let (_, east) = server.get("/api/v1/clusters/east").await;
    assert_eq!(east["revision"], good["revision"]);
    assert_eq!((&east["nodes"], &east["pods"]), (&json!(3), &json!(5)));
    let (status, _) = server.get("/api/v1/clusters/brand-new").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Said explicitly, the cluster is emptied.
    let (status, body) = server
        .put_json(&format!("{path}?allowEmpty=true"), &namespaces_only)
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!((&body["nodes"], &body["pods"]), (&json!(0), &json!(0)));
    assert_eq!(body["counts"], json!({"Namespace": 1}));
}

#[tokio::test]
async fn objects_kubernetes_would_refuse_are_refused_where_they_are_wrong() {
    let server = TestServer::start().await;
    let good = server.push("east", &small_cluster()).await;
    let path = "/api/v1/clusters/east/snapshot";

    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit, &str, &str, &str)> = vec![
        (
            "negative cpu",
            Box::new(|c| c["items"][0]["status"]["allocatable"]["cpu"] = json!("-4")),
            "Node",
            "n1",
            "status.allocatable.cpu",
        ),
        (
            "negative request",
            Box::new(|c| {
                c["items"][3]["spec"]["containers"][0]["resources"]["requests"]["memory"] =
                    json!("-512Mi")
            }),
            "Pod",
            "web-1",
            "spec.containers[0].resources.requests.memory",
        ),
        (
            "a budget of abc%",
            Box::new(|c| {
                c["items"].as_array_mut().unwrap().push(json!({
                    "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "web", "namespace": "shop"},
                    "spec": {"minAvailable": "abc%", "selector": {"matchLabels": {"app": "web"}}}
                }))
            }),
            "PodDisruptionBudget",
            "web",
            "spec.minAvailable",
        ),
        (
            "two pods, one uid",
            Box::new(|c| c["items"][4]["metadata"]["uid"] = json!("uid-shop-web-1")),
            "Pod",
            "web-2",
            "metadata.uid",
        ),
        (
            "a node called ../../x",
            Box::new(|c| c["items"][0]["metadata"]["name"] = json!("../../x")),
            "Node",
            "../../x",
            "metadata.name",
        ),
        (
            "a megabyte name",
            Box::new(move |c| c["items"][1]["metadata"]["name"] = json!("x".repeat(1 << 20))),
            "Node",
            "",
            "metadata.name",
        ),
        (
            "a megabyte label key",
            Box::new(move |c| {
                c["items"][1]["metadata"]["labels"]["x".repeat(1 << 20)] = json!("v")
            }),
            "Node",
            "n2",
            "metadata.labels",
        ),
        (
            "a megabyte label value",
            Box::new(move |c| {
                c["items"][1]["metadata"]["labels"]["tier"] = json!("x".repeat(1 << 20))
            }),
            "Node",
            "n2",
            "metadata.labels.tier",
        ),
        (
            "a namespace with capitals",
            Box::new(|c| c["items"][8]["metadata"]["name"] = json!("Shop")),
            "Namespace",
            "Shop",
            "metadata.name",
        ),
    ];
    for (what, edit, kind, name, field) in cases {
        let mut cluster = small_cluster();
        edit(&mut cluster);
        let (status, body) = server.put_json(path, &cluster).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{what}: {body:#}");
        let message = assert_error(&body, "invalid_object");
        assert!(message.len() < 1000, "{what}: {} bytes", message.len());
        assert_eq!(body["details"]["kind"], kind, "{what}: {body:#}");
        if !name.is_empty() {
            assert_eq!(body["details"]["name"], name, "{what}: {body:#}");
        }
        let at = body["details"]["field"].as_str().unwrap();
        assert!(at.starts_with(field), "{what}: {at}");
        assert_eq!(body["details"]["previousStateKept"], true);
    }

    // Document-level: a repeated key (JSON and YAML), a second YAML document.
    let (status, body) = server
        .put_bytes(
            path,
            "application/json",
            r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"a","name":"b"}}]}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    assert_error(&body, "duplicate_key");
    assert_eq!(body["details"]["path"], "items[0].metadata");
    let yaml = serde_yaml::to_string(&small_cluster()).unwrap();
    let (status, body) = server
        .put_bytes(path, "application/yaml", format!("{yaml}apiVersion: v1\n"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    assert_error(&body, "duplicate_key");
    let (status, body) = server
        .put_bytes(
            path,
            "application/yaml",
            format!("{yaml}---\napiVersion: v1\nkind: List\nitems: []\n"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:#}");
    let message = assert_error(&body, "malformed_document");
    assert!(message.contains("a second YAML document"), "{message}");
    assert!(body["details"]["line"].as_u64().unwrap() > 1);

    // Content types: only JSON and YAML, said so.
    for content_type in [Some("application/octet-stream"), Some("text/plain"), None] {
        let mut request = server
            .client
            .put(server.url(path))
            .body(serde_json::to_vec(&small_cluster()).unwrap());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let (status, body) = server.send(request).await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}: {body:#}"
        );
        let message = assert_error(&body, "unsupported_media_type");
        assert!(
            message.contains("application/json, application/yaml"),
            "{message}"
        );
        assert_eq!(
            body["details"]["accepted"],
            json!([
                "application/json",
                "application/yaml",
                "application/x-yaml",
                "text/yaml"
            ])
        );
    }

    let (_, east) = server.get("/api/v1/clusters/east").await;
    assert_eq!(east["revision"], good["revision"]);
    assert_eq!((&east["nodes"], &east["pods"]), (&json!(3), &json!(5)));

    // The YAML aliases are accepted, and a valid push still goes through.
    for content_type in ["text/yaml", "application/x-yaml; charset=utf-8"] {
        let (status, body) = server.put_bytes(path, content_type, yaml.clone()).await;
        assert_eq!(status, StatusCode::OK, "{content_type}: {body:#}");
    }
}

/// A snapshot push over a raw connection whose last body byte is held back, so that the push
/// holds its slot for as long as the test wants.
struct HeldPush {
    stream: tokio::net::TcpStream,
    last: u8,
}

impl HeldPush {
    async fn start(server: &TestServer, cluster: &str, body: &Value) -> HeldPush {
        use tokio::io::AsyncWriteExt;
        let body = serde_json::to_vec(body).unwrap();
        let addr = server.base.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "PUT /api/v1/clusters/{cluster}/snapshot HTTP/1.1\r\nHost: {addr}\r\n\
             Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&body[..body.len() - 1]).await.unwrap();
        stream.flush().await.unwrap();
        HeldPush {
            stream,
            last: body[body.len() - 1],
        }
    }

    /// Send the last byte; the status of the response.
    async fn finish(mut self) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.stream.write_all(&[self.last]).await.unwrap();
        let mut response = Vec::new();
        self.stream.read_to_end(&mut response).await.unwrap();
        let text = String::from_utf8_lossy(&response);
        text.split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {text:?}"))
    }
}

async fn pushes_metric(server: &TestServer, name: &str) -> f64 {
    let text = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    crate::support::metric_value(&text, name)
}

/// Wait (polling; no time is asserted) until the push gauge `name` reads `value`.
async fn until_pushes(server: &TestServer, name: &str, value: f64) {
    while pushes_metric(server, name).await != value {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn pushes_beyond_the_slots_wait_or_get_503_with_retry_after() {
    // No waiting: a second push while one holds the only slot is refused at once.
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.max_concurrent_snapshot_pushes = 1;
        s.snapshot_push_max_wait_ms = 0;
    })
    .await;
    let held = HeldPush::start(&server, "east", &small_cluster()).await;
    until_pushes(&server, "rebalancer_snapshot_pushes_in_progress", 1.0).await;
    let response = server
        .client
        .put(server.url("/api/v1/clusters/west/snapshot"))
        .json(&small_cluster())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: Value = response.json().await.unwrap();
    let message = assert_error(&body, "snapshot_pushes_busy");
    assert!(
        message.contains("--max-concurrent-snapshot-pushes"),
        "{message}"
    );
    assert_eq!(
        pushes_metric(&server, "rebalancer_snapshot_pushes_refused_total").await,
        1.0
    );
    // The held push was not disturbed, and its slot is free again once it is done.
    assert_eq!(held.finish().await, 201);
    until_pushes(&server, "rebalancer_snapshot_pushes_in_progress", 0.0).await;
    server.push("west", &small_cluster()).await;

    // Waiting allowed: the second push waits for the slot, then goes through.
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.max_concurrent_snapshot_pushes = 1;
        s.snapshot_push_max_wait_ms = 3_600_000;
    })
    .await;
    let held = HeldPush::start(&server, "east", &small_cluster()).await;
    until_pushes(&server, "rebalancer_snapshot_pushes_in_progress", 1.0).await;
    let waiting = tokio::spawn({
        let (client, url) = (
            server.client.clone(),
            server.url("/api/v1/clusters/west/snapshot"),
        );
        async move {
            client
                .put(url)
                .json(&small_cluster())
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    until_pushes(&server, "rebalancer_snapshot_pushes_waiting", 1.0).await;
    assert!(!waiting.is_finished());
    assert_eq!(held.finish().await, 201);
    assert_eq!(waiting.await.unwrap(), StatusCode::CREATED);
    assert_eq!(
        pushes_metric(&server, "rebalancer_snapshot_pushes_refused_total").await,
        0.0
    );
}
