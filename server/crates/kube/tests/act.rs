//! The Kubernetes backend acting through kube-rs's real client on the fake API server: every
//! eviction outcome, the Descheduled event and Koordinator annotations, PDB pre-checks, and
//! both reservation flows (Koordinator Reservation and placeholder pod).

mod common;

use std::sync::Arc;

use common::*;
use rebalancer_backend::{
    Backend, BackendError, EvictedPod, EvictionCheck, EvictionRequest, EvictionResult,
    ReservationRequest, ReservationState,
};
use rebalancer_kube::{ActOptions, KubeBackend, ReservationMode};
use rebalancer_kube_fake::{EvictionOutcome, FakeApiServer, OptionalGroup};
use serde_json::json;

async fn backend(world: &World, mode: ReservationMode) -> Arc<KubeBackend> {
    world.until("synced", |w| w.snapshot().is_some()).await;
    Arc::new(KubeBackend::new(
        world.live.clone(),
        world.sink.clusters.clone(),
        ActOptions {
            reservation_mode: mode,
            ..ActOptions::default()
        },
    ))
}

fn eviction(name: &str) -> EvictionRequest {
    EvictionRequest {
        uid: format!("uid-shop-{name}"),
        namespace: "shop".into(),
        name: name.into(),
        grace_period_seconds: Some(7),
        reason: "pod is older than 60s".into(),
        trigger: "PodLifeTime".into(),
    }
}

#[tokio::test]
async fn an_eviction_evicts_that_uid_writes_the_event_and_the_annotations() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    let b = backend(&world, ReservationMode::Auto).await;

    assert_eq!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::Evicted
    );
    assert!(world.fake.get("v1", "Pod", "shop", "web-1").is_none());
    let record = world.fake.evictions().pop().unwrap();
    assert_eq!(record.status, 201);
    assert_eq!(record.uid_precondition.as_deref(), Some("uid-shop-web-1"));
    assert_eq!(record.grace_period_seconds, Some(7));
    assert_eq!(
        record
            .annotations
            .get("koordinator.sh/evict-reason")
            .map(String::as_str),
        Some("pod is older than 60s")
    );
    assert_eq!(
        record
            .annotations
            .get("koordinator.sh/evict-trigger")
            .map(String::as_str),
        Some("PodLifeTime")
    );
    let events = world.fake.list("events.k8s.io/v1", "Event");
    let event = events
        .iter()
        .find(|e| e["regarding"]["name"] == "web-1")
        .expect("an event on the pod");
    assert_eq!(event["reason"], "Descheduled");
    assert_eq!(event["action"], "Descheduled");
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["note"], "pod is older than 60s");
    assert_eq!(event["regarding"]["uid"], "uid-shop-web-1");

    // A second eviction of the same pod (a retry after a crash) finds it gone.
    assert_eq!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::NotFound
    );
}

#[tokio::test]
async fn a_same_named_replacement_is_never_evicted() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    let b = backend(&world, ReservationMode::Auto).await;
    // A StatefulSet-style replacement: same name, new uid.
    world.fake.delete("v1", "Pod", "shop", "web-1");
    let mut replacement = pod("shop", "web-1", "n2");
    replacement["metadata"]["uid"] = json!("uid-new");
    world.fake.apply(replacement);
    assert_eq!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::NotFound
    );
    let survivor = world.fake.get("v1", "Pod", "shop", "web-1").unwrap();
    assert_eq!(survivor["metadata"]["uid"], "uid-new");
    assert_eq!(world.fake.evictions().pop().unwrap().status, 409);
}

#[tokio::test]
async fn pdbs_block_refuse_and_are_pre_checked() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    fake.apply(pdb("shop", "web", 0));
    let world = World::start(fake, fast()).await;
    let b = backend(&world, ReservationMode::Auto).await;

    match b.eviction_check(CLUSTER, "uid-shop-web-1").await.unwrap() {
        EvictionCheck::Blocked { pdb, reason } => {
            assert_eq!(pdb, "shop/web");
            assert!(reason.contains("disruptionsAllowed is 0"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    match b.evict(CLUSTER, &eviction("web-1")).await.unwrap() {
        EvictionResult::BlockedByPdb { message, .. } => {
            assert!(message.contains("disruption budget"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(world.fake.get("v1", "Pod", "shop", "web-1").is_some());

    // Headroom again: the pre-check follows the live PDB status.
    world.fake.apply(pdb("shop", "web", 1));
    let mut check = None;
    for _ in 0..500 {
        check = Some(b.eviction_check(CLUSTER, "uid-shop-web-1").await.unwrap());
        if matches!(check, Some(EvictionCheck::Allowed { .. })) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        check,
        Some(EvictionCheck::Allowed {
            pdb: Some("shop/web".into())
        })
    );

    // Two PDBs: the Eviction API refuses such pods for good.
    world.fake.apply(pdb("shop", "web-too", 1));
    world
        .until("both PDBs in the snapshot", |w| {
            w.snapshot()
                .is_some_and(|s| s.counts.get("PodDisruptionBudget") == Some(&2))
        })
        .await;
    assert!(matches!(
        b.eviction_check(CLUSTER, "uid-shop-web-1").await.unwrap(),
        EvictionCheck::MultiplePdbs { .. }
    ));
    assert!(matches!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::Refused { .. }
    ));
    assert_eq!(
        b.eviction_check(CLUSTER, "uid-gone").await.unwrap(),
        EvictionCheck::PodNotFound
    );
}

#[tokio::test]
async fn scripted_outcomes_map_to_retry_gone_or_blocked() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    let b = backend(&world, ReservationMode::Auto).await;

    world
        .fake
        .script_eviction("shop", "web-1", EvictionOutcome::ServerError);
    match b.evict(CLUSTER, &eviction("web-1")).await {
        Err(e @ BackendError::Unavailable(_)) => assert!(e.is_transient()),
        other => panic!("a 500 is retried later: {other:?}"),
    }
    world
        .fake
        .script_eviction("shop", "web-1", EvictionOutcome::TooManyRequests);
    assert!(matches!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::BlockedByPdb { .. }
    ));
    world
        .fake
        .script_eviction("shop", "web-1", EvictionOutcome::NotFound);
    assert_eq!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::NotFound
    );
    world
        .fake
        .script_eviction("shop", "web-1", EvictionOutcome::Default);
    assert_eq!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::Evicted
    );
    // Exactly one request per call: kube's own 429 retry is off.
    let statuses: Vec<u16> = world.fake.evictions().iter().map(|e| e.status).collect();
    assert_eq!(statuses, [500, 429, 404, 201]);
}

/// Wait (20 s) until reservation `name` is in `state`.
async fn state_becomes(b: &KubeBackend, name: &str, state: ReservationState) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let now = b.reservation(CLUSTER, name).await.unwrap();
        if now.as_ref() == Some(&state) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: {now:?}, expected {state:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn request(name: &str) -> ReservationRequest {
    ReservationRequest {
        name: name.into(),
        pod_uid: "uid-shop-web-1".into(),
        target_node: None,
        exclude_nodes: vec!["n1".into()],
    }
}

#[tokio::test]
async fn koordinator_reservations_from_create_to_bound_and_released() {
    let fake = FakeApiServer::start_with(&[OptionalGroup::Reservation]).await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    let b = backend(&world, ReservationMode::Auto).await;
    assert_eq!(world.live.reservations_served(), Some(true));

    assert_eq!(
        b.reserve(CLUSTER, &request("rebalancer-pm-1"))
            .await
            .unwrap(),
        ReservationState::Pending
    );
    // Idempotent by name.
    assert_eq!(
        b.reserve(CLUSTER, &request("rebalancer-pm-1"))
            .await
            .unwrap(),
        ReservationState::Pending
    );
    let r = world
        .fake
        .get(
            "scheduling.koordinator.sh/v1alpha1",
            "Reservation",
            "",
            "rebalancer-pm-1",
        )
        .unwrap();
    assert_eq!(
        r["spec"]["owners"][0]["controller"]["uid"], "rs-web",
        "owned by the pod's controller: {r:#}"
    );
    assert_eq!(r["spec"]["owners"][0]["controller"]["namespace"], "shop");
    assert_eq!(r["spec"]["allocateOnce"], true);
    assert!(r["spec"]["template"]["spec"].get("nodeName").is_none());
    assert_eq!(
        r["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchFields"],
        json!([{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}])
    );
    assert_eq!(
        r["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "500m"
    );

    // koord-scheduler places it, then a replacement binds it.
    let status = |s| {
        world.fake.set_status(
            "scheduling.koordinator.sh/v1alpha1",
            "Reservation",
            "",
            "rebalancer-pm-1",
            s,
        )
    };
    status(json!({"phase": "Pending", "conditions": [
        {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes are available"}
    ]}));
    assert_eq!(
        b.reservation(CLUSTER, "rebalancer-pm-1").await.unwrap(),
        Some(ReservationState::Unschedulable {
            reason: "0/2 nodes are available".into()
        })
    );
    status(json!({"phase": "Available", "nodeName": "n2"}));
    assert_eq!(
        b.reservation(CLUSTER, "rebalancer-pm-1").await.unwrap(),
        Some(ReservationState::Scheduled { node: "n2".into() })
    );
    status(json!({"phase": "Succeeded", "nodeName": "n2",
                  "currentOwners": [{"namespace": "shop", "name": "web-x", "uid": "uid-new"}]}));
    assert_eq!(
        b.reservation(CLUSTER, "rebalancer-pm-1").await.unwrap(),
        Some(ReservationState::Bound {
            node: "n2".into(),
            pod_uid: "uid-new".into()
        })
    );
    b.release(CLUSTER, "rebalancer-pm-1").await.unwrap();
    assert!(
        world
            .fake
            .get(
                "scheduling.koordinator.sh/v1alpha1",
                "Reservation",
                "",
                "rebalancer-pm-1"
            )
            .is_none()
    );
    b.release(CLUSTER, "rebalancer-pm-1").await.unwrap();
    assert_eq!(
        b.reservation(CLUSTER, "rebalancer-pm-1").await.unwrap(),
        None
    );
}

#[tokio::test]
async fn placeholder_pods_hold_room_until_the_replacement_is_seen() {
    let fake = FakeApiServer::start().await;
    small(&fake);
    let world = World::start(fake, fast()).await;
    let b = backend(&world, ReservationMode::Auto).await;
    assert_eq!(world.live.reservations_served(), Some(false));

    assert_eq!(
        b.reserve(CLUSTER, &request("rebalancer-pm-2"))
            .await
            .unwrap(),
        ReservationState::Pending
    );
    let p = world
        .fake
        .get("v1", "Pod", "shop", "rebalancer-pm-2")
        .unwrap();
    assert_eq!(p["spec"]["priorityClassName"], "rebalancer-placeholder");
    assert_eq!(
        p["spec"]["containers"][0]["image"],
        "registry.k8s.io/pause:3.10"
    );
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "500m", "memory": "268435456"})
    );
    assert_eq!(
        p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"],
        json!([{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}])
    );
    assert_eq!(
        p["metadata"]["labels"]["rebalancer.io/reservation"],
        "rebalancer-pm-2"
    );

    // The scheduler binds the placeholder to n2.
    let mut bound = p.clone();
    bound["spec"]["nodeName"] = json!("n2");
    world.fake.apply(bound);
    // Read from the watch cache: it sees the binding a moment later.
    state_becomes(
        &b,
        "rebalancer-pm-2",
        ReservationState::Scheduled { node: "n2".into() },
    )
    .await;

    // Evict; the ReplicaSet's replacement lands on n2.
    assert_eq!(
        b.evict(CLUSTER, &eviction("web-1")).await.unwrap(),
        EvictionResult::Evicted
    );
    let mut replacement = pod("shop", "web-1-new", "n2");
    replacement["metadata"]["uid"] = json!("uid-shop-web-1-new");
    replacement["metadata"]["creationTimestamp"] =
        json!(k8s_openapi::jiff::Timestamp::now().to_string());
    world.fake.apply(replacement);
    world
        .until("the replacement in the snapshot", |w| {
            w.pod_names().contains(&"shop/web-1-new".to_owned())
                && w.live.pod_json("uid-shop-web-1").is_none()
        })
        .await;
    assert_eq!(
        b.reservation(CLUSTER, "rebalancer-pm-2").await.unwrap(),
        Some(ReservationState::Bound {
            node: "n2".into(),
            pod_uid: "uid-shop-web-1-new".into()
        })
    );
    let found = b
        .replacement_of(
            CLUSTER,
            &EvictedPod {
                uid: "uid-shop-web-1".into(),
                namespace: "shop".into(),
                owner_uid: Some("rs-web".into()),
                evicted_at_ms: Some(k8s_openapi::jiff::Timestamp::now().as_millisecond() - 1_000),
            },
        )
        .await
        .unwrap()
        .expect("the replacement");
    assert_eq!(found.name, "web-1-new");
    b.release(CLUSTER, "rebalancer-pm-2").await.unwrap();
    assert!(
        world
            .fake
            .get("v1", "Pod", "shop", "rebalancer-pm-2")
            .is_none()
    );
    b.release(CLUSTER, "rebalancer-pm-2").await.unwrap();

    // An unschedulable placeholder says why.
    let web_2 = ReservationRequest {
        pod_uid: "uid-shop-web-2".into(),
        ..request("rebalancer-pm-3")
    };
    b.reserve(CLUSTER, &web_2).await.unwrap();
    let mut stuck = world
        .fake
        .get("v1", "Pod", "shop", "rebalancer-pm-3")
        .unwrap();
    stuck["status"] = json!({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes: Insufficient cpu"}
    ]});
    world.fake.apply(stuck);
    state_becomes(
        &b,
        "rebalancer-pm-3",
        ReservationState::Unschedulable {
            reason: "0/2 nodes: Insufficient cpu".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn nothing_is_read_before_the_first_sync() {
    let fake = FakeApiServer::start().await;
    fake.set_down(true);
    let world = World::start(fake, fast()).await;
    let b = KubeBackend::new(
        world.live.clone(),
        world.sink.clusters.clone(),
        ActOptions::default(),
    );
    // "Not in the cache" must not read as "gone" while nothing was listed.
    match b.pod(CLUSTER, "uid-shop-web-1").await {
        Err(e @ BackendError::Unavailable(_)) => assert!(e.to_string().contains("not synced")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn pods_of_other_schedulers_get_placeholders_and_names_are_not_taken_over() {
    let fake = FakeApiServer::start_with(&[OptionalGroup::Reservation]).await;
    small(&fake);
    let mut plain = pod("shop", "plain", "n1");
    plain["spec"]["schedulerName"] = json!("default-scheduler");
    fake.apply(plain);
    let world = World::start(fake, fast()).await;
    let b = backend(&world, ReservationMode::Auto).await;
    world
        .until("plain in the cache", |w| {
            w.live.pod_json("uid-shop-plain").is_some()
        })
        .await;

    // koord-scheduler would never place a Reservation for a default-scheduler pod.
    let req = ReservationRequest {
        pod_uid: "uid-shop-plain".into(),
        ..request("rebalancer-pm-7")
    };
    b.reserve(CLUSTER, &req).await.unwrap();
    assert!(
        world
            .fake
            .get("v1", "Pod", "shop", "rebalancer-pm-7")
            .is_some()
    );
    assert!(
        world
            .fake
            .get(
                "scheduling.koordinator.sh/v1alpha1",
                "Reservation",
                "",
                "rebalancer-pm-7"
            )
            .is_none()
    );
    // Both kinds are looked at and released.
    assert_eq!(
        b.reservation(CLUSTER, "rebalancer-pm-7").await.unwrap(),
        Some(ReservationState::Pending)
    );
    b.release(CLUSTER, "rebalancer-pm-7").await.unwrap();
    assert!(
        world
            .fake
            .get("v1", "Pod", "shop", "rebalancer-pm-7")
            .is_none()
    );

    // A Reservation of the same name made for another pod is not ours.
    b.reserve(CLUSTER, &request("rebalancer-pm-8"))
        .await
        .unwrap();
    let other = ReservationRequest {
        pod_uid: "uid-shop-web-2".into(),
        ..request("rebalancer-pm-8")
    };
    match b.reserve(CLUSTER, &other).await {
        Err(BackendError::Invalid(m)) => {
            assert!(m.contains("not made for pod uid-shop-web-2"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}
