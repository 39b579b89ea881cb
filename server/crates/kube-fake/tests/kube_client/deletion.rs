//! Deletion as a real API server does it: graceful termination of pods bound to a node (the
//! deletionTimestamp, a second delete that may only shorten the grace, the kubelet stand-in in
//! each mode), immediate removal of unbound and terminal pods and of grace 0, and finalizers
//! holding any kind until an update empties them.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, WatchEvent, WatchParams};
use rebalancer_kube_fake::{FakeApiServer, Kubelet};
use serde_json::json;

use crate::common::{api_error, client, next, pod};

fn deletion_secs(p: &Pod) -> i64 {
    p.metadata
        .deletion_timestamp
        .as_ref()
        .expect("a deletionTimestamp")
        .0
        .as_second()
}

#[tokio::test]
async fn a_running_pod_terminates_gracefully_and_a_second_delete_only_shortens() {
    let server = FakeApiServer::start().await;
    server.set_kubelet(Kubelet::Manual);
    let mut spec = pod("ns", "web-1", json!({}), "n1");
    spec["spec"]["terminationGracePeriodSeconds"] = json!(45);
    let created = server.apply(spec);
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut watch = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();

    let before = k8s_openapi::jiff::Timestamp::now().as_second();
    let answer = api
        .delete("web-1", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("a pod delete answers with the pod");
    assert_eq!(answer.metadata.deletion_grace_period_seconds, Some(45));
    let at = deletion_secs(&answer);
    assert!(
        (before + 44..=before + 46).contains(&at),
        "{at} vs {before}"
    );
    assert_ne!(
        answer.resource_version(),
        created["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string)
    );
    match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(p) => assert_eq!(p.resource_version(), answer.resource_version()),
        other => panic!("unexpected {other:?}"),
    }

    // Longer, or no grace: accepted, nothing changes.
    let again = api
        .delete("web-1", &DeleteParams::default().grace_period(100))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(again.resource_version(), answer.resource_version());
    assert_eq!(again.metadata.deletion_grace_period_seconds, Some(45));
    // Shorter: the deletion moves earlier by the difference.
    let shorter = api
        .delete("web-1", &DeleteParams::default().grace_period(5))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(shorter.metadata.deletion_grace_period_seconds, Some(5));
    assert_eq!(deletion_secs(&shorter), at - 40);
    match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(p) => assert_eq!(p.metadata.deletion_grace_period_seconds, Some(5)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(server.get("v1", "Pod", "ns", "web-1").is_some());
    assert!(!server.finish_termination("ns", "ghost"));

    // Grace 0 (a force delete) removes it.
    api.delete("web-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(p) => assert_eq!(p.metadata.deletion_grace_period_seconds, Some(0)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    assert_eq!(api_error(api.get("web-1").await).code, 404);
}

#[tokio::test]
async fn unbound_terminal_and_zero_grace_pods_go_at_once() {
    let server = FakeApiServer::start().await;
    server.set_kubelet(Kubelet::Manual);
    let mut unbound = pod("ns", "pending", json!({}), "");
    unbound["spec"].as_object_mut().unwrap().remove("nodeName");
    unbound["status"]["phase"] = json!("Pending");
    server.apply(unbound);
    let mut done = pod("ns", "done", json!({}), "n1");
    done["status"]["phase"] = json!("Succeeded");
    server.apply(done);
    let mut failed = pod("ns", "failed", json!({}), "n1");
    failed["status"]["phase"] = json!("Failed");
    server.apply(failed);
    server.apply(pod("ns", "forced", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    for name in ["pending", "done", "failed"] {
        let gone = api
            .delete(name, &DeleteParams::default())
            .await
            .unwrap()
            .left()
            .unwrap();
        assert_eq!(
            gone.metadata.deletion_grace_period_seconds,
            Some(0),
            "{name}"
        );
        assert!(server.get("v1", "Pod", "ns", name).is_none(), "{name}");
    }
    api.delete("forced", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(server.get("v1", "Pod", "ns", "forced").is_none());
}

#[tokio::test]
async fn the_kubelet_stand_in_finishes_terminating_pods() {
    let server = FakeApiServer::start().await;
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    // Default: 300 ms after the delete.
    server.apply(pod("ns", "quick", json!({}), "n1"));
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Added(_)
    ));
    let started = Instant::now();
    api.delete("quick", &DeleteParams::default()).await.unwrap();
    assert!(server.get("v1", "Pod", "ns", "quick").is_some());
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    assert!(started.elapsed() >= Duration::from_millis(300));

    // The grace period when it is shorter than the delay.
    server.set_kubelet(Kubelet::After(Duration::from_secs(60)));
    let mut short = pod("ns", "short", json!({}), "n1");
    short["spec"]["terminationGracePeriodSeconds"] = json!(1);
    server.apply(short);
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Added(_)
    ));
    let started = Instant::now();
    api.delete("short", &DeleteParams::default()).await.unwrap();
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    assert!(started.elapsed() >= Duration::from_secs(1));

    // Grace: at the end of the grace period, even when the mode changes meanwhile.
    server.set_kubelet(Kubelet::Manual);
    server.apply(pod("ns", "slow", json!({}), "n1"));
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Added(_)
    ));
    let started = Instant::now();
    api.delete("slow", &DeleteParams::default().grace_period(1))
        .await
        .unwrap();
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));
    server.set_kubelet(Kubelet::Grace);
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn finalizers_hold_any_kind_until_an_update_empties_them() {
    let server = FakeApiServer::start().await;
    server.apply(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "held", "namespace": "ns", "finalizers": ["example.com/keep"]},
        "spec": {"holderIdentity": "a"}
    }));
    let leases: Api<Lease> = Api::namespaced(client(&server), "ns");
    let answer = leases
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("an object held by finalizers is answered as an object");
    assert!(answer.metadata.deletion_timestamp.is_some());
    assert_eq!(answer.metadata.deletion_grace_period_seconds, Some(0));
    // Deleting again changes nothing; no new finalizer may be added.
    let again = leases
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(again.resource_version(), answer.resource_version());
    let more = json!({"metadata": {"finalizers": ["example.com/keep", "example.com/more"]}});
    let status = api_error(
        leases
            .patch("held", &PatchParams::default(), &Patch::Merge(&more))
            .await,
    );
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("no new finalizers can be added"),
        "{}",
        status.message
    );
    // An update cannot take the deletionTimestamp away.
    let undelete =
        json!({"metadata": {"deletionTimestamp": null}, "spec": {"holderIdentity": "b"}});
    let patched = leases
        .patch("held", &PatchParams::default(), &Patch::Merge(&undelete))
        .await
        .unwrap();
    assert!(patched.metadata.deletion_timestamp.is_some());
    let empty = json!({"metadata": {"finalizers": []}});
    leases
        .patch("held", &PatchParams::default(), &Patch::Merge(&empty))
        .await
        .unwrap();
    assert_eq!(api_error(leases.get("held").await).code, 404);

    // A terminating pod with a finalizer outlives its kubelet, then goes with the finalizer.
    server.set_kubelet(Kubelet::Manual);
    let mut held = pod("ns", "held", json!({}), "n1");
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    server.apply(held);
    let pods: Api<Pod> = Api::namespaced(client(&server), "ns");
    pods.delete("held", &DeleteParams::default()).await.unwrap();
    assert!(!server.finish_termination("ns", "held"));
    let waiting = server.get("v1", "Pod", "ns", "held").unwrap();
    assert_eq!(waiting["metadata"]["deletionGracePeriodSeconds"], 0);
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&empty))
        .await
        .unwrap();
    assert!(server.get("v1", "Pod", "ns", "held").is_none());
}

/// The in-process delete stays a force delete: tests use it for "the object is gone".
#[tokio::test]
async fn the_in_process_delete_removes_at_once() {
    let server = FakeApiServer::start().await;
    let mut held = pod("ns", "a", json!({}), "n1");
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    server.apply(held);
    assert!(server.delete("v1", "Pod", "ns", "a").is_some());
    assert!(server.get("v1", "Pod", "ns", "a").is_none());
}
