//! The simulated backend through the [`Backend`] trait, on a real SQLite store.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::ingest::Ingest;
use rebalancer_cluster::Clusters;
use rebalancer_cluster::fixtures::{list, node, pdb, pod};
use rebalancer_cluster::{self as cluster, Format, ResourceAmounts, StoredObjectBuf};
use rebalancer_store::{NewClusterState, ObjectRow, Store};

/// An eviction of pod `uid` as the executor asks for it (names are not read by this backend).
fn ev(uid: &str) -> EvictionRequest {
    EvictionRequest {
        uid: uid.to_owned(),
        namespace: String::new(),
        name: String::new(),
        grace_period_seconds: None,
        reason: "test".into(),
        trigger: "Test".into(),
    }
}

/// The evicted pod `uid`, as the executor looks for its replacement.
fn gone(uid: &str) -> EvictedPod {
    EvictedPod {
        uid: uid.to_owned(),
        namespace: String::new(),
        owner_uid: None,
        evicted_at_ms: None,
        reservation: None,
    }
}

const C: &str = "sim";

struct Env {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    store: Store,
    clusters: Clusters,
    backend: Arc<SimulatedBackend>,
}

impl Env {
    async fn new(items: &[Value]) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path).await.expect("store opens");
        let clusters = Clusters::default();
        let set = cluster::parse_list(list(items), Format::Json).expect("parses");
        let revision = clusters.next_revision();
        let snap = cluster::build_snapshot(&set, revision, 1_767_225_600_000).expect("builds");
        let warnings = serde_json::to_value(&snap.warnings).unwrap();
        store
            .replace_cluster_state(
                &NewClusterState {
                    name: C,
                    backend: "simulated",
                    revision: revision as i64,
                    snapshot_time_ms: snap.time_ms,
                    node_count: 0,
                    pod_count: 0,
                    counts: &snap.counts,
                    warnings: &warnings,
                },
                set.stored_objects().map(|o| ObjectRow {
                    kind: o.kind,
                    api_version: o.api_version,
                    namespace: o.namespace,
                    name: o.name,
                    uid: o.uid,
                    body: o.json,
                }),
            )
            .await
            .expect("stored");
        clusters.insert(C, Arc::new(snap));
        let backend = Arc::new(SimulatedBackend::new(Ingest::new(
            store.clone(),
            clusters.clone(),
        )));
        Env {
            _dir: dir,
            path,
            store,
            clusters,
            backend,
        }
    }

    fn dyn_backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    /// Close and reopen the database, rebuilding the snapshot from stored objects the way
    /// start-up does.
    async fn restart(&mut self) {
        self.store.close().await;
        let store = Store::open(&self.path).await.expect("reopens");
        let record = store.get_cluster(C).await.expect("cluster kept");
        let objects = store.cluster_objects(record.id).await.unwrap();
        let set = cluster::ObjectSet::from_stored(objects.into_iter().map(|o| StoredObjectBuf {
            kind: o.kind,
            api_version: o.api_version,
            namespace: o.namespace,
            name: o.name,
            uid: o.uid,
            json: o.body,
        }))
        .unwrap();
        let snap =
            cluster::build_snapshot(&set, record.revision as u64, record.snapshot_time_ms).unwrap();
        let clusters = Clusters::default();
        clusters.insert(C, Arc::new(snap));
        self.backend = Arc::new(SimulatedBackend::new(Ingest::new(
            store.clone(),
            clusters.clone(),
        )));
        self.store = store;
        self.clusters = clusters;
    }

    fn revision(&self) -> u64 {
        self.clusters.get(C).unwrap().revision
    }

    /// Requested cpu (milli) per node name, from the current snapshot.
    fn cpu(&self, node: &str) -> i64 {
        let snap = self.clusters.get(C).unwrap();
        cluster::node_utilization(snap.cluster())
            .into_iter()
            .find(|n| n.name == node)
            .map(|n| n.requested.cpu_milli)
            .unwrap()
    }

    async fn events(&self) -> Vec<(String, Option<String>)> {
        self.backend
            .events(C)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.reason, e.pod_uid))
            .collect()
    }
}

fn req(name: &str, pod_uid: &str, exclude: &[&str]) -> ReservationRequest {
    ReservationRequest {
        name: name.into(),
        pod_uid: pod_uid.into(),
        target_node: None,
        exclude_nodes: exclude.iter().map(|s| s.to_string()).collect(),
    }
}

/// Three nodes: a busy (3 of 4 cpu), b half (2 of 4), c nearly empty (1 of 4); `web` has
/// three replicas on a.
fn cluster_items() -> Vec<Value> {
    vec![
        node("a", "4", "16Gi"),
        node("b", "4", "16Gi"),
        node("c", "4", "16Gi"),
        pod(
            "shop",
            "web-1",
            Some("a"),
            "1",
            "1Gi",
            Some(("ReplicaSet", "web")),
        ),
        pod(
            "shop",
            "web-2",
            Some("a"),
            "1",
            "1Gi",
            Some(("ReplicaSet", "web")),
        ),
        pod(
            "shop",
            "web-3",
            Some("a"),
            "1",
            "1Gi",
            Some(("ReplicaSet", "web")),
        ),
        pod(
            "shop",
            "db-0",
            Some("b"),
            "2",
            "2Gi",
            Some(("StatefulSet", "db")),
        ),
        pod("shop", "tool", Some("c"), "1", "1Gi", None),
    ]
}

#[tokio::test]
async fn reserve_places_on_least_allocated_node_and_holds_capacity() {
    let env = Env::new(&cluster_items()).await;
    let b = env.dyn_backend();
    let r0 = env.revision();
    let state = b
        .reserve(C, &req("pm-1", "uid-shop-web-1", &["a"]))
        .await
        .unwrap();
    assert_eq!(state, ReservationState::Scheduled { node: "c".into() });
    assert!(
        env.revision() > r0,
        "a reservation is a change of the cluster"
    );
    // Idempotent by name.
    let again = b
        .reserve(C, &req("pm-1", "uid-shop-web-1", &["a"]))
        .await
        .unwrap();
    assert_eq!(again, state);
    assert_eq!(b.reservation(C, "pm-1").await.unwrap(), Some(state));
    assert_eq!(b.reservation(C, "nope").await.unwrap(), None);
    let reserved = b.reserved(C).await.unwrap();
    assert_eq!(
        reserved.get("c"),
        Some(&ResourceAmounts {
            cpu_milli: 1000,
            memory_bytes: 1 << 30,
            pods: 1
        })
    );
    // The held capacity counts for the next placements.
    let s2 = b
        .reserve(C, &req("pm-2", "uid-shop-web-2", &["a"]))
        .await
        .unwrap();
    let s3 = b
        .reserve(C, &req("pm-3", "uid-shop-web-3", &["a"]))
        .await
        .unwrap();
    let nodes: Vec<_> = [s2, s3]
        .into_iter()
        .map(|s| match s {
            ReservationState::Scheduled { node } => node,
            other => panic!("{other:?}"),
        })
        .collect();
    // c: 1 cpu used + 1 held, b: 2 used — the same free cpu and memory, so the name decides
    // (b); then c is the less allocated.
    assert_eq!(nodes, vec!["b".to_string(), "c".to_string()]);
    // b and c now have 3 of 4 cpu taken: two more 1-cpu reservations fit, a third does not.
    let mut last = None;
    for i in 4..=6 {
        last = Some(
            b.reserve(C, &req(&format!("pm-{i}"), "uid-shop-web-1", &["a"]))
                .await
                .unwrap(),
        );
    }
    match last.unwrap() {
        ReservationState::Unschedulable { reason } => {
            assert!(
                reason.contains("Insufficient cpu (held by reservations)"),
                "{reason}"
            );
            assert!(reason.contains("1 node(s) excluded"), "{reason}");
        }
        other => panic!("expected unschedulable, got {other:?}"),
    }
}

#[tokio::test]
async fn unschedulable_reservations_say_why_and_change_nothing() {
    let mut items = cluster_items();
    // b and c tainted; web-2 asks for more cpu than any node has; web-3 anti-affine to web.
    items[1]["spec"]["taints"] =
        json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]);
    items[2]["spec"]["taints"] =
        json!([{"key": "dedicated", "value": "db", "effect": "NoExecute"}]);
    let env = Env::new(&items).await;
    let b = env.dyn_backend();
    let r0 = env.revision();
    let pinned = ReservationRequest {
        target_node: Some("b".into()),
        ..req("x", "uid-shop-web-1", &[])
    };
    let cases = [
        (
            req("x", "uid-shop-web-1", &["a"]),
            "2 node(s) had untolerated taint",
        ),
        (pinned, "1 node(s) had untolerated taint"),
    ];
    for (request, want) in cases {
        match b.reserve(C, &request).await.unwrap() {
            ReservationState::Unschedulable { reason } => {
                assert!(reason.starts_with("0/3 nodes are available"), "{reason}");
                assert!(reason.contains(want), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(env.revision(), r0);
    assert_eq!(b.reservation(C, "x").await.unwrap(), None);
    assert!(env.events().await.is_empty());

    // No fit by resources, and anti-affinity, on untainted nodes.
    let mut items = cluster_items();
    items[4]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("5");
    items[5]["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}});
    items.push(pod(
        "shop",
        "db-1",
        Some("c"),
        "100m",
        "64Mi",
        Some(("StatefulSet", "db")),
    ));
    let env = Env::new(&items).await;
    let b = env.dyn_backend();
    let r0 = env.revision();
    let no_fit = b
        .reserve(C, &req("x", "uid-shop-web-2", &["a"]))
        .await
        .unwrap();
    assert_eq!(
        no_fit,
        ReservationState::Unschedulable {
            reason: "0/3 nodes are available: 1 node(s) excluded (the pod's current node), 2 Insufficient cpu.".into()
        }
    );
    let anti = b
        .reserve(C, &req("y", "uid-shop-web-3", &["a"]))
        .await
        .unwrap();
    assert_eq!(
        anti,
        ReservationState::Unschedulable {
            reason: "0/3 nodes are available: 1 node(s) excluded (the pod's current node), 2 node(s) didn't match pod anti-affinity rules.".into()
        }
    );
    let gone = b.reserve(C, &req("z", "no-such-uid", &[])).await.unwrap();
    assert!(
        matches!(gone, ReservationState::Unschedulable { reason } if reason.contains("no longer exists"))
    );
    assert_eq!(env.revision(), r0);
    assert!(env.events().await.is_empty());
    assert!(env.backend.reserved(C).await.unwrap().is_empty());
}

#[tokio::test]
async fn pdb_without_headroom_blocks_and_changes_nothing() {
    let mut items = cluster_items();
    items.push(pdb("shop", "web", "web", json!({"minAvailable": 3})));
    let env = Env::new(&items).await;
    let b = env.dyn_backend();
    let r0 = env.revision();
    match b.eviction_check(C, "uid-shop-web-1").await.unwrap() {
        EvictionCheck::Blocked { pdb, reason } => {
            assert_eq!(pdb, "shop/web");
            assert!(
                reason.contains("needs 3 healthy pods and has 3 currently"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    match b.evict(C, &ev("uid-shop-web-1")).await.unwrap() {
        EvictionResult::BlockedByPdb { pdb, .. } => assert_eq!(pdb, "shop/web"),
        other => panic!("{other:?}"),
    }
    assert_eq!(env.revision(), r0);
    assert!(b.pod(C, "uid-shop-web-1").await.unwrap().is_some());
    assert!(env.events().await.is_empty());
    assert_eq!(
        b.eviction_check(C, "uid-shop-db-0").await.unwrap(),
        EvictionCheck::Allowed { pdb: None }
    );
    assert_eq!(
        b.eviction_check(C, "missing").await.unwrap(),
        EvictionCheck::PodNotFound
    );

    // maxUnavailable 1 leaves headroom; a second PDB over the same pods is refused.
    let mut items = cluster_items();
    items.push(pdb("shop", "web", "web", json!({"maxUnavailable": 1})));
    let env = Env::new(&items).await;
    assert_eq!(
        env.backend
            .eviction_check(C, "uid-shop-web-1")
            .await
            .unwrap(),
        EvictionCheck::Allowed {
            pdb: Some("shop/web".into())
        }
    );
    items.push(pdb(
        "shop",
        "web-too",
        "web",
        json!({"maxUnavailable": "50%"}),
    ));
    let env = Env::new(&items).await;
    assert!(matches!(
        env.backend.eviction_check(C, "uid-shop-web-1").await.unwrap(),
        EvictionCheck::MultiplePdbs { pdbs } if pdbs.len() == 2
    ));
    assert!(matches!(
        env.backend.evict(C, &ev("uid-shop-web-1")).await.unwrap(),
        EvictionResult::Refused { message } if message.contains("more than one PodDisruptionBudget")
    ));
}

#[tokio::test]
async fn evict_binds_the_replacement_into_the_reservation_once() {
    let mut env = Env::new(&cluster_items()).await;
    let b = env.dyn_backend();
    assert_eq!(
        b.reserve(C, &req("pm-1", "uid-shop-web-1", &["a"]))
            .await
            .unwrap(),
        ReservationState::Scheduled { node: "c".into() }
    );
    assert_eq!((env.cpu("a"), env.cpu("c")), (3000, 1000));
    assert_eq!(
        b.replacements_of(C, &gone("uid-shop-web-1"))
            .await
            .unwrap()
            .into_iter()
            .next(),
        None
    );

    assert_eq!(
        b.evict(C, &ev("uid-shop-web-1")).await.unwrap(),
        EvictionResult::Evicted
    );
    assert_eq!(b.pod(C, "uid-shop-web-1").await.unwrap(), None);
    let new = b
        .replacements_of(C, &gone("uid-shop-web-1"))
        .await
        .unwrap()
        .into_iter()
        .next()
        .expect("a replacement exists");
    assert_eq!(new.node.as_deref(), Some("c"));
    assert_eq!(new.reservation.as_deref(), Some("pm-1"));
    assert!(new.ready);
    assert_eq!(new.phase, "Running");
    assert!(
        new.name.starts_with("web-") && new.name != "web-1",
        "{}",
        new.name
    );
    assert_ne!(new.uid, "uid-shop-web-1");
    assert_eq!(new.owner.as_ref().map(|o| o.name.as_str()), Some("web"));
    assert_eq!(b.pod(C, &new.uid).await.unwrap().as_ref(), Some(&new));
    assert_eq!(
        b.reservation(C, "pm-1").await.unwrap(),
        Some(ReservationState::Bound {
            node: "c".into(),
            pod_uid: new.uid.clone()
        })
    );
    // Capacity: the pod moved from a to c; the consumed reservation holds nothing any more.
    assert_eq!((env.cpu("a"), env.cpu("c")), (2000, 2000));
    assert!(env.backend.reserved(C).await.unwrap().is_empty());

    // Releasing a consumed reservation changes nothing.
    let r1 = env.revision();
    b.release(C, "pm-1").await.unwrap();
    assert!(matches!(
        b.reservation(C, "pm-1").await.unwrap(),
        Some(ReservationState::Bound { .. })
    ));
    assert_eq!(env.revision(), r1);
    // Evicting again: NotFound, nothing changes, one eviction in the log.
    assert_eq!(
        b.evict(C, &ev("uid-shop-web-1")).await.unwrap(),
        EvictionResult::NotFound
    );
    assert_eq!(env.revision(), r1);
    let events = env.events().await;
    let evictions = events
        .iter()
        .filter(|(r, u)| r == "Evicted" && u.as_deref() == Some("uid-shop-web-1"))
        .count();
    assert_eq!(evictions, 1);
    assert_eq!(
        events.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(),
        ["ReservationScheduled", "Evicted", "ReplacementCreated"]
    );

    // A restart keeps everything.
    env.restart().await;
    let b = env.dyn_backend();
    assert_eq!(
        b.replacements_of(C, &gone("uid-shop-web-1"))
            .await
            .unwrap()
            .into_iter()
            .next()
            .as_ref(),
        Some(&new)
    );
    assert!(matches!(
        b.reservation(C, "pm-1").await.unwrap(),
        Some(ReservationState::Bound { .. })
    ));
    assert_eq!(
        b.evict(C, &ev("uid-shop-web-1")).await.unwrap(),
        EvictionResult::NotFound
    );
    assert_eq!(env.events().await.len(), 3);
    assert_eq!((env.cpu("a"), env.cpu("c")), (2000, 2000));
}

#[tokio::test]
async fn release_frees_capacity_and_survives_restart() {
    let mut env = Env::new(&cluster_items()).await;
    let b = env.dyn_backend();
    for i in 1..=3 {
        b.reserve(C, &req(&format!("pm-{i}"), "uid-shop-web-1", &["a"]))
            .await
            .unwrap();
    }
    // b: 2 used, c: 1 used → pm-1 on c, pm-2 on b, pm-3 on c: each holds 1 cpu.
    let held: i64 = env
        .backend
        .reserved(C)
        .await
        .unwrap()
        .values()
        .map(|v| v.cpu_milli)
        .sum();
    assert_eq!(held, 3000);
    b.release(C, "pm-1").await.unwrap();
    b.release(C, "pm-1").await.unwrap();
    b.release(C, "never-made").await.unwrap();
    assert_eq!(
        b.reservation(C, "pm-1").await.unwrap(),
        Some(ReservationState::Released)
    );
    env.restart().await;
    let b = env.dyn_backend();
    assert_eq!(
        b.reservation(C, "pm-1").await.unwrap(),
        Some(ReservationState::Released)
    );
    let held: i64 = env
        .backend
        .reserved(C)
        .await
        .unwrap()
        .values()
        .map(|v| v.cpu_milli)
        .sum();
    assert_eq!(held, 2000);
    assert!(matches!(
        b.reservation(C, "pm-2").await.unwrap(),
        Some(ReservationState::Scheduled { .. })
    ));
    // c had 1 used + 2 reserved of 4 cpu; after releasing pm-1 it has 2 free, so a 2-cpu
    // reservation pinned to c fits (it would not have before the release).
    let pinned = ReservationRequest {
        target_node: Some("c".into()),
        ..req("pm-db", "uid-shop-db-0", &[])
    };
    assert_eq!(
        b.reserve(C, &pinned).await.unwrap(),
        ReservationState::Scheduled { node: "c".into() }
    );
    // The replacement of web-1 binds into the oldest live reservation of its ReplicaSet (the
    // released pm-1 is skipped).
    assert_eq!(
        b.evict(C, &ev("uid-shop-web-1")).await.unwrap(),
        EvictionResult::Evicted
    );
    let new = b
        .replacements_of(C, &gone("uid-shop-web-1"))
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(new.reservation.as_deref(), Some("pm-2"));
    assert_eq!(new.node.as_deref(), Some("b"));
    assert_eq!(
        b.reservation(C, "pm-1").await.unwrap(),
        Some(ReservationState::Released)
    );
    let reasons: Vec<_> = env.events().await.into_iter().map(|e| e.0).collect();
    assert_eq!(
        reasons,
        [
            "ReservationScheduled",
            "ReservationScheduled",
            "ReservationScheduled",
            "ReservationReleased",
            "ReservationScheduled",
            "Evicted",
            "ReplacementCreated"
        ]
    );
}

#[tokio::test]
async fn controllers_recreate_owned_pods_only() {
    let env = Env::new(&cluster_items()).await;
    let b = env.dyn_backend();
    // StatefulSet: same name, new uid, placed by score (no reservation).
    assert_eq!(
        b.evict(C, &ev("uid-shop-db-0")).await.unwrap(),
        EvictionResult::Evicted
    );
    let db = b
        .replacements_of(C, &gone("uid-shop-db-0"))
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(db.name, "db-0");
    assert_ne!(db.uid, "uid-shop-db-0");
    assert_eq!(db.reservation, None);
    assert!(db.ready && db.node.is_some());
    // Bare pod: gone for good.
    assert_eq!(
        b.evict(C, &ev("uid-shop-tool")).await.unwrap(),
        EvictionResult::Evicted
    );
    assert_eq!(
        b.replacements_of(C, &gone("uid-shop-tool"))
            .await
            .unwrap()
            .into_iter()
            .next(),
        None
    );
    assert_eq!(b.pod(C, "uid-shop-tool").await.unwrap(), None);
    // Unknown cluster.
    assert!(matches!(
        b.pod("nope", "x").await,
        Err(BackendError::UnknownCluster(_))
    ));
    // A replacement that fits nowhere stays Pending.
    let items = vec![
        node("a", "2", "4Gi"),
        pod(
            "ns",
            "big-1",
            Some("a"),
            "2",
            "1Gi",
            Some(("ReplicaSet", "big")),
        ),
        pod("ns", "other", None, "1", "1Gi", None),
    ];
    let mut items = items;
    // Make a full by binding the pending pod there too (a is over-committed by the snapshot).
    items[2]["spec"]["nodeName"] = json!("a");
    let env = Env::new(&items).await;
    assert_eq!(
        env.backend.evict(C, &ev("uid-ns-big-1")).await.unwrap(),
        EvictionResult::Evicted
    );
    let big = env
        .backend
        .replacements_of(C, &gone("uid-ns-big-1"))
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(
        (big.phase.as_str(), big.node.as_deref(), big.ready),
        ("Pending", None, false)
    );
}
