//! # PodLifeTime
//!
//! descheduler v0.36's `PodLifeTime` Deschedule plugin as a Rebalancer policy: propose evicting
//! pods that are too old, stuck in a state, in a condition for too long, or whose containers
//! exited with given codes — oldest first, over all nodes in scope.
//!
//! # Layout
//! - [`args`]: `PodLifeTimeArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Deschedule pass — criteria, candidates, age order, proposals.
//! - [`scope`]: the `namespaces`/`labelSelector` args, refusal handling and formatting shared
//!   with the other deschedule plugins of this family.
//!
//! Differences from descheduler: ages are measured against the snapshot time, not the wall clock
//! at the moment each pod is looked at; pods of equal age keep node-scope and snapshot order
//! (descheduler's sort is unstable). Only pods bound to a node in scope are seen, as in
//! descheduler (#858/#1183).

pub mod args;
pub mod plan;
pub mod scope;

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
    /// `cargo test -p pod-life-time --release -- --ignored --nocapture`.
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
        let args: PodLifeTimeArgs =
            serde_json::from_str(r#"{"maxPodLifeTimeSeconds":86400}"#).expect("args");
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
            "PodLifeTime on the reference cluster: {best:?}, {}",
            last.summary()
        );
        if !cfg!(debug_assertions) {
            assert!(best.as_millis() < 100, "took {best:?}");
        }
    }
}

#[cfg(test)]
mod tests;
