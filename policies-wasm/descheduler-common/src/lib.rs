//! # descheduler-common
//!
//! What the descheduler-plugin policies under `policies-wasm/` share, written once instead of
//! copied into each crate. Plain library (`rlib`) for the host and for `wasm32-wasip2`; no I/O,
//! no plugin's own criteria. Anything a policy that is not a descheduler plugin would want
//! belongs in the SDK instead (`rebalancer-policy-sdk`).
//!
//! # Layout
//! - [`scope`]: the `namespaces`/`labelSelector` plugin args (validation, schema) and
//!   [`scope::PodScope`], their resolved matcher.
//! - [`tally`]: [`tally::propose`], one proposal with descheduler's reaction to a refusal, counted
//!   in a [`tally::Tally`].
//! - [`order`]: descheduler's eviction order ([`order::eviction_order`]).
//! - [`utilization`]: requests-based node usage of the node-utilization plugins.
//! - [`destinations`]: the destination nodes' taints of the node-utilization plugins.
//! - [`args`]: small serde helpers of the plugins' args.
//! - [`signature`]: integer encodings of selectors for cache keys.
//! - [`format`]: text helpers for reasons and logs.

pub mod args;
pub mod destinations;
pub mod format;
pub mod order;
pub mod scope;
pub mod signature;
pub mod tally;
pub mod utilization;
