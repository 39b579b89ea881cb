//! # Simulated clusters
//!
//! Deterministic Kubernetes clusters as `List` documents, for people and for measurement.
//!
//! # Layout
//! - [`demo`]: the demo cluster a new server loads (20 nodes, 320 pods, visibly unbalanced), and
//!   [`demo::SimulatedCluster`], the same shape at any size (`rebalancer-bench run --nodes/--pods`).
//! - [`koordlet`]: the NodeMetrics, NodeResourceTopologies and cpusets Koordinator adds, for the
//!   demo and for the simulated backend, which plays koordlet after each change.
//! - [`reference`]: the benchmark's reference clusters (`small`, `medium`, `large`), an exact,
//!   byte-for-byte port of the Python generator `gen_large.py` the descheduler comparison was
//!   measured with (`rebalancer-bench generate`).
//!
//! Must not: depend on the server, the store, the engine or the policies: a generator writes
//! JSON, and whoever loads it ingests it like any other snapshot.

pub mod demo;
pub mod koordlet;
pub mod reference;
