//! The simulated clusters: deterministic Kubernetes clusters for demos and benchmarks.
//!
//! - [`reference`]: the benchmark's reference clusters, an exact port of gen_large.py (the
//!   Python generator outside the repository), byte for byte.
//!
//! This crate only produces cluster JSON; it knows nothing about the server's store, engine,
//! policies or HTTP, and must not grow dependencies on them.

pub mod reference;
