//! # Policy engine
//!
//! Runs descheduling policies compiled to WebAssembly over a cluster snapshot: the wasmtime
//! host and its sandbox, profiles (DeschedulerPolicy documents), and the run cycle.
//!
//! # Layout
//! In pipeline order:
//! - [`wasm`]: the one wasmtime engine, module validation and compilation, the sandbox (memory,
//!   stack, deadline, proposal and log caps, and [`caps`] on everything a guest hands over), the
//!   registry of compiled policies, and the host side of the `rebalancer:policy` ABI (snapshot
//!   sections mapped into guests, the evictor).
//! - [`profile`]: a DeschedulerPolicy document → the [`profile::ProfileSpec`] a run evaluates,
//!   checked against the registered policies; the built-in `default` profile.
//! - [`run`]: one profile over one snapshot as one descheduler cycle → a [`run::RunReport`].
//! - [`stopwatch`]: wall and thread CPU time of an evaluation.
//!
//! Depends on the cluster model (`rebalancer-cluster`) and the SDK only. Must not touch SQL,
//! HTTP or the built-in modules' bytes: callers persist reports, serve them, and hand the engine
//! the modules to compile (the server embeds them through `rebalancer-builtins`).
//!
//! Tests: unit tests beside the code (`wasm/tests.rs`, `profile/tests.rs`); `tests/conformance.rs`
//! runs every recorded descheduler scenario of `tests/conformance/`; `tests/options.rs` covers
//! Rebalancer's opt-in fixes of descheduler's flaws; `tests/guest_caps.rs` has hostile guests hand
//! the host oversized strings and lists, checking each cap and the process's memory meanwhile.

pub mod profile;
pub mod run;
pub mod stopwatch;
pub mod wasm;

pub use wasm::*;
