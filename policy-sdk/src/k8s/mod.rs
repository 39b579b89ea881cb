//! Kubernetes semantics written once, for the host and for wasm guests.
//!
//! Owns: quantities, pod requests and QoS ([`quantity`], [`resources`]), label selectors
//! ([`selector`]), taints and tolerations ([`taints`]), node selectors and affinity
//! ([`affinity`]), Go's duration text form ([`duration`]), Linux CPU lists ([`cpuset`]),
//! Koordinator's QoS and priority classes ([`koordinator`]). Plain
//! Rust over the snapshot views; no I/O.

pub mod affinity;
pub mod cpuset;
pub mod duration;
pub mod koordinator;
pub mod quantity;
pub mod resources;
pub mod selector;
pub mod taints;
