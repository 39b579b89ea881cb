//! Writes: create (409 AlreadyExists, generateName), replace (409 on a stale resourceVersion),
//! merge / strategic / JSON / apply patches, the status subresource, deletes with
//! preconditions, leases as a leader-election loop uses them, custom resources, metrics,
//! unknown resources, and the RBAC accesses recorded for each verb.

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions, WatchParams,
};
use kube::core::GroupVersionKind;
use rebalancer_kube_fake::{Access, FakeApiServer, OptionalGroup};
use serde_json::json;

use crate::common::{api_error, client, next, pod};

fn typed<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn create_conflicts_and_generate_name() {
    let server = FakeApiServer::start().await;
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let created = api
        .create(
            &PostParams::default(),
            &typed(pod("ns", "a", json!({}), "n1")),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.resource_version.as_deref(), Some("1"));
    assert_eq!(created.metadata.uid.as_deref().map(str::len), Some(36));
    assert_eq!(
        server.get("v1", "Pod", "ns", "a").unwrap()["metadata"]["uid"],
        json!(created.metadata.uid)
    );

    let status = api_error(
        api.create(
            &PostParams::default(),
            &typed(pod("ns", "a", json!({}), "n1")),
        )
        .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(status.message, "pods \"a\" already exists");

    let mut generated: Pod = typed(pod("ns", "", json!({}), "n1"));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let made = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    assert!(
        made.name_any().starts_with("gen-") && made.name_any().len() == 9,
        "{}",
        made.name_any()
    );

    let wrong_ns: Pod = typed(pod("elsewhere", "b", json!({}), "n1"));
    assert_eq!(
        api_error(api.create(&PostParams::default(), &wrong_ns).await).code,
        400
    );
    let dry = api
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &typed(pod("ns", "dry", json!({}), "n1")),
        )
        .await
        .unwrap();
    assert_eq!(dry.name_any(), "dry");
    assert!(server.get("v1", "Pod", "ns", "dry").is_none());
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_conflicts() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({"v": "1"}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut current = api.get("a").await.unwrap();
    let stale = current.clone();
    current.labels_mut().insert("v".into(), "2".into());
    let replaced = api
        .replace("a", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(replaced.labels()["v"], "2");
    assert_eq!(replaced.metadata.uid, stale.metadata.uid);
    assert!(replaced.resource_version() > stale.resource_version());

    let status = api_error(api.replace("a", &PostParams::default(), &stale).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );

    let mut unconditional = stale.clone();
    unconditional.metadata.resource_version = None;
    assert!(
        api.replace("a", &PostParams::default(), &unconditional)
            .await
            .is_ok()
    );
    let missing: Pod = typed(pod("ns", "missing", json!({}), "n1"));
    assert_eq!(
        api_error(
            api.replace("missing", &PostParams::default(), &missing)
                .await
        )
        .code,
        404
    );
}

#[tokio::test]
async fn patches() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({"keep": "1", "drop": "1"}), "n1"));
    let client = client(&server);
    let api: Api<Pod> = Api::namespaced(client.clone(), "ns");

    let merge = json!({"metadata": {"labels": {"drop": null, "new": "x"}}});
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    let labels: BTreeSet<&str> = patched.labels().keys().map(String::as_str).collect();
    assert_eq!(labels, BTreeSet::from(["keep", "new"]));

    let strategic = json!({"metadata": {"annotations": {"a": "b"}}});
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::Strategic(&strategic))
        .await
        .unwrap();
    assert_eq!(patched.annotations()["a"], "b");

    // JSON patch: kube's `Patch::Json` needs a feature the workspace does not enable, so the
    // request is built by hand and sent through the same client.
    let ops = json!([
        {"op": "test", "path": "/metadata/labels/keep", "value": "1"},
        {"op": "replace", "path": "/metadata/labels/keep", "value": "2"}
    ]);
    let json_patch = |ops: &serde_json::Value| {
        http::Request::patch("/api/v1/namespaces/ns/pods/a")
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .body(serde_json::to_vec(ops).unwrap())
            .unwrap()
    };
    let patched: Pod = client.request(json_patch(&ops)).await.unwrap();
    assert_eq!(patched.labels()["keep"], "2");
    let status = api_error(client.request::<Pod>(json_patch(&ops)).await);
    assert_eq!(status.code, 422, "the test op fails now");

    let stale_rv = json!({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}});
    assert_eq!(
        api_error(
            api.patch("a", &PatchParams::default(), &Patch::Merge(&stale_rv))
                .await
        )
        .code,
        409
    );

    let apply = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "applied", "labels": {"ssa": "1"}},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let created = api
        .patch(
            "applied",
            &PatchParams::apply("test-manager"),
            &Patch::Apply(&apply),
        )
        .await
        .unwrap();
    assert_eq!(created.labels()["ssa"], "1");
    let again = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "applied", "labels": {"more": "2"}}});
    let merged = api
        .patch(
            "applied",
            &PatchParams::apply("test-manager"),
            &Patch::Apply(&again),
        )
        .await
        .unwrap();
    assert_eq!(merged.labels().len(), 2);
    let missing = api
        .patch("nope", &PatchParams::default(), &Patch::Merge(&merge))
        .await;
    assert_eq!(api_error(missing).code, 404);
}

#[tokio::test]
async fn status_subresource_writes_only_status() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");

    let main = json!({"spec": {"nodeName": "moved"}, "status": {"phase": "Failed"}});
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&main))
        .await
        .unwrap();
    assert_eq!(
        patched.spec.as_ref().unwrap().node_name.as_deref(),
        Some("moved")
    );
    assert_eq!(
        patched.status.as_ref().unwrap().phase.as_deref(),
        Some("Running"),
        "status kept"
    );

    let status = json!({"spec": {"nodeName": "ignored"}, "status": {"phase": "Succeeded"}});
    let patched = api
        .patch_status("a", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        patched.status.as_ref().unwrap().phase.as_deref(),
        Some("Succeeded")
    );
    assert_eq!(
        patched.spec.as_ref().unwrap().node_name.as_deref(),
        Some("moved"),
        "spec kept"
    );

    let mut object = api.get_status("a").await.unwrap();
    object.status.as_mut().unwrap().phase = Some("Pending".into());
    object.spec.as_mut().unwrap().node_name = Some("ignored-again".into());
    let replaced = api
        .replace_status("a", &PostParams::default(), &object)
        .await
        .unwrap();
    assert_eq!(replaced.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(replaced.spec.unwrap().node_name.as_deref(), Some("moved"));

    let leases: Api<Lease> = Api::namespaced(client(&server), "ns");
    let err = leases
        .patch_status("x", &PatchParams::default(), &Patch::Merge(&status))
        .await;
    assert_eq!(
        api_error(err).code,
        404,
        "leases have no status subresource"
    );
}

#[tokio::test]
async fn deletes_with_preconditions() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    server.apply(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": "pdb", "namespace": "ns"}, "spec": {"selector": {}}}),
    );
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let uid = api.get("a").await.unwrap().metadata.uid.unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();

    let wrong_uid = DeleteParams::default().preconditions(Preconditions {
        uid: Some("nope".into()),
        resource_version: None,
    });
    let status = api_error(api.delete("a", &wrong_uid).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        format!(
            "Operation cannot be fulfilled on Pod \"a\": the UID in the precondition (nope) does \
             not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    let wrong_rv = DeleteParams::default().preconditions(Preconditions {
        uid: None,
        resource_version: Some("999".into()),
    });
    assert_eq!(api_error(api.delete("a", &wrong_rv).await).code, 409);

    // Grace 0: the pod goes at once, after an update marking it deleted (as a real server).
    let right = DeleteParams::default()
        .grace_period(0)
        .preconditions(Preconditions {
            uid: Some(uid),
            resource_version: None,
        });
    let deleted = api.delete("a", &right).await.unwrap();
    assert_eq!(
        deleted.left().map(|p| p.name_any()).as_deref(),
        Some("a"),
        "pods return the deleted object"
    );
    assert!(server.get("v1", "Pod", "ns", "a").is_none());
    match next(&mut watch).await.unwrap() {
        kube::api::WatchEvent::Modified(p) => {
            assert_eq!(p.resource_version().as_deref(), Some("3"));
            assert_eq!(p.metadata.deletion_grace_period_seconds, Some(0));
        }
        other => panic!("unexpected {other:?}"),
    }
    match next(&mut watch).await.unwrap() {
        kube::api::WatchEvent::Deleted(p) => assert_eq!(p.resource_version().as_deref(), Some("4")),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        api_error(api.delete("a", &DeleteParams::default()).await).code,
        404
    );

    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client(&server), "ns");
    let status = pdbs
        .delete("pdb", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .unwrap();
    assert_eq!(status.details.unwrap().name, "pdb");

    for i in 0..3 {
        server.apply(pod(
            "ns",
            &format!("p{i}"),
            json!({"group": if i < 2 { "x" } else { "y" }}),
            "n1",
        ));
    }
    let gone = api
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &ListParams::default().labels("group=x"),
        )
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(gone.items.len(), 2);
    assert_eq!(server.list("v1", "Pod").len(), 1);
}

#[tokio::test]
async fn lease_crud_for_leader_election() {
    let server = FakeApiServer::start().await;
    let leases: Api<Lease> = Api::namespaced(client(&server), "kube-system");
    assert_eq!(api_error(leases.get("rebalancer").await).code, 404);
    let lease: Lease = typed(json!({"metadata": {"name": "rebalancer"},
                                    "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}));
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    assert_eq!(
        api_error(leases.create(&PostParams::default(), &lease).await).code,
        409
    );

    let mut mine = leases.get("rebalancer").await.unwrap();
    let mut theirs = mine.clone();
    mine.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases
        .replace("rebalancer", &PostParams::default(), &mine)
        .await
        .unwrap();
    theirs.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let status = api_error(
        leases
            .replace("rebalancer", &PostParams::default(), &theirs)
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    let now = leases.get("rebalancer").await.unwrap();
    assert_eq!(now.spec.unwrap().holder_identity.as_deref(), Some("b"));
    assert_eq!(now.metadata.uid, created.metadata.uid);
}

#[tokio::test]
async fn custom_resources_metrics_and_unknown_resources() {
    let server =
        FakeApiServer::start_with(&[OptionalGroup::Reservation, OptionalGroup::Metrics]).await;
    let client = client(&server);
    let reservation = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.koordinator.sh", "v1alpha1", "Reservation"),
        "reservations",
    );
    let reservations: Api<DynamicObject> = Api::all_with(client.clone(), &reservation);
    let object: DynamicObject = typed(
        json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
                                            "metadata": {"name": "r1"}, "spec": {"ttl": "1h"}}),
    );
    reservations
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    assert!(server.set_status(
        "scheduling.koordinator.sh/v1alpha1",
        "Reservation",
        "",
        "r1",
        json!({"phase": "Available", "nodeName": "n1"})
    ));
    assert!(!server.set_status(
        "scheduling.koordinator.sh/v1alpha1",
        "Reservation",
        "",
        "nope",
        json!({})
    ));
    let got = reservations.get("r1").await.unwrap();
    assert_eq!(got.data["status"]["phase"], "Available");
    let strategic = reservations
        .patch(
            "r1",
            &PatchParams::default(),
            &Patch::Strategic(&json!({"spec": {"ttl": "2h"}})),
        )
        .await;
    assert_eq!(
        api_error(strategic).code,
        415,
        "custom resources refuse strategic merge patch"
    );
    let patched = reservations
        .patch_status(
            "r1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["phase"], "Succeeded");

    server.apply(json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
                        "metadata": {"name": "n1"}, "timestamp": "2025-01-01T00:00:00Z", "window": "30s",
                        "usage": {"cpu": "250m", "memory": "1Gi"}}));
    let node_metrics = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "NodeMetrics"),
        "nodes",
    );
    let metrics: Api<DynamicObject> = Api::all_with(client.clone(), &node_metrics);
    let list = metrics.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].data["usage"]["cpu"], "250m");
    assert_eq!(metrics.get("n1").await.unwrap().data["window"], "30s");
    let status = api_error(
        metrics
            .watch(&WatchParams::default(), "0")
            .await
            .map(|_| ()),
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (405, "MethodNotAllowed")
    );

    let node_metric = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("slo.koordinator.sh", "v1alpha1", "NodeMetric"),
        "nodemetrics",
    );
    let disabled: Api<DynamicObject> = Api::all_with(client.clone(), &node_metric);
    assert_eq!(
        api_error(disabled.list(&ListParams::default()).await).code,
        404
    );
    server.enable_group(OptionalGroup::NodeMetric);
    assert!(
        disabled
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
    let status = api_error(config_maps.list(&ListParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    let namespaces: Api<Namespace> = Api::all(client);
    namespaces
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "team-a"}})),
        )
        .await
        .unwrap();
    assert_eq!(server.list("v1", "Namespace").len(), 1);
}

#[tokio::test]
async fn accesses_are_recorded_with_rbac_verbs() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    let client = client(&server);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    pods.get("a").await.unwrap();
    pods.list(&ListParams::default()).await.unwrap();
    let mut watch = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    next(&mut watch).await.unwrap();
    pods.create(
        &PostParams::default(),
        &typed(pod("ns", "b", json!({}), "n1")),
    )
    .await
    .unwrap();
    let b = pods.get("b").await.unwrap();
    pods.replace("b", &PostParams::default(), &b).await.unwrap();
    pods.patch("b", &PatchParams::default(), &Patch::Merge(&json!({})))
        .await
        .unwrap();
    pods.patch_status("b", &PatchParams::default(), &Patch::Merge(&json!({})))
        .await
        .unwrap();
    pods.delete("b", &DeleteParams::default()).await.unwrap();
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    let _ = pods.evict("a", &Default::default()).await;
    let _ = Api::<Lease>::namespaced(client.clone(), "ns")
        .get("missing")
        .await;
    let _ = Api::<ConfigMap>::namespaced(client, "ns")
        .get("missing")
        .await;

    let access = |verb: &str, group: &str, resource: &str, sub: &str| Access {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
    };
    let expected = BTreeSet::from([
        access("get", "", "pods", ""),
        access("list", "", "pods", ""),
        access("watch", "", "pods", ""),
        access("create", "", "pods", ""),
        access("update", "", "pods", ""),
        access("patch", "", "pods", ""),
        access("patch", "", "pods", "status"),
        access("delete", "", "pods", ""),
        access("deletecollection", "", "pods", ""),
        access("create", "", "pods", "eviction"),
        access("get", "coordination.k8s.io", "leases", ""),
        access("get", "", "configmaps", ""),
    ]);
    assert_eq!(server.accesses(), expected);
    assert!(server.request_count() >= 13);
}

/// Server-side apply conflicts between field managers, as a lease-locking loop built on apply
/// (kube-lease-manager) relies on.
#[tokio::test]
async fn apply_conflicts_between_field_managers() {
    let server = FakeApiServer::start().await;
    let leases: Api<Lease> = Api::namespaced(client(&server), "ns");
    let lock = |holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"},
               "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})
    };
    leases
        .patch(
            "lock",
            &PatchParams::apply("mgr-a"),
            &Patch::Apply(lock("a")),
        )
        .await
        .unwrap();
    // Re-applying one's own fields, or another manager applying the same values, is fine.
    leases
        .patch(
            "lock",
            &PatchParams::apply("mgr-a"),
            &Patch::Apply(lock("a")),
        )
        .await
        .unwrap();
    leases
        .patch(
            "lock",
            &PatchParams::apply("mgr-b"),
            &Patch::Apply(lock("a")),
        )
        .await
        .unwrap();

    let status = api_error(
        leases
            .patch(
                "lock",
                &PatchParams::apply("mgr-b"),
                &Patch::Apply(lock("b")),
            )
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"mgr-a\" using coordination.k8s.io/v1: .spec.holderIdentity"
    );
    assert_eq!(
        status.details.unwrap().causes[0].field,
        ".spec.holderIdentity"
    );

    // The holder releases with a plain patch; the field is gone and so is its owner.
    let release = json!({"spec": {"holderIdentity": null}});
    let params = PatchParams {
        field_manager: Some("mgr-a".into()),
        ..PatchParams::default()
    };
    leases
        .patch("lock", &params, &Patch::Strategic(&release))
        .await
        .unwrap();
    let taken = leases
        .patch(
            "lock",
            &PatchParams::apply("mgr-b"),
            &Patch::Apply(lock("b")),
        )
        .await
        .unwrap();
    assert_eq!(taken.spec.unwrap().holder_identity.as_deref(), Some("b"));

    let status = api_error(
        leases
            .patch(
                "lock",
                &PatchParams::apply("mgr-a"),
                &Patch::Apply(lock("a")),
            )
            .await,
    );
    assert_eq!(status.code, 409);
    let forced = leases
        .patch(
            "lock",
            &PatchParams::apply("mgr-a").force(),
            &Patch::Apply(lock("a")),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.unwrap().holder_identity.as_deref(), Some("a"));
}
