//! Lists and watches: paging, resourceVersion semantics, selectors, `kube::runtime::watcher`
//! (list-watch and streaming lists), selector transitions, 410 after compaction and the
//! watcher's re-list, bookmarks, `timeoutSeconds`, metadata-only lists and watches.

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PartialObjectMeta, VersionMatch, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use rebalancer_kube_fake::FakeApiServer;
use serde_json::json;

use crate::common::{api_error, client, next, pod};

fn names<K: ResourceExt>(items: &[K]) -> Vec<String> {
    items.iter().map(ResourceExt::name_any).collect()
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let server = FakeApiServer::start().await;
    for i in 0..7 {
        server.apply(pod("ns", &format!("p{i}"), json!({}), "n1"));
    }
    server.apply(pod("other", "x", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        let rv = page.metadata.resource_version.clone().unwrap();
        assert_eq!(
            *first_rv.get_or_insert(rv.clone()),
            rv,
            "every page reports the first page's version"
        );
        seen.extend(names(&page.items));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>());
    for item in api.list(&ListParams::default()).await.unwrap().items {
        assert!(item.metadata.resource_version.is_some());
        assert!(item.metadata.uid.is_some());
        assert!(item.metadata.creation_timestamp.is_some());
    }

    let all: Api<Pod> = Api::all(client(&server));
    let everything = all.list(&ListParams::default()).await.unwrap();
    assert_eq!(everything.items.len(), 8);
    let current: u64 = everything
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(current, 8, "one version per write");
}

#[tokio::test]
async fn list_resource_versions_and_expired_continue_tokens() {
    let server = FakeApiServer::start().await;
    for i in 0..4 {
        server.apply(pod("ns", &format!("p{i}"), json!({}), "n1"));
    }
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();

    let exact = ListParams::default().at("2").matching(VersionMatch::Exact);
    assert_eq!(
        api.list(&exact)
            .await
            .unwrap()
            .metadata
            .resource_version
            .as_deref(),
        Some("2")
    );
    let any = ListParams::default().match_any();
    assert_eq!(api.list(&any).await.unwrap().items.len(), 4);
    let future = ListParams::default()
        .at("99")
        .matching(VersionMatch::NotOlderThan);
    assert_eq!(api_error(api.list(&future).await).code, 504);

    server.apply(pod("ns", "late", json!({}), "n1"));
    server.compact();
    let status = api_error(api.list(&exact).await);
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    let status = api_error(
        api.list(&ListParams::default().limit(2).continue_token(&token))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        5
    );
}

#[tokio::test]
async fn label_and_field_selectors() {
    let server = FakeApiServer::start().await;
    server.apply(pod(
        "a",
        "web-1",
        json!({"app": "web", "tier": "front"}),
        "n1",
    ));
    server.apply(pod("a", "web-2", json!({"app": "web"}), "n2"));
    server.apply(pod("a", "db-1", json!({"app": "db"}), "n1"));
    server.apply(pod("b", "cache-1", json!({"app": "cache"}), ""));
    let mut failed = pod("b", "job-1", json!({"app": "job"}), "n2");
    failed["status"]["phase"] = json!("Failed");
    server.apply(failed);
    let all: Api<Pod> = Api::all(client(&server));
    let list = |labels: &str, fields: &str| {
        let all = all.clone();
        let lp = ListParams::default().labels(labels).fields(fields);
        async move {
            let mut got = names(&all.list(&lp).await.unwrap().items);
            got.sort();
            got
        }
    };
    assert_eq!(list("app=web", "").await, ["web-1", "web-2"]);
    assert_eq!(list("app==web,tier=front", "").await, ["web-1"]);
    assert_eq!(list("app!=web", "").await, ["cache-1", "db-1", "job-1"]);
    assert_eq!(list("app in (db, cache)", "").await, ["cache-1", "db-1"]);
    assert_eq!(list("app notin (web,db,cache)", "").await, ["job-1"]);
    assert_eq!(list("tier", "").await, ["web-1"]);
    assert_eq!(list("!tier,app=web", "").await, ["web-2"]);
    assert_eq!(list("", "spec.nodeName=n1").await, ["db-1", "web-1"]);
    assert_eq!(list("", "spec.nodeName==").await, ["cache-1"]);
    assert_eq!(list("", "metadata.namespace=b").await, ["cache-1", "job-1"]);
    assert_eq!(
        list("", "metadata.name!=web-1,spec.nodeName=n1").await,
        ["db-1"]
    );
    assert_eq!(
        list("", "status.phase!=Failed,status.phase!=Succeeded")
            .await
            .len(),
        4
    );
    assert_eq!(list("app=web", "spec.nodeName!=n1").await, ["web-2"]);

    let namespaced: Api<Pod> = Api::namespaced(client(&server), "b");
    assert_eq!(
        names(&namespaced.list(&ListParams::default()).await.unwrap().items),
        ["cache-1", "job-1"]
    );

    let status = api_error(
        all.list(&ListParams::default().fields("spec.priority=1"))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    assert_eq!(status.message, "field label not supported: spec.priority");
    let nodes: Api<Node> = Api::all(client(&server));
    assert_eq!(
        api_error(
            nodes
                .list(&ListParams::default().fields("spec.nodeName=n1"))
                .await
        )
        .code,
        400
    );
    assert_eq!(
        api_error(all.list(&ListParams::default().labels("app in ()")).await).code,
        400
    );
}

#[tokio::test]
async fn watcher_sees_initial_objects_then_changes() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    server.apply(pod("ns", "b", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut events = watcher(api, watcher::Config::default().page_size(1)).boxed();
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    let mut initial = Vec::new();
    loop {
        match next(&mut events).await.unwrap() {
            watcher::Event::InitApply(p) => initial.push(p.name_any()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(initial, ["a", "b"]);

    server.apply(pod("ns", "c", json!({}), "n1"));
    server.apply(pod("other", "elsewhere", json!({}), "n1"));
    server.apply(pod("ns", "a", json!({"changed": "yes"}), "n1"));
    server.delete("v1", "Pod", "ns", "b");
    match next(&mut events).await.unwrap() {
        watcher::Event::Apply(p) => assert_eq!(p.name_any(), "c"),
        other => panic!("unexpected {other:?}"),
    }
    match next(&mut events).await.unwrap() {
        watcher::Event::Apply(p) => {
            assert_eq!(p.name_any(), "a");
            assert_eq!(p.labels().get("changed").map(String::as_str), Some("yes"));
        }
        other => panic!("unexpected {other:?}"),
    }
    match next(&mut events).await.unwrap() {
        watcher::Event::Delete(p) => assert_eq!(p.name_any(), "b"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    server.apply(pod("ns", "b", json!({}), "n1"));
    let api: Api<Pod> = Api::all(client(&server));
    let mut events = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    let mut initial = BTreeSet::new();
    loop {
        match next(&mut events).await.unwrap() {
            watcher::Event::InitApply(p) => {
                initial.insert(p.name_any());
            }
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(initial, BTreeSet::from(["a".to_string(), "b".to_string()]));
    server.apply(pod("ns", "c", json!({}), "n1"));
    assert!(
        matches!(next(&mut events).await.unwrap(), watcher::Event::Apply(p) if p.name_any() == "c")
    );
}

#[tokio::test]
async fn watch_selectors_turn_label_changes_into_added_and_deleted() {
    let server = FakeApiServer::start().await;
    let created = server.apply(pod("ns", "a", json!({"app": "web"}), "n1"));
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let wp = WatchParams::default().labels("app=web");
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    server.apply(pod("ns", "a", json!({"app": "db"}), "n1"));
    server.apply(pod("ns", "b", json!({"app": "db"}), "n1"));
    server.apply(pod("ns", "a", json!({"app": "web"}), "n1"));
    server.apply(pod("ns", "a", json!({"app": "web", "x": "1"}), "n1"));
    match next(&mut stream).await.unwrap() {
        WatchEvent::Deleted(p) => {
            assert_eq!(p.name_any(), "a");
            assert_eq!(
                p.resource_version().as_deref(),
                Some("2"),
                "at the version of the change"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        matches!(next(&mut stream).await.unwrap(), WatchEvent::Added(p) if p.name_any() == "a")
    );
    assert!(
        matches!(next(&mut stream).await.unwrap(), WatchEvent::Modified(p) if p.labels().contains_key("x"))
    );

    let fields = WatchParams::default().fields("spec.nodeName=n2");
    let mut on_n2 = api.watch(&fields, "0").await.unwrap().boxed();
    server.apply(pod("ns", "c", json!({}), "n2"));
    assert!(matches!(next(&mut on_n2).await.unwrap(), WatchEvent::Added(p) if p.name_any() == "c"));
}

#[tokio::test]
async fn watch_from_a_compacted_version_gets_410() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    server.apply(pod("ns", "b", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");

    let mut replay = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    assert!(
        matches!(next(&mut replay).await.unwrap(), WatchEvent::Added(p) if p.name_any() == "b")
    );

    server.compact();
    let mut stream = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await.unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version: 1"),
                "{}",
                status.message
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        stream.next().await.is_none(),
        "the stream ends after the error"
    );

    let mut current = api
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();
    server.apply(pod("ns", "c", json!({}), "n1"));
    assert!(
        matches!(next(&mut current).await.unwrap(), WatchEvent::Added(p) if p.name_any() == "c")
    );
}

#[tokio::test]
async fn watcher_relists_after_compaction() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    server.apply(pod("ns", "b", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut events = watcher(api, watcher::Config::default())
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
        watcher::Event::InitApply(_)
    ));
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::InitDone
    ));

    // Cut the watch and wait until the watcher has failed to reconnect: it is then behind.
    server.set_down(true);
    assert!(next(&mut events).await.is_err());
    server.apply(pod("ns", "c", json!({}), "n1"));
    server.delete("v1", "Pod", "ns", "a");
    server.compact();
    server.set_down(false);

    let mut saw_expired = false;
    loop {
        match next(&mut events).await {
            Err(watcher::Error::WatchError(status)) if status.code == 410 => saw_expired = true,
            Err(_) => {}
            Ok(watcher::Event::Init) => break,
            Ok(other) => panic!("unexpected {other:?} before the re-list"),
        }
    }
    assert!(
        saw_expired,
        "the watch resumed from a compacted version must get 410"
    );
    let mut relisted = Vec::new();
    loop {
        match next(&mut events).await.unwrap() {
            watcher::Event::InitApply(p) => relisted.push(p.name_any()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(relisted, ["b", "c"]);
    server.apply(pod("ns", "d", json!({}), "n1"));
    assert!(
        matches!(next(&mut events).await.unwrap(), watcher::Event::Apply(p) if p.name_any() == "d")
    );
}

#[tokio::test]
async fn bookmarks_go_only_to_watches_that_asked() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let mut with = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    let mut without = api
        .watch(&WatchParams::default().disable_bookmarks(), "1")
        .await
        .unwrap()
        .boxed();
    server.bookmark();
    server.apply(pod("ns", "b", json!({}), "n1"));
    match next(&mut with).await.unwrap() {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(bookmark.metadata.resource_version, "1");
            assert_eq!(bookmark.types.kind, "Pod");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        next(&mut with).await.unwrap(),
        WatchEvent::Added(_)
    ));
    assert!(
        matches!(next(&mut without).await.unwrap(), WatchEvent::Added(p) if p.name_any() == "b")
    );
}

#[tokio::test]
async fn watch_timeout_ends_the_stream() {
    let server = FakeApiServer::start().await;
    let api: Api<Pod> = Api::all(client(&server));
    let mut stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next())
        .await
        .expect("the server ends the watch");
    assert!(end.is_none());
}

#[tokio::test]
async fn metadata_lists_and_watches() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "a", json!({"app": "web"}), "n1"));
    let api: Api<Pod> = Api::namespaced(client(&server), "ns");
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let item: &PartialObjectMeta<Pod> = &list.items[0];
    assert_eq!(item.labels().get("app").map(String::as_str), Some("web"));

    let metadata: Api<PartialObjectMeta<Pod>> = Api::namespaced(client(&server), "ns");
    let mut events = watcher(metadata, watcher::Config::default()).boxed();
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    assert!(
        matches!(next(&mut events).await.unwrap(), watcher::Event::InitApply(m) if m.name_any() == "a")
    );
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::InitDone
    ));
    server.apply(pod("ns", "b", json!({}), "n1"));
    assert!(
        matches!(next(&mut events).await.unwrap(), watcher::Event::Apply(m) if m.name_any() == "b")
    );
}
