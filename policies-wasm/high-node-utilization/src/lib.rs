//! # HighNodeUtilization
//!
//! descheduler v0.36's `HighNodeUtilization` Balance plugin as a Rebalancer policy: drain the
//! underutilized nodes (by pod *requests*, as a share of allocatable) so that the scheduler —
//! configured with `MostAllocated` scoring — packs their pods onto the busier nodes and the
//! cluster autoscaler can remove the empty ones.
//!
//! # Layout
//! - [`args`]: `HighNodeUtilizationArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Balance pass — usage, classification, destination pool, eviction order,
//!   proposals and stop conditions.
//! - `descheduler-common` (shared with LowNodeUtilization and the other plugins): usage,
//!   capacity and percentages (`utilization`), destination taints (`destinations`), the eviction
//!   order (`order`), the `evictableNamespaces` arg and formatting.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Known differences from descheduler:
//! - A pod's usage is its effective requests as recorded in the snapshot
//!   (`resourcehelper.PodRequests`) both for node usage and for what an eviction frees;
//!   descheduler computes the latter with `GetResourceRequestQuantity`, which can differ for pods
//!   with sidecar init containers or pod overhead on an otherwise unrequested resource.
//! - `evictionModes: [OnlyThresholdingResources]` looks at the keys of the pod's effective
//!   requests; descheduler looks at the keys of its containers' requests. They differ only when
//!   pod overhead or pod-level resources alone mention a threshold resource.
//! - Nodes and equal-usage ties are visited in scope order instead of Go map order.
//!
//! Rebalancer extension, off by default (see `docs/policies.md`): `perTaintTolerations` matches
//! each repelling taint of a destination instead of descheduler's count check.

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::HighNodeUtilizationArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "HighNodeUtilization";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The HighNodeUtilization policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct HighNodeUtilization;

impl Policy for HighNodeUtilization {
    type Args = HighNodeUtilizationArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Drains underutilized nodes (cordoned ones included) onto the busier \
                          schedulable nodes while they have room, by the sum of pod requests as \
                          a share of allocatable, for bin-packing and scale-down (descheduler \
                          v0.36 HighNodeUtilization). thresholds is required."
                .into(),
            extension_points: vec![ExtensionPoint::Balance],
            args_schema: args::schema(),
            default_args: serde_json::to_value(HighNodeUtilizationArgs::default())
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
                "{NAME}: {} nodes, {} underutilized, {} destinations, {} proposals, {} refused{stopped}",
                outcome.nodes,
                outcome.underutilized,
                outcome.destinations,
                outcome.proposed,
                outcome.refused
            ),
        );
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(HighNodeUtilization);

#[cfg(test)]
mod tests;
