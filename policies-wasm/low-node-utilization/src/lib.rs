//! # LowNodeUtilization
//!
//! descheduler v0.36's `LowNodeUtilization` Balance plugin as a Rebalancer policy: when some nodes
//! are underutilized and others above their target utilization (by pod *requests*, as a share of
//! allocatable), propose evicting pods from the overutilized nodes while the underutilized ones
//! have room for them.
//!
//! # Layout
//! - [`args`]: `LowNodeUtilizationArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Balance pass — usage, thresholds, classification, headroom pool, eviction order,
//!   proposals and stop conditions.
//! - `descheduler-common` (shared with HighNodeUtilization and the other plugins): usage,
//!   capacity and percentages (`utilization`), destination taints (`destinations`), the eviction
//!   order (`order`), the `evictableNamespaces` arg and formatting.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Known differences from descheduler, all forced by the backend:
//! - `metricsUtilization` (metrics-server or Prometheus) is parsed and validated like descheduler
//!   does, then rejected: this backend has no live metrics, and silently balancing on requests
//!   instead would be lying.
//! - A pod's usage is its effective requests as recorded in the snapshot
//!   (`resourcehelper.PodRequests`) both for node usage and for what an eviction frees;
//!   descheduler computes the latter with `GetResourceRequestQuantity`, which can differ for pods
//!   with sidecar init containers or pod overhead on an otherwise unrequested resource.
//! - Nodes and equal-usage ties are visited in scope order instead of Go map order.
//!
//! Rebalancer extensions, off by default (see `docs/policies.md`): `targetResourceFit` moves a
//! pod only when a single underutilized node has room for it below its target (descheduler #1237:
//! descheduler only checks the pooled room), and `perTaintTolerations` matches each repelling
//! taint of a destination instead of descheduler's count check.

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::LowNodeUtilizationArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "LowNodeUtilization";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The LowNodeUtilization policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct LowNodeUtilization;

impl Policy for LowNodeUtilization {
    type Args = LowNodeUtilizationArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Moves pods off nodes above their target utilization while underutilized \
                          nodes have room, by the sum of pod requests as a share of allocatable \
                          (descheduler v0.36 LowNodeUtilization). thresholds and targetThresholds \
                          are required."
                .into(),
            extension_points: vec![ExtensionPoint::Balance],
            args_schema: args::schema(),
            default_args: serde_json::to_value(LowNodeUtilizationArgs::default())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &Self::Args) -> Vec<ArgError> {
        args::validate(args)
    }

    fn balance(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        let outcome = plan::balance(ctx, args)?;
        let stopped = outcome
            .stopped
            .as_deref()
            .map(|why| format!("; {why}"))
            .unwrap_or_default();
        ctx.log(
            LogLevel::Info,
            &format!(
                "{NAME}: {} nodes, {} underutilized, {} overutilized, {} proposals, {} refused, \
                 {} kept for lack of room on a single destination{stopped}",
                outcome.nodes,
                outcome.underutilized,
                outcome.overutilized,
                outcome.proposed,
                outcome.refused,
                outcome.no_room
            ),
        );
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(LowNodeUtilization);

#[cfg(test)]
mod tests;
