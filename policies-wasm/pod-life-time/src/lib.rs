//! # PodLifeTime
//!
//! descheduler v0.36's `PodLifeTime` Deschedule plugin as a Rebalancer policy: propose evicting
//! pods that are too old, stuck in a state, in a condition for too long, or whose containers
//! exited with given codes — oldest first, over all nodes in scope.
//!
//! # Layout
//! - [`args`]: `PodLifeTimeArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass — criteria, candidates, age order, proposals.
//! - `descheduler-common` (shared with the other descheduler plugins): the `namespaces`/
//!   `labelSelector` args and their matcher (`scope`), refusal handling (`tally`) and formatting.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Differences from descheduler: ages are measured against the snapshot time, not the wall clock
//! at the moment each pod is looked at; pods of equal age keep node-scope and snapshot order
//! (descheduler's sort is unstable). Only pods bound to a node in scope are seen, as in
//! descheduler (#858/#1183).

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::PodLifeTimeArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "PodLifeTime";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The PodLifeTime policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodLifeTime;

impl Policy for PodLifeTime {
    type Args = PodLifeTimeArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts pods older than maxPodLifeTimeSeconds, or in given states, \
                          conditions or container exit codes, oldest first (descheduler v0.36 \
                          PodLifeTime). At least one of maxPodLifeTimeSeconds, states, \
                          conditions or exitCodes is required."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: args::schema(),
            default_args: serde_json::to_value(PodLifeTimeArgs::default())
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

rebalancer_policy_sdk::export_policy!(PodLifeTime);

#[cfg(test)]
mod tests;
