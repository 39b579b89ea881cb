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
//! - [`scope`]: the `namespaces`/`labelSelector` args, refusal handling and formatting shared
//!   with the other deschedule plugins of this family (compiled from `pod-life-time`).
//!
//! Differences from descheduler: an unknown `nodeAffinityType` is a validation error (descheduler
//! logs it at run time and ignores it); pods on a node are visited in snapshot order.

pub mod args;
pub mod plan;
#[path = "../../pod-life-time/src/scope.rs"]
pub mod scope;

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
    /// `cargo test -p remove-pods-violating-node-affinity --release -- --ignored --nocapture`.
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
        let args: RemovePodsViolatingNodeAffinityArgs = serde_json::from_str(r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution","preferredDuringSchedulingIgnoredDuringExecution"]}"#).expect("args");
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
            "RemovePodsViolatingNodeAffinity on the reference cluster: {best:?}, {}",
            last.summary()
        );
        if !cfg!(debug_assertions) {
            assert!(best.as_millis() < 100, "took {best:?}");
        }
    }
}

#[cfg(test)]
mod tests;
