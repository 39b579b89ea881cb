//! # RemovePodsViolatingNodeTaints
//!
//! descheduler v0.36's `RemovePodsViolatingNodeTaints` Deschedule plugin as a Rebalancer policy:
//! propose evicting pods that do not tolerate a `NoSchedule` taint added to their node after
//! they were scheduled (optionally `PreferNoSchedule` ones too, and only or except given taints).
//!
//! # Layout
//! - [`args`]: `RemovePodsViolatingNodeTaintsArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass — considered taints per node, candidates, proposals.
//! - `descheduler-common` (shared with the other descheduler plugins): the `namespaces`/
//!   `labelSelector` args and their matcher (`scope`), refusal handling (`tally`) and formatting.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Toleration semantics come from the SDK (`k8s::taints`), the same code the host's nodeFit uses.
//! Difference from descheduler: pods on a node are visited in snapshot order, not informer order.

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::RemovePodsViolatingNodeTaintsArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "RemovePodsViolatingNodeTaints";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The RemovePodsViolatingNodeTaints policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemovePodsViolatingNodeTaints;

impl Policy for RemovePodsViolatingNodeTaints {
    type Args = RemovePodsViolatingNodeTaintsArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts pods that do not tolerate a NoSchedule taint of their node \
                          (PreferNoSchedule too on request; taints can be excluded or \
                          included by key or key=value) (descheduler v0.36 \
                          RemovePodsViolatingNodeTaints)."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: args::schema(),
            default_args: serde_json::to_value(RemovePodsViolatingNodeTaintsArgs::default())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &Self::Args) -> Vec<ArgError> {
        args::validate(args)
    }

    fn deschedule(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        let tally = plan::deschedule(ctx, args)?;
        ctx.log(LogLevel::Info, &format!("{NAME}: {}", tally.summary()));
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(RemovePodsViolatingNodeTaints);

#[cfg(test)]
mod tests;
