//! # RemoveFailedPods
//!
//! descheduler v0.36's `RemoveFailedPods` Deschedule plugin as a Rebalancer policy: propose
//! evicting pods in phase `Failed` that are old enough, optionally only those with given
//! reasons or exit codes, so their controllers can replace them.
//!
//! # Layout
//! - [`args`]: `RemoveFailedPodsArgs` (serde shape, defaults, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass — criteria, candidates per node, proposals.
//! - `descheduler-common` (shared with the other descheduler plugins): the `namespaces`/
//!   `labelSelector` args and their matcher (`scope`), refusal handling (`tally`) and formatting.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Differences from descheduler: ages are measured against the snapshot time; a pod whose
//! creation time is after it is young (descheduler v0.36 on amd64 turns the negative age into a
//! huge one and evicts it). DefaultEvictor's `FailedBarePods` protection keeps failed pods
//! without an owner unless it is disabled, as in descheduler.

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::RemoveFailedPodsArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "RemoveFailedPods";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The RemoveFailedPods policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoveFailedPods;

impl Policy for RemoveFailedPods {
    type Args = RemoveFailedPodsArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts pods in phase Failed that are at least minPodLifetimeSeconds \
                          old (default 3600), optionally only with given reasons or exit codes \
                          (descheduler v0.36 RemoveFailedPods)."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: args::schema(),
            default_args: serde_json::to_value(RemoveFailedPodsArgs::default())
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

rebalancer_policy_sdk::export_policy!(RemoveFailedPods);

#[cfg(test)]
mod tests;
