//! # RemovePodsViolatingInterPodAntiAffinity
//!
//! descheduler v0.36's `RemovePodsViolatingInterPodAntiAffinity` Deschedule plugin as a
//! Rebalancer policy: propose evicting pods whose required pod anti-affinity is violated by
//! another pod in the same topology domain (same node, or same `topologyKey` value), lowest
//! priority first, one pod of each conflicting pair.
//!
//! # Layout
//! - [`args`]: `RemovePodsViolatingInterPodAntiAffinityArgs` (serde shape, validation, JSON
//!   Schema), including the opt-in `includePreferredAntiAffinity`.
//! - [`plan`]: the Deschedule pass — working set, violation check, order, proposals.
//! - `descheduler-common`: the `namespaces`/`labelSelector` args and their matcher (`scope`) and
//!   descheduler's eviction order (`order`), shared with the other plugins.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! As in descheduler, `namespaces` and `labelSelector` restrict the pods that can *cause* a
//! violation as well as the candidates, and there is no built-in check that an evicted pod fits
//! elsewhere (only DefaultEvictor's nodeFit, when enabled).
//!
//! Deliberate differences from descheduler: pods with equal priority, QoS and prefer-no-eviction
//! keep snapshot order on a node (descheduler's sort is unstable), and
//! `includePreferredAntiAffinity` is a Rebalancer extension (off by default).

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::RemovePodsViolatingInterPodAntiAffinityArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "RemovePodsViolatingInterPodAntiAffinity";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The RemovePodsViolatingInterPodAntiAffinity policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemovePodsViolatingInterPodAntiAffinity;

impl Policy for RemovePodsViolatingInterPodAntiAffinity {
    type Args = RemovePodsViolatingInterPodAntiAffinityArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts pods whose required pod anti-affinity selects another pod in \
                          the same topology domain, lowest priority first, one pod per conflict \
                          (descheduler v0.36 RemovePodsViolatingInterPodAntiAffinity). Optionally \
                          acts on preferred anti-affinity too (includePreferredAntiAffinity)."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: args::schema(),
            default_args: serde_json::to_value(
                RemovePodsViolatingInterPodAntiAffinityArgs::default(),
            )
            .expect("default args serialize"),
        }
    }

    fn validate(args: &Self::Args) -> Vec<ArgError> {
        args::validate(args)
    }

    fn deschedule(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        let outcome = plan::deschedule(ctx, args)?;
        let stopped = outcome
            .stopped
            .as_deref()
            .map(|why| format!("; {why}"))
            .unwrap_or_default();
        ctx.log(
            LogLevel::Info,
            &format!(
                "{NAME}: {} nodes, {} pods with anti-affinity, {} violators, {} proposals, {} \
                 refused{stopped}",
                outcome.nodes,
                outcome.with_terms,
                outcome.violators,
                outcome.proposed,
                outcome.refused
            ),
        );
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(RemovePodsViolatingInterPodAntiAffinity);

#[cfg(test)]
mod tests;
