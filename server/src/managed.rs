//! Managed clusters: the Kubernetes clusters the operator connected with `--kube-cluster` and
//! `--in-cluster`.
//!
//! Owns [`Managed`]: per cluster its live sync (`rebalancer_kube::LiveCluster`, which installs
//! revisions through [`Ingest`]), its Lease loop (`rebalancer_kube::Leadership`) and its
//! backend; the answer to "may this server act on cluster X now" (the scheduler and the
//! executor ask); and what the API shows of a managed cluster (API server, connection, lease).
//! Must not: hold SQL, build HTTP responses, or touch credentials beyond handing the source to
//! `rebalancer_kube::connect`.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use serde::Serialize;

use crate::backend::Backend;
use crate::config::KubeSettings;
use crate::ingest::Ingest;
use rebalancer_kube::{KubeBackend, Leadership, LeaseStatus, LiveCluster, SyncStatus};

/// One managed cluster.
#[derive(Clone)]
pub struct ManagedCluster {
    pub live: LiveCluster,
    pub leadership: Leadership,
    pub backend: Arc<KubeBackend>,
}

/// Every managed cluster. Cheap to clone.
#[derive(Clone, Default)]
pub struct Managed {
    clusters: Arc<BTreeMap<String, ManagedCluster>>,
}

/// What the API shows of a managed cluster.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeView {
    /// The API server's URL.
    pub api_server: String,
    pub connection: SyncStatus,
    pub lease: LeaseStatus,
}

impl Managed {
    /// Build the clients (reading kubeconfigs or the service account; a bad one stops the
    /// start-up with its reason) and start syncing and competing for the Leases.
    pub async fn connect(settings: &KubeSettings, ingest: &Ingest) -> anyhow::Result<Managed> {
        let mut clusters = BTreeMap::new();
        for c in &settings.clusters {
            let connection = rebalancer_kube::connect(&c.source)
                .await
                .with_context(|| format!("connecting cluster {:?}", c.name))?;
            tracing::info!(
                cluster = %c.name,
                api_server = %connection.api_server,
                source = %c.source.describe(),
                "managing Kubernetes cluster"
            );
            let client = connection.client.clone();
            let live = LiveCluster::start(
                &c.name,
                connection,
                settings.sync.clone(),
                Arc::new(ingest.clone()),
            );
            let leadership = Leadership::start(client, &c.name, settings.lease.clone());
            let backend = Arc::new(KubeBackend::new(
                live.clone(),
                ingest.clusters.clone(),
                settings.act.clone(),
            ));
            clusters.insert(
                c.name.clone(),
                ManagedCluster {
                    live,
                    leadership,
                    backend,
                },
            );
        }
        Ok(Managed {
            clusters: Arc::new(clusters),
        })
    }

    pub fn get(&self, name: &str) -> Option<&ManagedCluster> {
        self.clusters.get(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// The backends of managed clusters, by name.
    pub fn backends(&self) -> impl Iterator<Item = (&str, Arc<dyn Backend>)> + '_ {
        self.clusters
            .iter()
            .map(|(name, c)| (name.as_str(), c.backend.clone() as Arc<dyn Backend>))
    }

    /// May this server act (execute pod migrations, start scheduled runs) on `cluster` now?
    /// Always for clusters that are not managed; for managed ones only while holding the Lease.
    pub fn may_act(&self, cluster: &str) -> bool {
        self.clusters
            .get(cluster)
            .is_none_or(|c| c.leadership.is_leader())
    }

    /// Who holds the Lease of a managed cluster (for messages), `None` for other clusters.
    pub fn lease(&self, cluster: &str) -> Option<LeaseStatus> {
        self.clusters.get(cluster).map(|c| c.leadership.status())
    }

    pub fn view(&self, cluster: &str) -> Option<KubeView> {
        self.clusters.get(cluster).map(|c| KubeView {
            api_server: c.live.api_server().to_owned(),
            connection: c.live.status(),
            lease: c.leadership.status(),
        })
    }

    /// Managed clusters that are not synced now, with why (for `/readyz`).
    pub fn not_synced(&self) -> Vec<(String, String)> {
        self.clusters
            .iter()
            .filter_map(|(name, c)| {
                let status = c.live.status();
                (status.state != rebalancer_kube::ConnectionState::Synced).then(|| {
                    let state = match status.state {
                        rebalancer_kube::ConnectionState::Connecting => "connecting",
                        rebalancer_kube::ConnectionState::Synced => "synced",
                        rebalancer_kube::ConnectionState::Disconnected => "disconnected",
                    };
                    (
                        name.clone(),
                        match status.message {
                            Some(m) => format!("{state}: {m}"),
                            None => state.to_owned(),
                        },
                    )
                })
            })
            .collect()
    }

    /// Stop syncing and competing, and release the Leases held (shutdown).
    pub async fn stop(&self) {
        for c in self.clusters.values() {
            c.live.stop();
            c.leadership.release().await;
        }
    }
}
