//! The host's evictor: descheduler's DefaultEvictor (Filter, PreEvictionFilter, nodeFit), the
//! run's eviction limits and the Eviction API's PodDisruptionBudget admission.
//!
//! Owns the pieces the wasm host, native runs and [`crate::testing`] share:
//! - [`DefaultEvictorArgs`]: every DefaultEvictor argument of descheduler v0.36, with its
//!   validation rules, and [`EvictorConfig`], the args resolved once against a snapshot;
//! - [`ClusterIndex`]: per-snapshot indexes (pods by node, requested resources, ready nodes,
//!   PDB coverage, owner replica counts), built once and shared read-only by every run;
//! - [`RunState`]: what one run has decided so far (proposed pods, limit counters, PDB budget
//!   consumed, accepted and refused proposals), shared by all plugins of the run;
//! - [`Evictor`]: a cheap per-call view over the above that implements [`Host`](crate::Host).
//!
//! A pod proposed in a run is terminating for the rest of that run: Filter rejects it and it is
//! never proposed twice, while its requests still count towards node usage (the API server keeps a
//! terminating pod visible). Nothing here talks to Kubernetes: admission is decided from the
//! snapshot's PDB status, the way the conformance harness's emulated Eviction API does.
//!
//! # Files
//! - `args`: [`DefaultEvictorArgs`] and its validation; `config`: [`EvictorConfig`];
//! - `index`: [`ClusterIndex`]; `state`: [`RunState`], [`Limits`] and the records of a run;
//! - `node_fit`: [`node_fit_error`]; `host`: [`Evictor`] and its [`crate::Host`] impl;
//! - `filter`: Filter/PreEvictionFilter; `propose`: limits and PDB admission.
//!
//! Go durations moved to [`crate::k8s::duration`]; they stay re-exported here.

mod args;
mod config;
mod filter;
mod host;
mod index;
mod node_fit;
mod propose;
mod state;

#[cfg(test)]
mod tests;

pub use crate::k8s::duration::{format_go_duration, parse_go_duration};
pub use args::{
    DefaultEvictorArgs, PodProtection, PodProtections, PodProtectionsConfig, PodsWithPvcConfig,
    PriorityThreshold, ProtectedStorageClass, Protections,
};
pub use config::EvictorConfig;
pub use host::{Evictor, ObjectJsonFn};
pub use index::{ClusterIndex, PodPdbs, PodTraits, WellKnownIds};
pub use node_fit::{NodeFitError, node_fit_error};
pub use state::{
    AcceptedProposal, Limits, LogEntry, MAX_RECORDED_REFUSALS, RefusalCounts, RefusedProposal,
    RunState,
};

/// `SystemCriticalPriority`: pods at or above it are system critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// Present (with any value): every Filter check is bypassed.
pub const EVICT_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/evict";
/// With `noEvictionPolicy: Mandatory`, pods carrying it are not evictable.
pub const PREFER_NO_EVICTION_ANNOTATION: &str =
    "descheduler.alpha.kubernetes.io/prefer-no-eviction";
/// Mirror pods (the API copy of a static pod) carry it.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Where the kubelet got the pod from; anything but `api` is a static pod.
pub const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
