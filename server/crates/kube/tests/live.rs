//! Live state through kube-rs's real client against the fake API server: the initial sync,
//! incremental updates, debounced revisions, re-list after 410 Gone, optional kinds by
//! discovery, and connection loss and recovery.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use rebalancer_kube::{ConnectionState, SyncOptions};
use rebalancer_kube_fake::{FakeApiServer, OptionalGroup};
use serde_json::json;

#[tokio::test]
async fn initial_sync_then_every_change_reaches_a_new_revision() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    fake.apply(pdb("shop", "web", 1));
    let world = World::start(fake, fast()).await;
    world
        .until("the first revision", |w| w.pod_names().len() == 2)
        .await;
    assert_eq!(world.live.status().state, ConnectionState::Synced);
    let first = world.snapshot().unwrap();
    assert_eq!(first.counts.get("Node"), Some(&2));
    assert_eq!(first.counts.get("PodDisruptionBudget"), Some(&1));
    assert_eq!(first.counts.get("Namespace"), Some(&1));
    assert!(world.live.is_synced());
    // No managed fields survive into the cache.
    let json = world.live.pod_json("uid-shop-web-1").unwrap();
    assert!(json.contains("\"nodeName\":\"n1\""), "{json}");

    // Added, modified, deleted.
    world.fake.apply(pod("shop", "web-3", "n2"));
    world
        .until("web-3 added", |w| {
            w.pod_names().contains(&"shop/web-3".into())
        })
        .await;
    let mut moved = pod("shop", "web-2", "n2");
    moved["metadata"]["labels"]["tier"] = json!("gold");
    world.fake.apply(moved);
    world
        .until("web-2 modified", |w| {
            w.live
                .pod_json("uid-shop-web-2")
                .is_some_and(|j| j.contains("gold"))
                && w.snapshot().is_some_and(|s| {
                    s.cluster()
                        .pods()
                        .any(|p| p.name() == "web-2" && p.node_name() == "n2")
                })
        })
        .await;
    world.fake.delete("v1", "Pod", "shop", "web-1");
    world
        .until("web-1 deleted", |w| {
            w.pod_names() == ["shop/web-2", "shop/web-3"]
                && w.live.pod_json("uid-shop-web-1").is_none()
        })
        .await;
    let last = world.snapshot().unwrap();
    assert!(last.revision > first.revision);
}

#[tokio::test]
async fn an_object_that_cannot_be_modelled_is_left_out_with_a_warning() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    world
        .until("the first revision", |w| w.pod_names().len() == 2)
        .await;
    // The API server validates quantities; a snapshot must not stall on one it let through.
    let mut odd = pod("shop", "web-3", "n2");
    odd["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("lots");
    world.fake.apply(odd);
    world.fake.apply(pod("shop", "web-4", "n2"));
    world
        .until("web-4 in a revision, web-3 warned about", |w| {
            w.snapshot().is_some_and(|s| {
                s.warnings
                    .iter()
                    .any(|w| w.message.contains("Pod shop/web-3") && w.message.contains("cpu"))
            }) && w.pod_names() == ["shop/web-1", "shop/web-2", "shop/web-4"]
        })
        .await;
    // Fixed, it comes in.
    world.fake.apply(pod("shop", "web-3", "n2"));
    world
        .until("web-3 fixed", |w| w.pod_names().len() == 4)
        .await;
    assert!(world.snapshot().unwrap().warnings.is_empty());
}

#[tokio::test]
async fn a_burst_of_changes_makes_one_revision() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    // A long quiet period so that the whole burst lands inside it.
    let world = World::start(
        fake,
        SyncOptions {
            debounce: Duration::from_millis(400),
            max_delay: Duration::from_secs(10),
            ..fast()
        },
    )
    .await;
    world
        .until("first revision", |w| w.snapshot().is_some())
        .await;
    let before = world.sink.installed.load(Ordering::SeqCst);
    for i in 0..200 {
        world.fake.apply(pod("shop", &format!("burst-{i}"), "n2"));
    }
    world
        .until("the burst", |w| w.pod_names().len() == 202)
        .await;
    // Let any late revision land before counting.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let revisions = world.sink.installed.load(Ordering::SeqCst) - before;
    assert_eq!(revisions, 1, "200 changes in one burst make one revision");
}

#[tokio::test]
async fn a_watch_expired_by_compaction_relists_and_converges() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    world
        .until("first revision", |w| w.pod_names().len() == 2)
        .await;
    // Forget history, then change things while watches must resume from an old version.
    world.fake.compact();
    world.fake.delete("v1", "Pod", "shop", "web-2");
    world.fake.apply(pod("shop", "web-9", "n2"));
    world.fake.compact();
    world.fake.bookmark();
    world
        .until("the re-listed state", |w| {
            w.pod_names() == ["shop/web-1", "shop/web-9"]
        })
        .await;
    assert_eq!(world.live.status().state, ConnectionState::Synced);
}

#[tokio::test]
async fn optional_kinds_follow_discovery() {
    let plain = FakeApiServer::start().await;
    small(&plain);
    let world = World::start(plain, fast()).await;
    world.until("synced", |w| w.snapshot().is_some()).await;
    assert!(world.live.status().optional_kinds.is_empty());
    assert_eq!(world.live.reservations_served(), Some(false));

    let koord = FakeApiServer::start_with(&[
        OptionalGroup::Reservation,
        OptionalGroup::NodeMetric,
        OptionalGroup::Metrics,
        OptionalGroup::NodeResourceTopology,
    ])
    .await;
    small(&koord);
    koord.apply(json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": "n1"},
        "status": {"updateTime": "2026-01-01T00:00:00Z",
                   "nodeMetric": {"nodeUsage": {"resources": {"cpu": "3"}}},
                   "podsMetric": [{"namespace": "shop", "name": "web-1",
                                   "podUsage": {"resources": {"cpu": "700m"}}}]}
    }));
    koord.apply(json!({
        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
        "metadata": {"name": "n2"}, "usage": {"cpu": "1", "memory": "1Gi"}, "window": "30s",
        "timestamp": "2026-01-01T00:00:00Z"
    }));
    let world = World::start(koord, fast()).await;
    world
        .until("optional kinds in the snapshot", |w| {
            w.snapshot().is_some_and(|s| {
                s.counts.get("NodeMetric") == Some(&1) && s.counts.get("NodeMetrics") == Some(&1)
            })
        })
        .await;
    // Their usage reaches the snapshot's usage sections.
    {
        use rebalancer_policy_sdk::model::ArchivedUsageSource;
        let snapshot = world.snapshot().unwrap();
        let c = snapshot.cluster();
        let node = |name: &str| c.nodes().find(|n| n.name() == name).unwrap();
        assert_eq!(node("n1").usage().source, ArchivedUsageSource::NodeMetric);
        assert_eq!(node("n1").usage().node[0].milli.to_native(), 3_000);
        assert_eq!(node("n2").usage().source, ArchivedUsageSource::MetricsApi);
        let web1 = c.pods().find(|p| p.name() == "web-1").unwrap();
        assert_eq!(web1.usage().usage[0].milli.to_native(), 700);
    }
    let mut kinds = world.live.status().optional_kinds;
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "NodeMetric",
            "NodeMetrics",
            "NodeResourceTopology",
            "PodMetrics",
            "Reservation"
        ]
    );
    assert_eq!(world.live.reservations_served(), Some(true));
}

#[tokio::test]
async fn a_lost_connection_is_visible_and_recovers_by_itself() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    world.until("synced", |w| w.pod_names().len() == 2).await;

    world.fake.set_down(true);
    world
        .until("the loss is noticed", |w| {
            w.live.status().state == ConnectionState::Disconnected
        })
        .await;
    let status = world.live.status();
    assert!(status.message.is_some(), "{status:?}");
    // The last revision stays current while disconnected.
    assert_eq!(world.pod_names().len(), 2);

    // Changes made while we were away arrive after the recovery.
    world.fake.set_down(false);
    world.fake.apply(pod("shop", "web-4", "n2"));
    world
        .until("recovered and caught up", |w| {
            w.live.status().state == ConnectionState::Synced && w.pod_names().len() == 3
        })
        .await;
}

#[tokio::test]
async fn an_unreachable_api_server_is_reported_while_connecting() {
    let fake = FakeApiServer::start().await;
    fake.set_down(true);
    let world = World::start(fake, fast()).await;
    world
        .until("the failure is visible", |w| {
            let s = w.live.status();
            s.state == ConnectionState::Disconnected
                && s.message
                    .as_deref()
                    .is_some_and(|m| m.contains("discovery failed"))
        })
        .await;
    assert!(world.snapshot().is_none());
    small(&world.fake);
    world.fake.set_down(false);
    world
        .until("synced after all", |w| w.pod_names().len() == 2)
        .await;
}
