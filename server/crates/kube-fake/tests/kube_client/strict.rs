//! What a real server enforces or does by itself that a client can trip over: AlreadyExists on
//! create (pods and a cluster-scoped custom kind) and generateName, server-side field selectors
//! with each registry's keys and the 400 for others, node status heartbeats, and the per-uid
//! counters of events.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent,
    WatchParams,
};
use rebalancer_kube_fake::{FakeApiServer, OptionalGroup};
use serde_json::{Value, json};

use crate::common::{api_error, client, next, pod, uid_of};

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

#[tokio::test]
async fn creating_an_existing_object_is_already_exists() {
    let server = FakeApiServer::start_with(&[OptionalGroup::NodeMetric]).await;
    let client = client(&server);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    let body: Pod = typed(pod("ns", "x", json!({}), "n1"));
    pods.create(&PostParams::default(), &body).await.unwrap();
    let status = api_error(pods.create(&PostParams::default(), &body).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(status.message, "pods \"x\" already exists");
    let details = status.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("x", "", "pods")
    );

    let node_metric = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("slo.koordinator.sh", "v1alpha1", "NodeMetric"),
        "nodemetrics",
    );
    let metrics: Api<DynamicObject> = Api::all_with(client.clone(), &node_metric);
    let object: DynamicObject = typed(json!({"apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric", "metadata": {"name": "n1"}, "spec": {}}));
    let created = metrics
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let status = api_error(metrics.create(&PostParams::default(), &object).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(
        status.message,
        "nodemetrics.slo.koordinator.sh \"n1\" already exists"
    );
    let details = status.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("n1", "slo.koordinator.sh", "nodemetrics")
    );

    // generateName: a fresh name each time, never a conflict.
    let mut generated = pod("ns", "", json!({}), "n1");
    generated["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    generated["metadata"]["generateName"] = json!("web-");
    let generated: Pod = typed(generated);
    let a = pods
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let b = pods
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    assert!(a.name_any().starts_with("web-") && a.name_any().len() == 9);
    assert_ne!(a.name_any(), b.name_any());
}

fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    items
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn field_selectors_follow_each_registry() {
    let server = FakeApiServer::start().await;
    let mut a = pod("ns", "a", json!({}), "n1");
    a["spec"]["schedulerName"] = json!("koord-scheduler");
    a["spec"]["serviceAccountName"] = json!("web");
    a["spec"]["restartPolicy"] = json!("Always");
    a["status"]["podIPs"] = json!([{"ip": "10.0.0.7"}]);
    a["status"]["podIP"] = json!("10.0.0.7");
    server.apply(a);
    let mut b = pod("ns", "b", json!({}), "n2");
    b["spec"]["hostNetwork"] = json!(true);
    b["status"]["nominatedNodeName"] = json!("n3");
    server.apply(b);
    server.apply(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"unschedulable": true}}),
    );
    server.apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}));
    let client = client(&server);
    let pods: Api<Pod> = Api::all(client.clone());
    let select = |s: &str| ListParams::default().fields(s);
    for (selector, want) in [
        ("spec.schedulerName=koord-scheduler", vec!["a"]),
        ("spec.serviceAccountName=web", vec!["a"]),
        ("spec.restartPolicy!=Always", vec!["b"]),
        ("spec.hostNetwork=false", vec!["a"]),
        ("status.podIP=10.0.0.7", vec!["a"]),
        ("status.nominatedNodeName=n3", vec!["b"]),
        ("spec.host=n2", vec!["b"]),
        ("status.phase=Running,metadata.namespace=ns", vec!["a", "b"]),
    ] {
        let list = pods.list(&select(selector)).await.unwrap();
        assert_eq!(names(&list.items), want, "{selector}");
    }
    let status = api_error(pods.list(&select("spec.priority=1")).await);
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    assert_eq!(status.message, "field label not supported: spec.priority");

    let nodes: Api<Node> = Api::all(client.clone());
    let unschedulable = nodes
        .list(&select("spec.unschedulable=true"))
        .await
        .unwrap();
    assert_eq!(names(&unschedulable.items), ["n1"]);
    let schedulable = nodes
        .list(&select("spec.unschedulable=false"))
        .await
        .unwrap();
    assert_eq!(names(&schedulable.items), ["n2"]);
    assert_eq!(
        api_error(nodes.list(&select("metadata.namespace=x")).await).message,
        "field label not supported: metadata.namespace"
    );

    // Core events select on their own fields; events.k8s.io only on metadata.
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "ns");
    let event: CoreEvent = typed(json!({"metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "a", "uid": "u-a"}, "reason": "Evicted",
        "source": {"component": "rebalancer"}, "type": "Normal"}));
    core.create(&PostParams::default(), &event).await.unwrap();
    for selector in [
        "involvedObject.uid=u-a",
        "source=rebalancer,reason=Evicted,type=Normal",
    ] {
        let list = core.list(&select(selector)).await.unwrap();
        assert_eq!(names(&list.items), ["e1"], "{selector}");
    }
    let new_events: Api<Event> = Api::namespaced(client, "ns");
    assert_eq!(
        api_error(new_events.list(&select("regarding.uid=u-a")).await).message,
        "field label not supported: regarding.uid"
    );
}

#[tokio::test]
async fn events_about_a_uid_in_both_event_apis() {
    let server = FakeApiServer::start().await;
    let created = server.apply(pod("ns", "a", json!({}), "n1"));
    let uid = uid_of(&created);
    server.apply(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "new", "namespace": "ns"}, "reason": "Descheduled",
        "regarding": {"kind": "Pod", "name": "a", "uid": uid}}));
    server.apply(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "old", "namespace": "ns"}, "reason": "Killing",
        "involvedObject": {"kind": "Pod", "name": "a", "uid": uid}}));
    server.apply(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "other", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "b", "uid": "u-b"}}));
    let about: Vec<String> = server
        .events_about(&uid)
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(about, ["new", "old"]);
    assert!(server.events_about("nobody").is_empty());
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"zone": "a"}},
        "spec": {"unschedulable": false},
        "status": {"allocatable": {"cpu": "4"}, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "lastHeartbeatTime": "2020-01-01T00:00:00Z", "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "MemoryPressure", "status": "False",
             "lastHeartbeatTime": "2020-01-01T00:00:00Z", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}})
}

/// Everything but the heartbeat times and the resourceVersion.
fn without_heartbeat(mut node: Value) -> Value {
    for c in node["status"]["conditions"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("lastHeartbeatTime");
    }
    node["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    node
}

#[tokio::test]
async fn heartbeats_touch_only_the_heartbeat_times() {
    let server = FakeApiServer::start().await;
    server.apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}}));
    let before = server.apply(node("n1"));
    let nodes: Api<Node> = Api::all(client(&server));
    let rv = before["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = nodes
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    assert_eq!(
        server.heartbeat_nodes(),
        1,
        "the node without conditions is left alone"
    );
    let after = server.get("v1", "Node", "", "n1").unwrap();
    assert_ne!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_eq!(without_heartbeat(after.clone()), without_heartbeat(before));
    for c in after["status"]["conditions"].as_array().unwrap() {
        assert_ne!(c["lastHeartbeatTime"], "2020-01-01T00:00:00Z");
        assert_eq!(c["lastTransitionTime"], "2020-01-01T00:00:00Z");
    }
    let first = match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(n) => n.resource_version(),
        other => panic!("unexpected {other:?}"),
    };
    // Within the same second too: a new resourceVersion each time.
    server.heartbeat_nodes();
    match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(n) => assert_ne!(n.resource_version(), first),
        other => panic!("unexpected {other:?}"),
    }

    server.start_heartbeats(Duration::from_millis(50));
    for _ in 0..2 {
        match next(&mut watch).await.unwrap() {
            WatchEvent::Modified(n) => assert_eq!(n.name_any(), "n1"),
            other => panic!("unexpected {other:?}"),
        }
    }
    server.shutdown().await;
}
