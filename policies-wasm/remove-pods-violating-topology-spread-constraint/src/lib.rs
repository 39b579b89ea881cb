//! # RemovePodsViolatingTopologySpreadConstraint
//!
//! descheduler v0.36's `RemovePodsViolatingTopologySpreadConstraint` Balance plugin as a
//! Rebalancer policy: for every distinct topology spread constraint of the pods of a namespace,
//! count the matching pods per topology domain and, when the domains are more than `maxSkew`
//! apart, propose evicting the fewest pods from the large domains that bring every domain within
//! reach of the average (descheduler's two-pointer balancing), preferring pods that can go to a
//! below-average domain and skipping those that fit none (`topologyBalanceNodeFit`).
//!
//! # Layout
//! - [`args`]: `RemovePodsViolatingTopologySpreadConstraintArgs` (serde shape, defaults,
//!   validation, JSON Schema).
//! - [`plan`]: the Balance pass — counted pods, constraints, domains, balancing, proposals.
//! - `descheduler-common`: the `namespaces`/`labelSelector` args and their matcher (`scope`),
//!   shared with the other plugins.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Not supported, as in descheduler: `minDomains` (#855). Pod order inside a domain follows the
//! reference's description — pods pinned by nodeSelector/node affinity and pods of higher priority
//! stay, the others go first — and ties, domains of equal size and eviction order are
//! deterministic here where descheduler depends on Go map order and unstable sorts.

pub mod args;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::RemovePodsViolatingTopologySpreadConstraintArgs;

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "RemovePodsViolatingTopologySpreadConstraint";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The RemovePodsViolatingTopologySpreadConstraint policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemovePodsViolatingTopologySpreadConstraint;

impl Policy for RemovePodsViolatingTopologySpreadConstraint {
    type Args = RemovePodsViolatingTopologySpreadConstraintArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts the fewest pods that bring the topology domains of each pod \
                          topology spread constraint back within maxSkew of each other, counting \
                          empty domains of eligible nodes and honoring matchLabelKeys and the \
                          node inclusion policies (descheduler v0.36 \
                          RemovePodsViolatingTopologySpreadConstraint)."
                .into(),
            extension_points: vec![ExtensionPoint::Balance],
            args_schema: args::schema(),
            default_args: serde_json::to_value(
                RemovePodsViolatingTopologySpreadConstraintArgs::default(),
            )
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
                "{NAME}: {} nodes, {} pods counted, {} constraints, {} skewed, {} pods chosen \
                 ({} fit no below-average node), {} proposals, {} refused{stopped}",
                outcome.nodes,
                outcome.counted,
                outcome.constraints,
                outcome.imbalanced,
                outcome.chosen,
                outcome.not_fitting,
                outcome.proposed,
                outcome.refused
            ),
        );
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(RemovePodsViolatingTopologySpreadConstraint);

#[cfg(test)]
mod tests;
