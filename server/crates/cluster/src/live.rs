//! The live state: the current [`ClusterSnapshot`] of every loaded cluster, and revisions.
//!
//! Owns: the in-memory map cluster name → snapshot that runs, the API and the executor read,
//! the revision counter (revisions grow across all clusters, so a revision names one state of
//! one cluster), and the change notification the scheduler's on-change triggers wait on.
//! Must not: persist anything (the store holds the objects; whoever ingests persists first and
//! only then puts the new snapshot in place here) or build snapshots.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::ClusterSnapshot;

/// The current snapshot of every loaded cluster, and the revision counter. Cheap to clone.
#[derive(Clone, Default)]
pub struct Clusters {
    snapshots: Arc<RwLock<HashMap<String, Arc<ClusterSnapshot>>>>,
    revision: Arc<AtomicU64>,
    /// The revision of the latest snapshot put in place, announced to [`Clusters::subscribe`]rs
    /// (the scheduler's change triggers).
    changed: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for Clusters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clusters")
            .field("revisions", &self.revisions())
            .finish()
    }
}

impl Clusters {
    pub fn get(&self, name: &str) -> Option<Arc<ClusterSnapshot>> {
        self.read().get(name).cloned()
    }

    /// Put a cluster's new state in place, and wake whoever waits for changes.
    pub fn insert(&self, name: &str, snapshot: Arc<ClusterSnapshot>) {
        let revision = snapshot.revision;
        self.snapshots
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), snapshot);
        self.changed.send_replace(revision);
    }

    /// Forget a deleted cluster's state. Whether it was loaded.
    pub fn remove(&self, name: &str) -> bool {
        self.snapshots
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
            .is_some()
    }

    /// Be told when any cluster's state changes (wake-ups only; read the state itself with
    /// [`Clusters::revisions`]).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The current revision of every loaded cluster.
    pub fn revisions(&self) -> Vec<(String, u64)> {
        self.read()
            .iter()
            .map(|(name, snapshot)| (name.clone(), snapshot.revision))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A revision no cluster state has had yet (revisions grow across all clusters).
    pub fn next_revision(&self) -> u64 {
        self.revision.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Make sure new revisions are above `revision` (a stored state loaded at start-up).
    pub fn raise_revision(&self, revision: u64) {
        self.revision.fetch_max(revision, Ordering::AcqRel);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<ClusterSnapshot>>> {
        self.snapshots.read().unwrap_or_else(|p| p.into_inner())
    }
}
