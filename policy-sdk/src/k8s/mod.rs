//! Kubernetes semantics written once, for the host and for wasm guests.
//!
//! Owns: quantities, pod requests and QoS ([`quantity`], [`resources`]), label selectors
//! ([`selector`]), taints and tolerations ([`taints`]), node selectors and affinity
//! ([`affinity`]). Plain Rust over the snapshot views; no I/O.

pub mod affinity;
pub mod quantity;
pub mod resources;
pub mod selector;
pub mod taints;
