//! # LowNodeLoad
//!
//! Koordinator's `LowNodeLoad` Balance plugin (koord-descheduler v1.8, source read at a7a1b76;
//! `LowNodeLoadArgs` of descheduler/v1alpha2) as a Rebalancer policy: when nodes are above their high thresholds of
//! **measured** usage (NodeMetric, else metrics.k8s.io) for long enough and other nodes are under
//! their low thresholds, propose evicting pods from the busiest nodes while the low nodes have
//! room, first by node usage and then by the usage of koord-prod pods.
//!
//! # Layout
//! - [`args`]: `LowNodeLoadArgs` (serde shape, Koordinator's defaulting and pool conversion,
//!   validation, JSON Schema).
//! - [`plan`]: the Balance pass — usage, thresholds, classification, gates, budgets, source and
//!   pod order, nodeFit with the usage check, proposals.
//! - [`detector`]: the per-node anomaly detectors, kept in the policy state between runs.
//!
//! Matches Koordinator by default, including its flaws; each flaw has an off-by-default fix
//! (`countMetricUpdates`, `reserveOnlyEvicted`, `defaultEachAnomalyField`,
//! `keepHighWithoutLow`; see `docs/policies.md`). Known differences, all deliberate:
//! - Ties Koordinator leaves to Go map order or an unstable sort are broken by node name and by
//!   pod uid, namespace and name; nodeFit checks candidates in uid order.
//! - The detectors live in the policy state (committed only when a run succeeds) instead of
//!   memory, so they survive restarts; times are the snapshot's.
//! - With `useDeviationThresholds` the reason prints the effective threshold (mean + deviation)
//!   rather than the configured deviation.
//! - A refusal of the run's total limit ends the run, and the per-node limit ends the node
//!   (Koordinator keeps asking and failing).

pub mod args;
pub mod detector;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::LowNodeLoadArgs;

/// The plugin name, as in a koord-descheduler profile.
pub const NAME: &str = "LowNodeLoad";
/// Koordinator release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "koordinator-1.8-rb.1";

/// The LowNodeLoad policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct LowNodeLoad;

impl Policy for LowNodeLoad {
    type Args = LowNodeLoadArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Moves pods off nodes whose measured usage (Koordinator NodeMetric, else \
                          metrics.k8s.io) has been above the high thresholds for several rounds \
                          while other nodes are under the low thresholds, by node usage and then \
                          by koord-prod usage (Koordinator LowNodeLoad)."
                .into(),
            extension_points: vec![ExtensionPoint::Balance],
            args_schema: args::schema(),
            default_args: serde_json::to_value(LowNodeLoadArgs::with_defaults())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &Self::Args) -> Vec<ArgError> {
        args::validate(args)
    }

    fn balance(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        if args.paused {
            ctx.info(&format!("{NAME} is paused and will do nothing"));
            return Ok(());
        }
        let o = plan::balance(ctx, args)?;
        let stopped = if o.stopped.is_empty() {
            String::new()
        } else {
            format!("; {}", o.stopped.join("; "))
        };
        let dry_run = if args.dry_run {
            format!(", {} dry-run evictions", o.dry_run)
        } else {
            String::new()
        };
        ctx.log(
            LogLevel::Info,
            &format!(
                "{NAME}: {} nodes ({} without a fresh metric), {} pools: {} low, {} high, \
                 {} prod-low, {} prod-high, {} both-low, {} anomalous; {} proposals, {} \
                 refused{dry_run}{stopped}",
                o.nodes,
                o.unmeasured,
                o.pools,
                o.low,
                o.high,
                o.prod_low,
                o.prod_high,
                o.both_low,
                o.anomalous,
                o.proposed,
                o.refused
            ),
        );
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(LowNodeLoad);

#[cfg(test)]
mod tests;
