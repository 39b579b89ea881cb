//! # RemoveFailedPods
//!
//! descheduler v0.36's `RemoveFailedPods` Deschedule plugin as a Rebalancer policy: propose
//! evicting pods in phase `Failed` that are old enough, optionally only those with given
//! reasons or exit codes, so their controllers can replace them.
//!
//! # Layout
//! - [`args`]: `RemoveFailedPodsArgs` (serde shape, defaults, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass — criteria, candidates per node, proposals.
//! - [`scope`]: the `namespaces`/`labelSelector` args, refusal handling and formatting shared
//!   with the other deschedule plugins of this family (compiled from `pod-life-time`).
//!
//! Differences from descheduler: ages are measured against the snapshot time; a pod whose
//! creation time is after it is young (descheduler v0.36 on amd64 turns the negative age into a
//! huge one and evicts it). DefaultEvictor's `FailedBarePods` protection keeps failed pods
//! without an owner unless it is disabled, as in descheduler.

pub mod args;
pub mod plan;
#[path = "../../pod-life-time/src/scope.rs"]
pub mod scope;

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
    /// `cargo test -p remove-failed-pods --release -- --ignored --nocapture`.
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
        let args: RemoveFailedPodsArgs = serde_json::from_str(r#"{}"#).expect("args");
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
            "RemoveFailedPods on the reference cluster: {best:?}, {}",
            last.summary()
        );
        if !cfg!(debug_assertions) {
            assert!(best.as_millis() < 100, "took {best:?}");
        }
    }
}

#[cfg(test)]
mod tests;
