//! # RemovePodsViolatingNodeAffinity
//!
//! descheduler v0.36's `RemovePodsViolatingNodeAffinity` Deschedule plugin as a Rebalancer
//! policy: propose evicting pods whose node no longer satisfies their required node affinity
//! (its labels changed after scheduling) when they fit another node, and — on request — pods for
//! which another node scores higher on their preferred node affinity.
//!
//! # Layout
//! - [`args`]: `RemovePodsViolatingNodeAffinityArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass per affinity type — candidates, fit, proposals.
//! - `descheduler-common` (shared with the other descheduler plugins): the `namespaces`/
//!   `labelSelector` args and their matcher (`scope`), refusal handling (`tally`) and formatting.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Differences from descheduler: an unknown `nodeAffinityType` is a validation error (descheduler
//! logs it at run time and ignores it); pods on a node are visited in snapshot order.

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::RemovePodsViolatingNodeAffinityArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "RemovePodsViolatingNodeAffinity";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The RemovePodsViolatingNodeAffinity policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemovePodsViolatingNodeAffinity;

impl Policy for RemovePodsViolatingNodeAffinity {
    type Args = RemovePodsViolatingNodeAffinityArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts pods whose node no longer matches their required node affinity \
                          and that fit another node, and/or pods that some node suits better \
                          by their preferred node affinity (descheduler v0.36 \
                          RemovePodsViolatingNodeAffinity). nodeAffinityType is required."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: args::schema(),
            default_args: serde_json::to_value(RemovePodsViolatingNodeAffinityArgs::default())
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

rebalancer_policy_sdk::export_policy!(RemovePodsViolatingNodeAffinity);

#[cfg(test)]
mod tests;
