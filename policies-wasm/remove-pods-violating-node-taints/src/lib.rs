//! # RemovePodsViolatingNodeTaints
//!
//! descheduler v0.36's `RemovePodsViolatingNodeTaints` Deschedule plugin as a Rebalancer policy:
//! propose evicting pods that do not tolerate a `NoSchedule` taint added to their node after
//! they were scheduled (optionally `PreferNoSchedule` ones too, and only or except given taints).
//!
//! # Layout
//! - [`args`]: `RemovePodsViolatingNodeTaintsArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass — considered taints per node, candidates, proposals.
//! - [`scope`]: the `namespaces`/`labelSelector` args, refusal handling and formatting shared
//!   with the other deschedule plugins of this family (compiled from `pod-life-time`).
//!
//! Toleration semantics come from the SDK (`k8s::taints`), the same code the host's nodeFit uses.
//! Difference from descheduler: pods on a node are visited in snapshot order, not informer order.

pub mod args;
pub mod plan;
#[path = "../../pod-life-time/src/scope.rs"]
pub mod scope;

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
#[path = "../../perf/reference_cluster.rs"]
mod reference_cluster;

#[cfg(test)]
mod perf {
    use std::time::{Duration, Instant};

    use rebalancer_policy_sdk::{Cluster, Context};

    use super::reference_cluster::{self, PassThroughHost};
    use super::*;

    /// The reference cluster (150k pods / 5k nodes) in well under 100 ms natively. Timing only
    /// means something in release builds:
    /// `cargo test -p remove-pods-violating-node-taints --release -- --ignored --nocapture`.
    #[test]
    #[ignore = "performance check; run in release with --ignored"]
    fn reference_cluster_is_fast() {
        let bytes = reference_cluster::archive();
        let cluster = Cluster::from_bytes(&bytes).expect("archive");
        let ready_nodes: Vec<u32> = cluster
            .nodes()
            .filter(|n| n.is_ready())
            .map(|n| n.id)
            .collect();
        let args: RemovePodsViolatingNodeTaintsArgs =
            serde_json::from_str(r#"{"includePreferNoSchedule":true}"#).expect("args");
        let mut best = Duration::MAX;
        let mut last = scope::Tally::default();
        for _ in 0..5 {
            let mut host = PassThroughHost {
                ready_nodes: ready_nodes.clone(),
                ..PassThroughHost::default()
            };
            let mut ctx = Context::new(cluster, &mut host);
            let start = Instant::now();
            last = plan::deschedule(&mut ctx, &args).expect("runs");
            best = best.min(start.elapsed());
            assert_eq!(last.proposed, host.proposals);
        }
        eprintln!(
            "RemovePodsViolatingNodeTaints on the reference cluster: {best:?}, {}",
            last.summary()
        );
        if !cfg!(debug_assertions) {
            assert!(best.as_millis() < 100, "took {best:?}");
        }
    }
}

#[cfg(test)]
mod tests;
