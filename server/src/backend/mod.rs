//! Backends: where pod migrations act on a cluster.
//!
//! Owns: the implementations of [`Backend`] the server runs — [`simulated`] (the cluster lives
//! in the database; the server plays scheduler and controllers) — and [`Backends`], which
//! sends each call to the backend of its cluster: the Kubernetes backend (`rebalancer-kube`)
//! for clusters the operator connected, the simulated one for every other cluster.
//! Must not: decide *whether* to move a pod (that is the executor and arbitration) or build
//! HTTP responses. The contract itself is the `rebalancer-backend` crate, re-exported here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;

pub use rebalancer_backend::*;
use rebalancer_cluster::ResourceAmounts;

pub mod simulated;

#[cfg(test)]
mod tests;

pub use simulated::SimulatedBackend;

/// The backend of each cluster: `dedicated` ones by name, `fallback` for every other cluster.
#[derive(Clone)]
pub struct Backends {
    dedicated: HashMap<String, Arc<dyn Backend>>,
    fallback: Arc<dyn Backend>,
}

impl Backends {
    pub fn new(fallback: Arc<dyn Backend>) -> Backends {
        Backends {
            dedicated: HashMap::new(),
            fallback,
        }
    }

    /// Route cluster `name` to `backend`.
    pub fn with(mut self, name: &str, backend: Arc<dyn Backend>) -> Backends {
        self.dedicated.insert(name.to_owned(), backend);
        self
    }

    fn of(&self, cluster: &str) -> &dyn Backend {
        self.dedicated
            .get(cluster)
            .map_or(&*self.fallback, |b| &**b)
    }
}

#[async_trait]
impl Backend for Backends {
    async fn pod(&self, cluster: &str, uid: &str) -> Result<Option<PodState>, BackendError> {
        self.of(cluster).pod(cluster, uid).await
    }

    async fn eviction_check(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<EvictionCheck, BackendError> {
        self.of(cluster).eviction_check(cluster, uid).await
    }

    async fn reservation_kind(
        &self,
        cluster: &str,
        pod_uid: &str,
    ) -> Result<ReservationKind, BackendError> {
        self.of(cluster).reservation_kind(cluster, pod_uid).await
    }

    async fn reserve(
        &self,
        cluster: &str,
        req: &ReservationRequest,
    ) -> Result<ReservationState, BackendError> {
        self.of(cluster).reserve(cluster, req).await
    }

    async fn reservation(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<ReservationState>, BackendError> {
        self.of(cluster).reservation(cluster, name).await
    }

    async fn release(&self, cluster: &str, name: &str) -> Result<(), BackendError> {
        self.of(cluster).release(cluster, name).await
    }

    async fn evict(
        &self,
        cluster: &str,
        request: &EvictionRequest,
    ) -> Result<EvictionResult, BackendError> {
        self.of(cluster).evict(cluster, request).await
    }

    async fn record_eviction(
        &self,
        cluster: &str,
        request: &EvictionRequest,
    ) -> Result<(), BackendError> {
        self.of(cluster).record_eviction(cluster, request).await
    }

    async fn replacements_of(
        &self,
        cluster: &str,
        evicted: &EvictedPod,
    ) -> Result<Vec<PodState>, BackendError> {
        self.of(cluster).replacements_of(cluster, evicted).await
    }

    async fn reserved(
        &self,
        cluster: &str,
    ) -> Result<BTreeMap<String, ResourceAmounts>, BackendError> {
        self.of(cluster).reserved(cluster).await
    }
}
