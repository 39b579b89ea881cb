//! What one run has decided so far: [`RunState`] (proposed pods, limit counters, PDB budget
//! consumed, accepted and refused proposals, shared by all plugins and plugin sets of the run),
//! the run's [`Limits`] and the records it keeps ([`AcceptedProposal`], [`RefusedProposal`],
//! [`RefusalCounts`], [`LogEntry`]).
//!
//! Owns the bookkeeping only; the rules that update it live in [`super::propose`].

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::model::StrId;
use crate::policy::{LogLevel, Refusal};
use crate::view::Cluster;

/// Policy-wide eviction limits (`maxNoOfPodsToEvictPerNode`, `…PerNamespace`, `…Total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub per_node: Option<u32>,
    pub per_namespace: Option<u32>,
    pub total: Option<u32>,
}

/// Refused proposals a run records with their reasons ([`RunState::refusals`]); every refusal
/// is counted ([`RunState::refusal_counts`]) all the same. A policy may propose up to the host's
/// proposal cap (a million by default) per evaluation, all refused.
pub const MAX_RECORDED_REFUSALS: usize = 10_000;

/// An accepted proposal, in the order proposals were made. `reason` is at most
/// [`crate::caps::MAX_REASON_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedProposal {
    pub pod: u32,
    pub reason: String,
    pub plugin: String,
    pub plugin_set: String,
}

/// A refused proposal and why. `reason` is at most [`crate::caps::MAX_REASON_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedProposal {
    pub pod: u32,
    pub reason: String,
    pub plugin: String,
    pub plugin_set: String,
    pub refusal: Refusal,
}

/// Refusals by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RefusalCounts {
    pub unknown_pod: u32,
    pub not_evictable: u32,
    pub node_limit: u32,
    pub namespace_limit: u32,
    pub total_limit: u32,
    pub disruption_budget: u32,
}

impl RefusalCounts {
    pub fn total(&self) -> u32 {
        self.unknown_pod
            + self.not_evictable
            + self.node_limit
            + self.namespace_limit
            + self.total_limit
            + self.disruption_budget
    }
}

/// A log line a policy wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub level: LogLevel,
    pub plugin: String,
    pub plugin_set: String,
    pub message: String,
}

/// What one run has decided so far; shared by all plugins and plugin sets of the run.
#[derive(Debug, Clone)]
pub struct RunState {
    pub(super) limits: Limits,
    pub(super) proposed: Vec<bool>,
    pub(super) per_node: HashMap<StrId, u32>,
    pub(super) per_namespace: HashMap<StrId, u32>,
    pub(super) total: u32,
    pub(super) pdb_consumed: Vec<i32>,
    pub(super) proposals: Vec<AcceptedProposal>,
    pub(super) refusals: Vec<RefusedProposal>,
    pub(super) refusal_counts: RefusalCounts,
    /// Owner (index into the snapshot's owners) → when an earlier run last proposed one of its
    /// pods (ms), for the evictor's `cooldown`.
    pub(super) recent_owners: HashMap<u32, i64>,
}

impl RunState {
    pub fn new(cluster: Cluster<'_>, limits: Limits) -> Self {
        RunState {
            limits,
            proposed: vec![false; cluster.pod_count()],
            per_node: HashMap::new(),
            per_namespace: HashMap::new(),
            total: 0,
            pdb_consumed: vec![0; cluster.archive().pdbs.len()],
            proposals: Vec::new(),
            refusals: Vec::new(),
            refusal_counts: RefusalCounts::default(),
            recent_owners: HashMap::new(),
        }
    }

    /// When earlier runs last proposed a pod of each owner (index into the snapshot's owners →
    /// ms), for the evictor's `cooldown`.
    pub fn with_recent_owners(mut self, recent: HashMap<u32, i64>) -> Self {
        self.recent_owners = recent;
        self
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The pod was proposed (and accepted) earlier in this run.
    pub fn is_proposed(&self, pod: u32) -> bool {
        self.proposed.get(pod as usize).copied().unwrap_or(false)
    }

    /// Accepted proposals, in order.
    pub fn proposals(&self) -> &[AcceptedProposal] {
        &self.proposals
    }

    /// Refused proposals, in order: the first [`MAX_RECORDED_REFUSALS`] of the run (the rest
    /// are only counted, in [`RunState::refusal_counts`]).
    pub fn refusals(&self) -> &[RefusedProposal] {
        &self.refusals
    }

    pub fn refusal_counts(&self) -> RefusalCounts {
        self.refusal_counts
    }

    /// Accepted proposals so far.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Accepted proposals of pods whose `spec.nodeName` is `node_name`.
    pub fn node_count(&self, node_name: StrId) -> u32 {
        self.per_node.get(&node_name).copied().unwrap_or(0)
    }

    pub fn namespace_count(&self, namespace: StrId) -> u32 {
        self.per_namespace.get(&namespace).copied().unwrap_or(0)
    }

    /// Disruptions of a PDB used up by this run's accepted proposals.
    pub fn pdb_consumed(&self, pdb: u32) -> i32 {
        self.pdb_consumed.get(pdb as usize).copied().unwrap_or(0)
    }
}
