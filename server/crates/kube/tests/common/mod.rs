//! What the Kubernetes backend's tests share: a fake API server with a small cluster, a client
//! of it through a real kubeconfig file, a snapshot sink, and object builders.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rebalancer_cluster::{ClusterSnapshot, Clusters};
use rebalancer_kube::{Connection, LiveCluster, SnapshotSink, Source, SyncOptions};
use rebalancer_kube_fake::FakeApiServer;
use serde_json::{Value, json};

pub const CLUSTER: &str = "east";

/// Installs snapshots into a `Clusters`, counting them.
pub struct Sink {
    pub clusters: Clusters,
    pub installed: AtomicU64,
}

#[async_trait]
impl SnapshotSink for Sink {
    fn next_revision(&self) -> u64 {
        self.clusters.next_revision()
    }
    async fn install(&self, cluster: &str, snapshot: ClusterSnapshot) -> Result<(), String> {
        self.clusters.insert(cluster, Arc::new(snapshot));
        self.installed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Fast timing for tests (nothing asserts on it; it only makes waits short).
pub fn fast() -> SyncOptions {
    SyncOptions {
        debounce: Duration::from_millis(50),
        max_delay: Duration::from_millis(300),
        poll_interval: Duration::from_millis(300),
        probe_interval: Duration::from_millis(200),
        placeholder_priority_class: None,
    }
}

/// The token of the ServiceAccount `rebalancer/rebalancer` the backend runs as.
pub const SA_TOKEN: &str = "rebalancer-sa-token";

/// A client of `fake` through a kubeconfig file, as an operator would configure it, as the
/// ServiceAccount of `deploy/`: the fake enforces `deploy/rbac.yaml` for it, so a request the
/// manifest does not grant is refused here as on a real API server ([`assert_nothing_denied`]).
pub async fn connection(fake: &FakeApiServer, dir: &tempfile::TempDir) -> Connection {
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../deploy/rbac.yaml"
    ))
    .expect("deploy/rbac.yaml");
    fake.add_service_account("rebalancer", "rebalancer", SA_TOKEN, &rbac)
        .expect("deploy/rbac.yaml loads");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, fake.kubeconfig_with_token(CLUSTER, SA_TOKEN)).unwrap();
    rebalancer_kube::connect(&Source::Kubeconfig {
        path: Some(path),
        context: Some(CLUSTER.into()),
    })
    .await
    .expect("the kubeconfig works")
}

pub struct World {
    pub fake: FakeApiServer,
    pub live: LiveCluster,
    pub sink: Arc<Sink>,
    pub dir: tempfile::TempDir,
    expect_denied: std::sync::atomic::AtomicBool,
}

impl Drop for World {
    /// Every test runs as the ServiceAccount of `deploy/`: nothing it did may have been refused.
    fn drop(&mut self) {
        if !std::thread::panicking() && !self.expect_denied.load(Ordering::SeqCst) {
            assert_nothing_denied(&self.fake);
        }
    }
}

impl World {
    pub async fn start(fake: FakeApiServer, options: SyncOptions) -> World {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(Sink {
            clusters: Clusters::default(),
            installed: AtomicU64::new(0),
        });
        let live = LiveCluster::start(
            CLUSTER,
            connection(&fake, &dir).await,
            options,
            sink.clone(),
        );
        World {
            fake,
            live,
            sink,
            dir,
            expect_denied: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Tests that make the backend ask for what `deploy/` does not grant (on purpose) say so.
    pub fn expect_denied(&self) {
        self.expect_denied
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn snapshot(&self) -> Option<Arc<ClusterSnapshot>> {
        self.sink.clusters.get(CLUSTER)
    }

    pub fn pod_names(&self) -> Vec<String> {
        let Some(s) = self.snapshot() else {
            return Vec::new();
        };
        let cluster = s.cluster();
        let mut names: Vec<String> = cluster
            .pods()
            .map(|p| format!("{}/{}", p.namespace(), p.name()))
            .collect();
        names.sort();
        names
    }

    /// Wait (up to 20 s) until `check` holds.
    pub async fn until(&self, what: &str, check: impl Fn(&World) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !check(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; pods {:?}, status {:?}",
                self.pod_names(),
                self.live.status()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    })
}

pub fn replica_set(uid: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid, "controller": true})
}

pub fn pod(namespace: &str, name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}"),
            "labels": {"app": "web"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [replica_set("rs-web")]
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "image": "nginx",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

pub fn pdb(namespace: &str, name: &str, allowed: i64) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 1,
                   "expectedPods": 2, "observedGeneration": 1}
    })
}

pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Two nodes, namespace `shop` with two pods of one ReplicaSet on n1.
pub fn small(fake: &FakeApiServer) {
    fake.apply(namespace("shop"));
    fake.apply(node("n1"));
    fake.apply(node("n2"));
    fake.apply(pod("shop", "web-1", "n1"));
    fake.apply(pod("shop", "web-2", "n1"));
}

/// Nothing the backend asked for was refused by the RBAC of `deploy/`.
pub fn assert_nothing_denied(fake: &FakeApiServer) {
    let denied = fake.denied();
    assert!(
        denied.is_empty(),
        "deploy/rbac.yaml does not grant what the backend asked for: {denied:?}"
    );
}
