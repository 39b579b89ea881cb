//! The built-in policies linked natively, for the benchmark's wasm-vs-native comparison.
//!
//! Owns: the table plugin name → natively compiled policy, and [`execute`], one descheduler cycle
//! ([`rebalancer_engine::run::cycle`]) with those policies instead of the wasm modules. This
//! crate is the only place that links policy crates natively: the server runs policies as wasm
//! only.
//! Must not: be used to serve runs (no sandbox: no memory cap, no deadline).

use std::sync::Arc;

use rebalancer_cluster::ClusterSnapshot;
use rebalancer_engine::run::{self, RunError, RunReport};
use rebalancer_engine::stopwatch::Stopwatch;
use rebalancer_engine::{Evaluation, PolicyFailure, PolicyLog};
use rebalancer_policy_sdk::evictor::Evictor;
use rebalancer_policy_sdk::{Context, ExtensionPoint};

use rebalancer_engine::profile::ProfileSpec;

/// A built-in policy linked into this binary.
type NativePolicy = fn(&mut Context<'_>, ExtensionPoint, &str) -> Result<(), String>;

fn native_policy(name: &str) -> Option<NativePolicy> {
    use rebalancer_policy_sdk::evaluate;
    let policy: NativePolicy = match name {
        "RemoveDuplicates" => {
            |ctx, point, args| evaluate::<remove_duplicates::RemoveDuplicates>(ctx, point, args)
        }
        "LowNodeUtilization" => |ctx, point, args| {
            evaluate::<low_node_utilization::LowNodeUtilization>(ctx, point, args)
        },
        "HighNodeUtilization" => |ctx, point, args| {
            evaluate::<high_node_utilization::HighNodeUtilization>(ctx, point, args)
        },
        "PodLifeTime" => {
            |ctx, point, args| evaluate::<pod_life_time::PodLifeTime>(ctx, point, args)
        }
        "RemoveFailedPods" => {
            |ctx, point, args| evaluate::<remove_failed_pods::RemoveFailedPods>(ctx, point, args)
        }
        "RemovePodsHavingTooManyRestarts" => |ctx, point, args| {
            evaluate::<remove_pods_having_too_many_restarts::RemovePodsHavingTooManyRestarts>(
                ctx, point, args,
            )
        },
        "RemovePodsViolatingInterPodAntiAffinity" => |ctx, point, args| {
            evaluate::<remove_pods_violating_inter_pod_anti_affinity::RemovePodsViolatingInterPodAntiAffinity>(ctx, point, args)
        },
        "RemovePodsViolatingNodeAffinity" => |ctx, point, args| {
            evaluate::<remove_pods_violating_node_affinity::RemovePodsViolatingNodeAffinity>(
                ctx, point, args,
            )
        },
        "RemovePodsViolatingNodeTaints" => |ctx, point, args| {
            evaluate::<remove_pods_violating_node_taints::RemovePodsViolatingNodeTaints>(
                ctx, point, args,
            )
        },
        "LowNodeLoad" => {
            |ctx, point, args| evaluate::<low_node_load::LowNodeLoad>(ctx, point, args)
        }
        "CpuOrchestration" => {
            |ctx, point, args| evaluate::<cpu_orchestration::CpuOrchestration>(ctx, point, args)
        }
        "RemovePodsViolatingTopologySpreadConstraint" => |ctx, point, args| {
            evaluate::<remove_pods_violating_topology_spread_constraint::RemovePodsViolatingTopologySpreadConstraint>(ctx, point, args)
        },
        _ => return None,
    };
    Some(policy)
}

/// Evaluate `profile` with the built-in policies linked natively (no sandbox). Blocking.
pub fn execute(
    profile: &ProfileSpec,
    snapshot: &Arc<ClusterSnapshot>,
) -> Result<RunReport, RunError> {
    // The benchmark keeps no state between runs: each starts from empty scopes, like wasm's.
    let states = run::PolicyStates::new(rebalancer_policy_sdk::state::DEFAULT_MAX_BYTES);
    run::cycle(
        profile,
        snapshot,
        "native",
        states,
        |plugin, point, mut session| {
            let Some(policy) = native_policy(&plugin.name) else {
                return run::failed(
                    session,
                    PolicyFailure::new(
                        "missing-policy",
                        format!("{:?} is not a built-in policy", plugin.name),
                    ),
                );
            };
            let started = Stopwatch::start();
            let args = plugin.args.to_string();
            let cluster = session.snapshot.cluster();
            let mut evictor = Evictor::new(
                cluster,
                &session.index,
                &session.config,
                &mut session.state,
                &session.nodes,
                &session.plugin,
                &session.plugin_set,
            )
            .with_scope(&mut session.scope);
            let outcome = {
                let mut ctx = Context::new(cluster, &mut evictor);
                policy(&mut ctx, point, &args)
            };
            let logs = std::mem::take(&mut evictor.logs)
                .into_iter()
                .map(|entry| PolicyLog {
                    level: format!("{:?}", entry.level).to_lowercase(),
                    message: entry.message,
                })
                .collect();
            drop(evictor);
            Evaluation {
                outcome: outcome.map_err(|m| PolicyFailure::new("policy-error", m)),
                duration: started.wall(),
                cpu: started.cpu(),
                logs,
                proposal_calls: 0,
                peak_memory: 0,
                sections: Vec::new(),
                state: session.state,
                scope: session.scope,
            }
        },
    )
}
