//! Benchmark: every built-in policy on the reference cluster (150k pods / 5k nodes), natively,
//! with a host that admits everything. Each must propose what the cluster's shape implies (checked
//! on every pass) and stay within its time budget; the run fails at the end, listing every policy
//! over budget. Timing only means something in release builds, which is what `cargo bench` makes:
//!
//! `cargo bench -p policies-perf` (or `cargo bench -p policies-perf -- low_node` for the policies
//! whose name contains `low_node`)
//!
//! A benchmark, not a test: no test may assert time, since a loaded machine makes any threshold
//! flaky.

use policies_perf::{Budgets, cluster, time_best_of};
use rebalancer_policy_sdk::Cluster;

/// Best of this many runs.
const RUNS: usize = 5;

fn args<T: serde::de::DeserializeOwned>(json: &str) -> T {
    serde_json::from_str(json).expect("args")
}

fn remove_duplicates(budgets: &mut Budgets) {
    use remove_duplicates::{RemoveDuplicatesArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    for target_resource_fit in [false, true] {
        let args = RemoveDuplicatesArgs {
            target_resource_fit,
            ..RemoveDuplicatesArgs::default()
        };
        let (best, last, _) = time_best_of(
            cluster,
            RUNS,
            |ctx| plan::balance(ctx, &args),
            |last, host| assert_eq!(last.proposed, host.proposals),
        );
        eprintln!(
            "RemoveDuplicates on the reference cluster (targetResourceFit: \
             {target_resource_fit}): {best:?}, {last:?}"
        );
        assert!(last.proposed > 0, "the reference cluster has duplicates");
        budgets.check(
            &format!("remove_duplicates (targetResourceFit: {target_resource_fit})"),
            best,
            100,
        );
    }
}

fn low_node_utilization(budgets: &mut Budgets) {
    use low_node_utilization::{LowNodeUtilizationArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    for extensions in [
        "",
        r#","targetResourceFit":true,"perTaintTolerations":true"#,
    ] {
        let args: LowNodeUtilizationArgs = args(&format!(
            r#"{{"thresholds":{{"cpu":20,"memory":20,"pods":20}},
                "targetThresholds":{{"cpu":50,"memory":50,"pods":50}}{extensions}}}"#
        ));
        let (best, last, _) =
            time_best_of(cluster, RUNS, |ctx| plan::balance(ctx, &args), |_, _| {});
        eprintln!(
            "LowNodeUtilization on the reference cluster ({extensions:?}): {best:?}, {last:?}"
        );
        budgets.check(&format!("low_node_utilization ({extensions:?})"), best, 100);
    }
}

fn high_node_utilization(budgets: &mut Budgets) {
    use high_node_utilization::{HighNodeUtilizationArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args: HighNodeUtilizationArgs = args(r#"{"thresholds":{"cpu":20,"memory":20}}"#);
    let (best, last, _) = time_best_of(cluster, RUNS, |ctx| plan::balance(ctx, &args), |_, _| {});
    eprintln!("HighNodeUtilization on the reference cluster: {best:?}, {last:?}");
    assert!(
        last.proposed > 0,
        "the reference cluster has fresh, empty nodes"
    );
    budgets.check("high_node_utilization", best, 100);
}

fn pod_life_time(budgets: &mut Budgets) {
    use pod_life_time::{PodLifeTimeArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args: PodLifeTimeArgs = args(r#"{"maxPodLifeTimeSeconds":86400}"#);
    let (best, last, _) = time_best_of(
        cluster,
        RUNS,
        |ctx| plan::deschedule(ctx, &args),
        |last, host| assert_eq!(last.proposed, host.proposals),
    );
    eprintln!(
        "PodLifeTime on the reference cluster: {best:?}, {}",
        last.summary()
    );
    budgets.check("pod_life_time", best, 100);
}

fn remove_failed_pods(budgets: &mut Budgets) {
    use remove_failed_pods::{RemoveFailedPodsArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args: RemoveFailedPodsArgs = args(r#"{}"#);
    let (best, last, _) = time_best_of(
        cluster,
        RUNS,
        |ctx| plan::deschedule(ctx, &args),
        |last, host| assert_eq!(last.proposed, host.proposals),
    );
    eprintln!(
        "RemoveFailedPods on the reference cluster: {best:?}, {}",
        last.summary()
    );
    budgets.check("remove_failed_pods", best, 100);
}

fn remove_pods_having_too_many_restarts(budgets: &mut Budgets) {
    use remove_pods_having_too_many_restarts::{RemovePodsHavingTooManyRestartsArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args: RemovePodsHavingTooManyRestartsArgs =
        args(r#"{"podRestartThreshold":1,"includingInitContainers":true}"#);
    let (best, last, _) = time_best_of(
        cluster,
        RUNS,
        |ctx| plan::deschedule(ctx, &args),
        |last, host| assert_eq!(last.proposed, host.proposals),
    );
    eprintln!(
        "RemovePodsHavingTooManyRestarts on the reference cluster: {best:?}, {}",
        last.summary()
    );
    budgets.check("remove_pods_having_too_many_restarts", best, 100);
}

fn remove_pods_violating_node_affinity(budgets: &mut Budgets) {
    use remove_pods_violating_node_affinity::{RemovePodsViolatingNodeAffinityArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args: RemovePodsViolatingNodeAffinityArgs = args(
        r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution","preferredDuringSchedulingIgnoredDuringExecution"]}"#,
    );
    let (best, last, _) = time_best_of(
        cluster,
        RUNS,
        |ctx| plan::deschedule(ctx, &args),
        |last, host| assert_eq!(last.proposed, host.proposals),
    );
    eprintln!(
        "RemovePodsViolatingNodeAffinity on the reference cluster: {best:?}, {}",
        last.summary()
    );
    budgets.check("remove_pods_violating_node_affinity", best, 100);
}

fn remove_pods_violating_node_taints(budgets: &mut Budgets) {
    use remove_pods_violating_node_taints::{RemovePodsViolatingNodeTaintsArgs, plan};
    let bytes = cluster::archive();
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args: RemovePodsViolatingNodeTaintsArgs = args(r#"{"includePreferNoSchedule":true}"#);
    let (best, last, _) = time_best_of(
        cluster,
        RUNS,
        |ctx| plan::deschedule(ctx, &args),
        |last, host| assert_eq!(last.proposed, host.proposals),
    );
    eprintln!(
        "RemovePodsViolatingNodeTaints on the reference cluster: {best:?}, {}",
        last.summary()
    );
    budgets.check("remove_pods_violating_node_taints", best, 100);
}

/// With required self anti-affinity per host on every 20th ReplicaSet (as the bench generator
/// does for 5% of its deployments).
fn remove_pods_violating_inter_pod_anti_affinity(budgets: &mut Budgets) {
    use remove_pods_violating_inter_pod_anti_affinity::{
        RemovePodsViolatingInterPodAntiAffinityArgs, plan,
    };
    let mut snapshot = cluster::snapshot(cluster::NODES, cluster::PODS);
    let with_terms = cluster::with_self_anti_affinity(&mut snapshot, 20);
    let bytes = cluster::to_archive(&snapshot);
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args = RemovePodsViolatingInterPodAntiAffinityArgs::default();
    let (best, last, _) =
        time_best_of(cluster, RUNS, |ctx| plan::deschedule(ctx, &args), |_, _| {});
    eprintln!(
        "RemovePodsViolatingInterPodAntiAffinity on the reference cluster ({with_terms} pods with \
         terms): {best:?}, {last:?}"
    );
    assert!(
        last.proposed > 0,
        "stacked replicas violate their anti-affinity"
    );
    budgets.check("remove_pods_violating_inter_pod_anti_affinity", best, 75);
}

/// With three zones and a zone spread constraint (maxSkew 1, on the app label) on every 7th
/// ReplicaSet — about the 15% of deployments the bench generator gives one, placed without
/// regard to zones.
fn remove_pods_violating_topology_spread_constraint(budgets: &mut Budgets) {
    use remove_pods_violating_topology_spread_constraint::{
        RemovePodsViolatingTopologySpreadConstraintArgs, plan,
    };
    let mut snapshot = cluster::snapshot(cluster::NODES, cluster::PODS);
    let with_spread = cluster::with_zone_spread(&mut snapshot, 7);
    let bytes = cluster::to_archive(&snapshot);
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let args = RemovePodsViolatingTopologySpreadConstraintArgs::default();
    let (best, last, host) =
        time_best_of(cluster, RUNS, |ctx| plan::balance(ctx, &args), |_, _| {});
    let host_calls = host.host_calls;
    eprintln!(
        "RemovePodsViolatingTopologySpreadConstraint on the reference cluster ({with_spread} pods \
         with a constraint): {best:?}, {host_calls} filter calls, {last:?}"
    );
    assert!(last.imbalanced > 0 && last.proposed > 0, "{last:?}");
    budgets.check("remove_pods_violating_topology_spread_constraint", best, 75);
}

/// One benchmark: it times a policy and records its timings in the budgets.
type Bench = fn(&mut Budgets);

/// Every benchmark, by name.
const BENCHES: &[(&str, Bench)] = &[
    ("remove_duplicates", remove_duplicates),
    ("low_node_utilization", low_node_utilization),
    ("high_node_utilization", high_node_utilization),
    ("pod_life_time", pod_life_time),
    ("remove_failed_pods", remove_failed_pods),
    (
        "remove_pods_having_too_many_restarts",
        remove_pods_having_too_many_restarts,
    ),
    (
        "remove_pods_violating_node_affinity",
        remove_pods_violating_node_affinity,
    ),
    (
        "remove_pods_violating_node_taints",
        remove_pods_violating_node_taints,
    ),
    (
        "remove_pods_violating_inter_pod_anti_affinity",
        remove_pods_violating_inter_pod_anti_affinity,
    ),
    (
        "remove_pods_violating_topology_spread_constraint",
        remove_pods_violating_topology_spread_constraint,
    ),
];

fn main() {
    // `cargo bench` passes `--bench`; other arguments select benchmarks by name.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut budgets = Budgets::default();
    for (name, bench) in BENCHES {
        if filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())) {
            bench(&mut budgets);
        }
    }
    if !budgets.over().is_empty() {
        eprintln!("over budget:");
        for line in budgets.over() {
            eprintln!("  {line}");
        }
        std::process::exit(1);
    }
}
