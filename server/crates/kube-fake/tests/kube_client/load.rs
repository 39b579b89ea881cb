//! Bulk loading: a generated List of a few thousand pods (plus nodes and a kind the fake does
//! not serve) loads, is served in pages to kube's watcher and answers selectors.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use rebalancer_kube_fake::FakeApiServer;
use serde_json::json;

use crate::common::{client, next};

const PODS: usize = 3000;
const NODES: usize = 50;

fn generated_list() -> Vec<u8> {
    let mut items = Vec::new();
    for n in 0..NODES {
        items.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{n}"),
                          "labels": {"zone": format!("z{}", n % 3)}}, "status": {"allocatable": {"cpu": "8"}}}));
    }
    for p in 0..PODS {
        items.push(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": format!("pod-{p:05}"), "namespace": format!("team-{}", p % 10),
                         "uid": format!("uid-{p}"), "labels": {"app": format!("app-{}", p % 7)}},
            "spec": {"nodeName": format!("node-{}", p % NODES), "containers": [{"name": "c", "image": "i",
                     "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running"}
        }));
    }
    items.push(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "skipped"}}),
    );
    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap()
}

#[tokio::test]
async fn load_list_serves_thousands_of_pods() {
    let server = FakeApiServer::start().await;
    assert_eq!(server.load_list(&generated_list()), PODS + NODES);

    let stored = server.get("v1", "Pod", "team-3", "pod-00013").unwrap();
    assert_eq!(stored["metadata"]["uid"], "uid-13");
    assert_eq!(
        stored["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "100m"
    );
    assert!(stored["metadata"]["resourceVersion"].is_string());

    let all: Api<Pod> = Api::all(client(&server));
    let mut events = watcher(all.clone(), watcher::Config::default()).boxed();
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    let mut count = 0;
    loop {
        match next(&mut events).await.unwrap() {
            watcher::Event::InitApply(p) => {
                assert!(p.resource_version().is_some());
                count += 1;
            }
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(count, PODS);

    let on_node = all
        .list(&ListParams::default().fields("spec.nodeName=node-7"))
        .await
        .unwrap();
    assert_eq!(on_node.items.len(), PODS / NODES);
    assert!(
        on_node
            .items
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("node-7"))
    );
    let team: Api<Pod> = Api::namespaced(client(&server), "team-4");
    let app = team
        .list(&ListParams::default().labels("app=app-2"))
        .await
        .unwrap();
    let expected = (0..PODS).filter(|p| p % 10 == 4 && p % 7 == 2).count();
    assert_eq!(app.items.len(), expected);
}
