//! Every built-in policy on the reference cluster (150k pods / 5k nodes), natively, with a host
//! that admits everything: each must stay within its time budget (in release builds) and propose
//! what the cluster's shape implies. Timing only means something in release builds:
//!
//! `cargo test -p policies-perf --release -- --ignored --nocapture`
//!
//! One test per policy; the timed runs of different tests never overlap
//! ([`policies_perf::time_best_of`] serialises them).

use policies_perf::{assert_faster_than, cluster, time_best_of};
use rebalancer_policy_sdk::Cluster;

/// Best of this many runs.
const RUNS: usize = 5;

fn args<T: serde::de::DeserializeOwned>(json: &str) -> T {
    serde_json::from_str(json).expect("args")
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn remove_duplicates() {
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
        assert_faster_than(best, 100);
    }
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn low_node_utilization() {
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
        assert_faster_than(best, 100);
    }
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn high_node_utilization() {
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
    assert_faster_than(best, 100);
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn pod_life_time() {
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
    assert_faster_than(best, 100);
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn remove_failed_pods() {
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
    assert_faster_than(best, 100);
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn remove_pods_having_too_many_restarts() {
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
    assert_faster_than(best, 100);
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn remove_pods_violating_node_affinity() {
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
    assert_faster_than(best, 100);
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn remove_pods_violating_node_taints() {
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
    assert_faster_than(best, 100);
}

/// With required self anti-affinity per host on every 20th ReplicaSet (as the bench generator
/// does for 5% of its deployments).
#[test]
#[ignore = "performance check; run in release with --ignored"]
fn remove_pods_violating_inter_pod_anti_affinity() {
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
    assert_faster_than(best, 75);
}

/// With three zones and a zone spread constraint (maxSkew 1, on the app label) on every 7th
/// ReplicaSet — about the 15% of deployments the bench generator gives one, placed without
/// regard to zones.
#[test]
#[ignore = "performance check; run in release with --ignored"]
fn remove_pods_violating_topology_spread_constraint() {
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
    assert_faster_than(best, 75);
}
