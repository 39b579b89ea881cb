//! # CpuOrchestration
//!
//! Checks the invariants of Koordinator's fine-grained CPU orchestration (the hard ones,
//! H1–H13, that koord-scheduler and its webhook would never produce, and the soft ones, S1–S5,
//! that are legal but improvable placements) on every node, from the pods'
//! `scheduling.koordinator.sh/resource-spec`, `resource-status` and `numa-topology-spec`
//! annotations, their QoS and priority classes, the node's bind/NUMA labels and its
//! NodeResourceTopology (the snapshot's CPU topology row), and proposes moving the pods that
//! violate them: one proposal per pod, naming its most important violation and its evidence
//! (`H8: CPUs 4-5 also pinned by team-a/db-0`). In a conflict between two pods the newer one is
//! proposed. Soft violations are proposed only with `includeSoft`.
//!
//! # Layout
//! - [`args`]: `CpuOrchestrationArgs` (serde shape, validation, JSON Schema).
//! - [`invariant`]: the invariant ids and sets.
//! - [`annotations`]: Koordinator's annotations and labels, parsed.
//! - [`plan`]: the Deschedule pass — which pods to look at, per-node checks, proposals,
//!   the summary line.
//! - [`node`]: one node's records and the invariants themselves.
//! - [`topology`]: one node's CPU topology indexed for the checks (bitsets, dense ids).
//!
//! The invariants, their evidence and the reason formats are documented in
//! `docs/policies.md` (CpuOrchestration).

pub mod annotations;
pub mod args;
pub mod invariant;
pub mod node;
pub mod plan;
pub mod topology;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::CpuOrchestrationArgs;

/// The plugin name.
pub const NAME: &str = "CpuOrchestration";
/// Our own version of the policy.
pub const VERSION: &str = "0.1.0";

/// The CpuOrchestration policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuOrchestration;

impl Policy for CpuOrchestration {
    type Args = CpuOrchestrationArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Checks Koordinator's fine-grained CPU orchestration invariants (cpuset \
                          sizes, whole cores, bind and NUMA policies, overlaps, reserved CPUs) \
                          and proposes moving the pods that violate them; improvable \
                          placements too with includeSoft."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: args::schema(),
            default_args: serde_json::to_value(CpuOrchestrationArgs::default())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &Self::Args) -> Vec<ArgError> {
        args::validate(args)
    }

    fn deschedule(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        let summary = plan::deschedule(ctx, args)?;
        ctx.log(LogLevel::Info, &format!("{NAME}: {}", summary.line()));
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(CpuOrchestration);

#[cfg(test)]
mod tests;
