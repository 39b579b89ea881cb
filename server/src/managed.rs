//! Managed clusters: the Kubernetes clusters the operator connected with `--kube-cluster` and
//! `--in-cluster`.
//!
//! Owns [`Managed`]: per cluster its live sync (`rebalancer_kube::LiveCluster`, which installs
//! revisions through [`Ingest`]), its Lease loop (`rebalancer_kube::Leadership`) and its
//! backend; the answer to "may this server act on cluster X now" (the scheduler and the
//! executor ask), and why not (the Lease, its holder, why it cannot be taken); whether a
//! cluster is still on its first sync (`/readyz`, runs); and what the API shows of a managed
//! cluster (API server, connection, lease, warnings), from the first second, synced or not;
//! and announcing each connection change on the change feed (a `cluster` event, checked every
//! second: the connection lives in this process, not in a database transaction).
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
    /// When this server started following it (ms since the epoch).
    pub started_ms: i64,
    pub live: LiveCluster,
    pub leadership: Leadership,
    pub backend: Arc<KubeBackend>,
    /// How this server reserves room before an eviction there (`--reservation-mode`).
    pub reservation_mode: rebalancer_kube::ReservationMode,
}

/// Every managed cluster. Cheap to clone.
#[derive(Clone, Default)]
pub struct Managed {
    clusters: Arc<BTreeMap<String, ManagedCluster>>,
    /// Stops announcing connection changes.
    announcing: tokio_util::sync::CancellationToken,
}

/// How often connection states are compared with the last announced ones.
const ANNOUNCE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Append a `cluster` event (`{name, connection, message}`) whenever a managed cluster's
/// connection state or its reason changes, until `stop`.
async fn announce_connections(
    clusters: Arc<BTreeMap<String, ManagedCluster>>,
    store: rebalancer_store::Store,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut announced: BTreeMap<String, (rebalancer_kube::ConnectionState, Option<String>)> =
        BTreeMap::new();
    let mut tick = tokio::time::interval(ANNOUNCE_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        for (name, c) in clusters.iter() {
            let status = c.live.status();
            let now = (status.state, status.message.clone());
            if announced.get(name) == Some(&now) {
                continue;
            }
            let data = serde_json::json!({
                "name": name,
                "connection": state_name(status.state),
                "message": status.message,
                "previous": announced.get(name).map(|(state, _)| state_name(*state)),
            });
            match store
                .append_event(rebalancer_store::EventKind::Cluster, Some(name), &data)
                .await
            {
                Ok(_) => {
                    announced.insert(name.clone(), now);
                }
                Err(e) => tracing::warn!(
                    cluster = %name,
                    error = %e,
                    "could not announce a connection change; trying again in a second"
                ),
            }
        }
    }
}

/// What the API shows of a managed cluster.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeView {
    /// The API server's URL.
    pub api_server: String,
    pub connection: SyncStatus,
    pub lease: LeaseStatus,
    /// What in the cluster keeps this server from acting as configured, checked at every
    /// revision: a missing placeholder PriorityClass (when placeholder pods may be used,
    /// reservation mode `auto` or `placeholder`). Empty when nothing does.
    pub warnings: Vec<String>,
    /// How room is reserved before an eviction (`--reservation-mode`): `auto` (Koordinator
    /// Reservations where the API server serves them, placeholder pods otherwise),
    /// `reservation` or `placeholder`. The last sync is `connection.lastSyncMs`.
    pub reservation_mode: rebalancer_kube::ReservationMode,
}

impl Managed {
    /// Build the clients (reading kubeconfigs or the service account; a bad one stops the
    /// start-up with its reason) and start syncing and competing for the Leases.
    pub async fn connect(settings: &KubeSettings, ingest: &Ingest) -> anyhow::Result<Managed> {
        let mut clusters = BTreeMap::new();
        // Placeholder pods need their PriorityClass: each revision checks it is there.
        let sync = rebalancer_kube::SyncOptions {
            placeholder_priority_class: (settings.act.reservation_mode
                != rebalancer_kube::ReservationMode::Reservation)
                .then(|| settings.act.placeholder_priority_class.clone()),
            ..settings.sync.clone()
        };
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
            let live =
                LiveCluster::start(&c.name, connection, sync.clone(), Arc::new(ingest.clone()));
            let leadership = Leadership::start(client, &c.name, settings.lease.clone());
            let backend = Arc::new(KubeBackend::new(
                live.clone(),
                ingest.clusters.clone(),
                settings.act.clone(),
            ));
            clusters.insert(
                c.name.clone(),
                ManagedCluster {
                    started_ms: rebalancer_store::now_ms(),
                    live,
                    leadership,
                    backend,
                    reservation_mode: settings.act.reservation_mode,
                },
            );
        }
        let clusters = Arc::new(clusters);
        let announcing = tokio_util::sync::CancellationToken::new();
        if !clusters.is_empty() {
            tokio::spawn(announce_connections(
                clusters.clone(),
                ingest.store.clone(),
                announcing.clone(),
            ));
        }
        Ok(Managed {
            clusters,
            announcing,
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

    /// Why this server does not act on `cluster` now, for its waiting pod migrations: the
    /// Lease, who holds it, or why it cannot be taken. `None` when it may act (or the cluster
    /// is not managed).
    pub fn waiting_for_lease(&self, cluster: &str) -> Option<String> {
        let c = self.clusters.get(cluster)?;
        if c.leadership.is_leader() {
            return None;
        }
        let status = c.leadership.status();
        Some(match (&status.error, &status.holder) {
            (Some(error), _) => format!(
                "waiting for the lease {}, which this server cannot take: {error}",
                status.lease
            ),
            (None, Some(holder)) if *holder != status.identity => {
                format!("waiting for the lease {}, held by {holder}", status.lease)
            }
            (None, _) => format!(
                "waiting for the lease {}, which this server is taking",
                status.lease
            ),
        })
    }

    /// Managed clusters whose Lease this server cannot read or take, with why (for `/readyz`):
    /// nothing is executed there until it can.
    pub fn cannot_act(&self) -> Vec<(String, String)> {
        self.clusters
            .iter()
            .filter_map(|(name, c)| {
                let status = c.leadership.status();
                let error = status.error?;
                Some((
                    name.clone(),
                    format!("cannot take the lease {}: {error}", status.lease),
                ))
            })
            .collect()
    }

    /// Whether `cluster` is managed and has had no revision installed since this server
    /// started, with its connection state in words (`connecting: listing pods`,
    /// `disconnected: …`): runs wait for its first sync.
    pub fn syncing(&self, cluster: &str) -> Option<String> {
        let c = self.clusters.get(cluster)?;
        let status = c.live.status();
        status.revision.is_none().then(|| describe_state(&status))
    }

    /// Managed clusters that the server can reach but has no revision of yet (their first list
    /// is under way, or listed and its first revision not installed yet): `/readyz` is not
    /// ready until they have one. A cluster that cannot be reached is not among them (it is
    /// `degraded`, see [`Managed::not_synced`]).
    pub fn first_sync(&self) -> Vec<(String, String)> {
        self.clusters
            .iter()
            .filter_map(|(name, c)| {
                let status = c.live.status();
                (status.revision.is_none()
                    && status.state != rebalancer_kube::ConnectionState::Disconnected)
                    .then(|| (name.clone(), describe_state(&status)))
            })
            .collect()
    }

    pub fn view(&self, cluster: &str) -> Option<KubeView> {
        self.clusters.get(cluster).map(|c| {
            let connection = c.live.status();
            KubeView {
                api_server: c.live.api_server().to_owned(),
                warnings: connection.warnings.clone(),
                connection,
                lease: c.leadership.status(),
                reservation_mode: c.reservation_mode,
            }
        })
    }

    /// Managed clusters that are not synced now, with why (for `/readyz`).
    pub fn not_synced(&self) -> Vec<(String, String)> {
        self.clusters
            .iter()
            .filter_map(|(name, c)| {
                let status = c.live.status();
                (status.state != rebalancer_kube::ConnectionState::Synced)
                    .then(|| (name.clone(), describe_state(&status)))
            })
            .collect()
    }

    /// Stop syncing and competing, and release the Leases held (shutdown).
    pub async fn stop(&self) {
        self.announcing.cancel();
        for c in self.clusters.values() {
            c.live.stop();
            c.leadership.release().await;
        }
    }
}

/// A connection state in words: `connecting: listing pods`, `disconnected: …`, `synced`.
fn describe_state(status: &SyncStatus) -> String {
    let state = state_name(status.state);
    match &status.message {
        Some(m) => format!("{state}: {m}"),
        None => state.to_owned(),
    }
}

/// A connection state's name, as the API writes it.
fn state_name(state: rebalancer_kube::ConnectionState) -> &'static str {
    match state {
        rebalancer_kube::ConnectionState::Connecting => "connecting",
        rebalancer_kube::ConnectionState::Synced => "synced",
        rebalancer_kube::ConnectionState::Disconnected => "disconnected",
    }
}
