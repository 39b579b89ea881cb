//! Connection loss: while the fake is down, requests fail as connection errors (not API
//! errors, and not retried by kube) and watchers error; afterwards both recover, and the
//! watcher resumes where it was, replaying what changed meanwhile. And the server's end: on
//! `shutdown()`, or when the last handle is dropped.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use rebalancer_kube_fake::FakeApiServer;
use serde_json::json;

use crate::common::{client, next, pod};

#[tokio::test]
async fn requests_and_watchers_fail_while_down_and_recover() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut events = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::InitApply(_)
    ));
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::InitDone
    ));

    server.set_down(true);
    match api.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => {
            panic!("expected a connection failure, got an API answer {status:?}")
        }
        Err(_) => {}
        Ok(list) => panic!("listed {} pods while down", list.items.len()),
    }
    assert!(
        next(&mut events).await.is_err(),
        "the watcher reports the lost connection"
    );
    server.apply(pod("ns", "b", json!({}), "n1"));

    server.set_down(false);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    loop {
        match next(&mut events).await {
            Err(_) => continue,
            Ok(watcher::Event::Apply(p)) => {
                assert_eq!(p.name_any(), "b", "the change made while down is replayed");
                break;
            }
            Ok(other) => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn shutdown_and_dropping_the_last_handle_stop_the_server() {
    let server = FakeApiServer::start().await;
    let client = client(&server);
    let clone = server.clone();
    client.apiserver_version().await.unwrap();
    server.shutdown().await;
    assert!(
        matches!(client.apiserver_version().await, Err(e) if !matches!(e, kube::Error::Api(_)))
    );
    drop(clone);

    let server = FakeApiServer::start().await;
    let client = crate::common::client(&server);
    let clone = server.clone();
    drop(server);
    client.apiserver_version().await.unwrap();
    drop(clone);
    // The server task notices the last handle is gone at its next turn; until then a request
    // may still be answered.
    for _ in 0..1000 {
        if client.apiserver_version().await.is_err() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the server kept answering after its last handle was dropped");
}
