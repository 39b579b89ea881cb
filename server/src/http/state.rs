//! The state request handlers share: [`AppState`], and the parts a handler can take alone
//! through `FromRef` (`State<Store>`, `State<InFlight>`, `State<approval::Deps>`).
//!
//! Owns: what the HTTP layer holds. Built by `app` at start-up from the same handles the
//! pipeline stages get.
//! Must not: be passed to a pipeline stage; stages take their own small deps structs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::FromRef;
use tokio::sync::{Mutex, Notify, Semaphore};

use crate::approval;
use crate::backend::Backend;
use crate::config::Settings;
use crate::executor;
use crate::in_flight::InFlight;
use crate::ingest::Ingest;
use crate::metrics::Metrics;
use crate::trigger;
use rebalancer_cluster::Clusters;
use rebalancer_engine::{Engine, PolicyRegistry};
use rebalancer_store::Store;

/// Everything a request handler may need. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    /// Set once start-up has finished; `/readyz` and `/api/v1` depend on it.
    pub ready: Arc<AtomicBool>,
    pub store: Store,
    pub engine: Engine,
    pub registry: PolicyRegistry,
    pub clusters: Clusters,
    /// Bounds CPU-heavy blocking work running at once (compilations, runs).
    pub evaluations: Arc<Semaphore>,
    /// Serialises changes to policies and profiles, so a profile is never stored against a
    /// policy that is being deleted.
    pub catalog_lock: Arc<Mutex<()>>,
    /// Writes that complete even when the client goes away; shutdown waits for them.
    pub in_flight: InFlight,
    /// Prometheus metrics (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// Wakes the scheduler after a schedule changed.
    pub schedules_changed: Arc<Notify>,
    /// Where pod migrations act.
    pub backend: Arc<dyn Backend>,
    /// Snapshot pushes.
    pub ingest: Ingest,
    /// How many snapshot pushes read and ingest their body at once.
    pub snapshot_pushes: Arc<super::pushes::SnapshotPushes>,
    /// Runs started over REST.
    pub runs: trigger::Deps,
    /// Approving and rejecting decisions.
    pub approval: approval::Deps,
    /// Abort, and the arbitration knobs (`pod_migrations.executor`).
    pub pod_migrations: executor::Deps,
    /// Kubernetes clusters connected by the operator (not through the API).
    pub managed: crate::managed::Managed,
    /// Wakes the webhook sender (a test delivery queued, a hook enabled again).
    pub webhooks_wake: Arc<Notify>,
    /// Turns true when serving stops: the event streams end then (a stream never finishes by
    /// itself, and graceful shutdown waits for every response to finish).
    pub closing: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

impl FromRef<AppState> for Store {
    fn from_ref(state: &AppState) -> Store {
        state.store.clone()
    }
}

impl FromRef<AppState> for InFlight {
    fn from_ref(state: &AppState) -> InFlight {
        state.in_flight.clone()
    }
}

impl FromRef<AppState> for approval::Deps {
    fn from_ref(state: &AppState) -> approval::Deps {
        state.approval.clone()
    }
}
