//! Evictions through the `pods/eviction` subresource: 201 (pod terminating, PDB decremented,
//! MODIFIED then DELETED once the kubelet stand-in finishes), 429 from a PDB at 0 or not yet
//! processed, 403 from a negative budget, unready pods, 404, 409 on a UID precondition, two PDBs
//! (500), empty selectors, PDB-less pods, double evictions of a terminating pod, scripted
//! outcomes, the record of every request, and kube-rs's `Api::evict` body quirk.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, PostParams, WatchEvent, WatchParams};
use kube::core::Status;
use rebalancer_kube_fake::{EvictionOutcome, EvictionRecord, FakeApiServer, Kubelet};
use serde_json::{Value, json};

use crate::common::{api_error, client, next, pod, uid_of};

fn pdb(name: &str, selector: Value, allowed: i64) -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": selector, "maxUnavailable": 1},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 3, "desiredHealthy": 2,
                   "expectedPods": 3, "observedGeneration": 1}
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
async fn eviction_allowed_by_a_pdb_terminates_the_pod_and_decrements_the_budget() {
    let server = FakeApiServer::start().await;
    server.set_kubelet(Kubelet::Manual);
    let created = server.apply(pod("ns", "web-1", json!({"app": "web"}), "n1"));
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
    assert_eq!(allowed(&server, "web"), 0);
    let budget = server
        .get("policy/v1", "PodDisruptionBudget", "ns", "web")
        .unwrap();
    assert!(budget["status"]["disruptedPods"]["web-1"].is_string());
    let condition = &budget["status"]["conditions"][0];
    assert_eq!(
        (
            &condition["type"],
            &condition["status"],
            &condition["reason"]
        ),
        (
            &json!("DisruptionAllowed"),
            &json!("False"),
            &json!("InsufficientPods")
        )
    );
    // Running on a node: the pod stays, terminating, until its kubelet is done.
    let terminating = match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(p) => p,
        other => panic!("unexpected {other:?}"),
    };
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(server.finish_termination("ns", "web-1"));
    match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(p) => {
            assert_eq!(p.metadata.deletion_grace_period_seconds, Some(0));
        }
        other => panic!("unexpected {other:?}"),
    }
    match next(&mut watch).await.unwrap() {
        WatchEvent::Deleted(p) => assert_eq!(p.name_any(), "web-1"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(server.get("v1", "Pod", "ns", "web-1").is_none());
    let records = server.evictions();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].name.as_str(), records[0].status),
        ("web-1", 201)
    );
    assert_eq!(records[0].uid.as_deref(), Some(uid_of(&created).as_str()));
    assert_eq!(server.evictions_of(&uid_of(&created)), 1);
}

/// The double eviction a client must avoid: a terminating pod is evicted again with 201
/// (`canIgnorePDB`), without its budget being asked.
#[tokio::test]
async fn evicting_a_terminating_pod_succeeds_again() {
    let server = FakeApiServer::start().await;
    server.set_kubelet(Kubelet::Manual);
    let created = server.apply(pod("ns", "web-1", json!({"app": "web"}), "n1"));
    server.apply(pdb("web", json!({"matchLabels": {"app": "web"}}), 1));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    assert_eq!(
        api.evict("web-1", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    assert_eq!(allowed(&server, "web"), 0);
    assert_eq!(
        api.evict("web-1", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201,
        "a budget at 0 does not protect a pod already terminating"
    );
    let uid = uid_of(&created);
    assert_eq!(server.evictions_of(&uid), 2);
    assert_eq!(server.evictions_of("another-uid"), 0);
    let still = server.get("v1", "Pod", "ns", "web-1").unwrap();
    assert_eq!(still["metadata"]["deletionGracePeriodSeconds"], 30);

    // Once gone, a same-named replacement has another uid and its own count.
    assert!(server.finish_termination("ns", "web-1"));
    let replacement = server.apply(pod("ns", "web-1", json!({"app": "other"}), "n2"));
    assert_eq!(
        api.evict("web-1", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    assert_eq!(server.evictions_of(&uid), 2);
    assert_eq!(server.evictions_of(&uid_of(&replacement)), 1);
}

#[tokio::test]
async fn budgets_not_yet_processed_or_negative_refuse() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "web-1", json!({"app": "web"}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");

    // Created without a status: the disruption controller has not processed it yet.
    let fresh = server.apply(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}
    }));
    assert_eq!(fresh["metadata"]["generation"], 1);
    let request = http::Request::post("/api/v1/namespaces/ns/pods/web-1/eviction")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "web-1", "namespace": "ns"}}))
            .unwrap(),
        ))
        .unwrap();
    let response = client(&server).send(request).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()[http::header::RETRY_AFTER], "10");
    let status = api_error(api.evict("web-1", &EvictParams::default()).await);
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let details = status.details.unwrap();
    assert_eq!(details.retry_after_seconds, 10);
    assert_eq!(details.causes[0].reason, "DisruptionBudget");
    assert_eq!(
        details.causes[0].message,
        "The disruption budget web is still being processed by the server."
    );

    // Processed, but an older generation than the spec's.
    server.set_status(
        "policy/v1",
        "PodDisruptionBudget",
        "ns",
        "web",
        json!({"disruptionsAllowed": 1, "observedGeneration": 0}),
    );
    assert_eq!(
        api_error(api.evict("web-1", &EvictParams::default()).await).code,
        429
    );

    server.set_status(
        "policy/v1",
        "PodDisruptionBudget",
        "ns",
        "web",
        json!({"disruptionsAllowed": -1, "observedGeneration": 1}),
    );
    let status = api_error(api.evict("web-1", &EvictParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "poddisruptionbudget.policy \"web\" is forbidden: pdb disruptions allowed is negative"
    );
    assert!(
        server.get("v1", "Pod", "ns", "web-1").unwrap()["metadata"]["deletionTimestamp"].is_null()
    );
}

/// An unready pod of a healthy budget is evicted without using up a disruption; a budget with
/// an empty selector protects nothing in the eviction handler.
#[tokio::test]
async fn unready_pods_and_empty_selectors() {
    let server = FakeApiServer::start().await;
    let mut unready = pod("ns", "web-1", json!({"app": "web"}), "n1");
    unready["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    server.apply(unready);
    server.apply(pdb("web", json!({"matchLabels": {"app": "web"}}), 0));
    server.apply(pdb("everything", json!({}), 0));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    assert_eq!(
        api.evict("web-1", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    assert_eq!(allowed(&server, "web"), 0);
    let pod = server.get("v1", "Pod", "ns", "web-1").unwrap();
    assert!(pod["metadata"]["deletionTimestamp"].is_string());
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
    assert_eq!(
        status.message,
        format!(
            "Operation cannot be fulfilled on Pod \"a\": the UID in the precondition (not-the-uid) \
             does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );

    server.apply(pdb("one", json!({"matchLabels": {"app": "web"}}), 5));
    server.apply(pdb(
        "two",
        json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
        5,
    ));
    server.apply(pdb("unrelated", json!({"matchLabels": {"app": "db"}}), 0));
    let body = eviction_body("a", Some(&uid), &[]);
    let status = api_error(
        api.create_subresource::<_, Status>("eviction", "a", &PostParams::default(), &body)
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (500, ""));
    assert_eq!(
        status.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
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
            uid: Some(uid.clone()),
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
    let evicted = server.get("v1", "Pod", "ns", "a").unwrap();
    assert!(evicted["metadata"]["deletionTimestamp"].is_string());
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
