//! # RemovePodsHavingTooManyRestarts
//!
//! descheduler v0.36's `RemovePodsHavingTooManyRestarts` Deschedule plugin as a Rebalancer
//! policy: propose evicting pods whose containers keep restarting (a bad volume mount, a node
//! whose settings the app does not like, …), most restarts first on each node, so they start
//! afresh elsewhere.
//!
//! # Layout
//! - [`args`]: `RemovePodsHavingTooManyRestartsArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass — restart counts, states, candidates per node, order,
//!   proposals.
//! - `descheduler-common` (shared with the other descheduler plugins): the `namespaces`/
//!   `labelSelector` args and their matcher (`scope`), refusal handling (`tally`) and formatting.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Difference from descheduler: pods with as many restarts as each other keep snapshot order
//! (descheduler's sort is unstable there).

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::RemovePodsHavingTooManyRestartsArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "RemovePodsHavingTooManyRestarts";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The RemovePodsHavingTooManyRestarts policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemovePodsHavingTooManyRestarts;

impl Policy for RemovePodsHavingTooManyRestarts {
    type Args = RemovePodsHavingTooManyRestartsArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts pods whose containers restarted at least podRestartThreshold \
                          times, most restarts first on each node (descheduler v0.36 \
                          RemovePodsHavingTooManyRestarts). podRestartThreshold is required."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: args::schema(),
            default_args: serde_json::to_value(RemovePodsHavingTooManyRestartsArgs::default())
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

rebalancer_policy_sdk::export_policy!(RemovePodsHavingTooManyRestarts);

#[cfg(test)]
mod tests;
