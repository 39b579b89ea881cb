//! Evictions through the `pods/eviction` subresource: 201 (pod gone, PDB decremented, DELETED
//! event), 429 from a PDB at 0, 404, 409 on a UID precondition, two PDBs (500), PDB-less pods,
//! scripted outcomes, the record of every request, and kube-rs's `Api::evict` body quirk.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, PostParams, WatchEvent, WatchParams};
use kube::core::Status;
use rebalancer_kube_fake::{EvictionOutcome, EvictionRecord, FakeApiServer};
use serde_json::{Value, json};

use crate::common::{api_error, client, next, pod};

fn pdb(name: &str, selector: Value, allowed: i64) -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": selector, "maxUnavailable": 1},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
    })
}

fn allowed(server: &FakeApiServer, name: &str) -> i64 {
    server
        .get("policy/v1", "PodDisruptionBudget", "ns", name)
        .unwrap()["status"]["disruptionsAllowed"]
        .as_i64()
        .unwrap()
}

fn eviction_body(name: &str, uid: Option<&str>, annotations: &[(&str, &str)]) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        delete_options: Some(DeleteOptions {
            grace_period_seconds: Some(7),
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.into()),
                resource_version: None,
            }),
            ..DeleteOptions::default()
        }),
    }
}

#[tokio::test]
async fn eviction_allowed_by_a_pdb_deletes_the_pod_and_decrements_the_budget() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "web-1", json!({"app": "web"}), "n1"));
    server.apply(pdb("web", json!({"matchLabels": {"app": "web"}}), 1));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut watch = api
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();

    let status = api.evict("web-1", &EvictParams::default()).await.unwrap();
    assert_eq!(status.code, 201);
    assert!(status.is_success());
    assert!(server.get("v1", "Pod", "ns", "web-1").is_none());
    assert_eq!(allowed(&server, "web"), 0);
    let budget = server
        .get("policy/v1", "PodDisruptionBudget", "ns", "web")
        .unwrap();
    assert!(budget["status"]["disruptedPods"]["web-1"].is_string());
    match next(&mut watch).await.unwrap() {
        WatchEvent::Deleted(p) => assert_eq!(p.name_any(), "web-1"),
        other => panic!("unexpected {other:?}"),
    }
    let records = server.evictions();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].name.as_str(), records[0].status),
        ("web-1", 201)
    );
}

#[tokio::test]
async fn pdb_at_zero_refuses_with_429() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "web-1", json!({"app": "web", "tier": "x"}), "n1"));
    server.apply(pdb(
        "web",
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}),
        0,
    ));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let status = api_error(api.evict("web-1", &EvictParams::default()).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &status.details.unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget web needs 2 healthy pods and has 3 currently"
    );
    assert!(server.get("v1", "Pod", "ns", "web-1").is_some());
    assert_eq!(server.evictions()[0].status, 429);

    // A pod that is not running is evicted regardless of its budget, as on a real server.
    let mut failed = pod("ns", "web-2", json!({"app": "web"}), "n1");
    failed["status"]["phase"] = json!("Failed");
    server.apply(failed);
    assert_eq!(
        api.evict("web-2", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    assert_eq!(allowed(&server, "web"), 0);
}

#[tokio::test]
async fn missing_pods_uid_preconditions_and_two_budgets() {
    let server = FakeApiServer::start().await;
    let created = server.apply(pod("ns", "a", json!({"app": "web"}), "n1"));
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");

    let status = api_error(api.evict("ghost", &EvictParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));

    let body = eviction_body("a", Some("not-the-uid"), &[("reason", "rebalance")]);
    let result = api
        .create_subresource::<_, Status>("eviction", "a", &PostParams::default(), &body)
        .await;
    let status = api_error(result);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains(&format!(
            "Precondition failed: UID in precondition: not-the-uid, UID in object meta: {uid}"
        )),
        "{}",
        status.message
    );

    server.apply(pdb("one", json!({"matchLabels": {"app": "web"}}), 5));
    server.apply(pdb("two", json!({}), 5));
    server.apply(pdb("unrelated", json!({"matchLabels": {"app": "db"}}), 0));
    let body = eviction_body("a", Some(&uid), &[]);
    let status = api_error(
        api.create_subresource::<_, Status>("eviction", "a", &PostParams::default(), &body)
            .await,
    );
    assert_eq!(status.code, 500);
    assert!(
        status.message.contains("more than one PodDisruptionBudget"),
        "{}",
        status.message
    );
    assert_eq!((allowed(&server, "one"), allowed(&server, "two")), (5, 5));

    server.delete("policy/v1", "PodDisruptionBudget", "ns", "two");
    let status: Status = api
        .create_subresource("eviction", "a", &PostParams::default(), &body)
        .await
        .unwrap();
    assert_eq!(status.code, 201);
    assert_eq!(allowed(&server, "one"), 4);

    let records = server.evictions();
    assert_eq!(
        records.iter().map(|r| r.status).collect::<Vec<_>>(),
        [404, 409, 500, 201]
    );
    assert_eq!(
        records[1],
        EvictionRecord {
            namespace: "ns".into(),
            name: "a".into(),
            uid_precondition: Some("not-the-uid".into()),
            grace_period_seconds: Some(7),
            annotations: BTreeMap::from([("reason".to_string(), "rebalance".to_string())]),
            status: 409,
        }
    );
}

#[tokio::test]
async fn scripted_outcomes_override_until_cleared() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");

    server.script_eviction("ns", "a", EvictionOutcome::ServerError);
    for _ in 0..2 {
        let status = api_error(api.evict("a", &EvictParams::default()).await);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (500, "InternalError")
        );
    }
    server.script_eviction("ns", "a", EvictionOutcome::TooManyRequests);
    assert_eq!(
        api_error(api.evict("a", &EvictParams::default()).await).code,
        429
    );
    server.script_eviction("ns", "a", EvictionOutcome::NotFound);
    assert_eq!(
        api_error(api.evict("a", &EvictParams::default()).await).code,
        404
    );
    server.script_eviction("ns", "ghost", EvictionOutcome::TooManyRequests);
    assert_eq!(
        api_error(api.evict("ghost", &EvictParams::default()).await).code,
        429
    );
    assert!(server.get("v1", "Pod", "ns", "a").is_some());

    server.script_eviction("ns", "a", EvictionOutcome::Default);
    assert_eq!(
        api.evict("a", &EvictParams::default()).await.unwrap().code,
        201
    );
    assert!(server.get("v1", "Pod", "ns", "a").is_none());
    let statuses: Vec<u16> = server.evictions().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [500, 500, 429, 404, 429, 201]);
}

/// kube-rs 5's `Api::evict` sends its options as `delete_options`; a real server drops that
/// unknown field (with a warning), so the UID precondition is not applied. The fake does the
/// same. Should kube-rs start sending `deleteOptions`, this test fails and the 409 applies.
#[tokio::test]
async fn kube_evict_options_are_dropped_like_on_a_real_server() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let params = EvictParams {
        delete_options: Some(
            DeleteParams::default().preconditions(kube::api::Preconditions {
                uid: Some("wrong".into()),
                resource_version: None,
            }),
        ),
        ..EvictParams::default()
    };
    assert_eq!(api.evict("a", &params).await.unwrap().code, 201);
    assert_eq!(server.evictions()[0].uid_precondition, None);

    // The answer carries the real server's warning about the dropped field.
    server.apply(pod("ns", "b", json!({}), "n1"));
    let body = json!({"metadata": {"name": "b"}, "delete_options": {"gracePeriodSeconds": 1}});
    let request = http::Request::post("/api/v1/namespaces/ns/pods/b/eviction")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let response = client(&server).send(request).await.unwrap();
    assert_eq!(response.status(), 201);
    let warnings: Vec<&str> = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(warnings, [r#"299 - "unknown field \"delete_options\"""#]);
}
