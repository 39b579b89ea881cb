//! # Simulated clusters
//!
//! Generators of whole clusters as Kubernetes `List` documents, for people and for measurement.
//!
//! # Layout
//! - [`demo`]: the demo cluster a new server loads (20 nodes, 320 pods, visibly unbalanced), and
//!   [`demo::SimulatedCluster`], the same shape at any size (`rebalancer-bench --nodes/--pods`).
//!
//! Must not: depend on the server, the store or the engine: a generator writes JSON, and
//! whoever loads it ingests it like any other snapshot.

pub mod demo;
