//! Performance check on the reference cluster (150k pods / 5k nodes) with required self
//! anti-affinity per host on every 20th ReplicaSet (as the bench generator does for 5% of its
//! deployments). Timing only means something in release builds:
//! `cargo test -p remove-pods-violating-inter-pod-anti-affinity --release -- --ignored --nocapture`.

#[path = "../../perf/reference_cluster.rs"]
mod reference_cluster;

use std::time::Instant;

use rebalancer_policy_sdk::model::{KeyValue, LabelSelector, PodAffinityTerm, StrId, to_bytes};
use rebalancer_policy_sdk::{Cluster, Context};

use reference_cluster::PassThroughHost;

use crate::args::RemovePodsViolatingInterPodAntiAffinityArgs;
use crate::plan;

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn reference_cluster_is_fast() {
    let mut snapshot =
        reference_cluster::snapshot(reference_cluster::NODES, reference_cluster::PODS);
    let id = |s: &str| -> StrId {
        snapshot
            .strings
            .iter()
            .position(|x| x == s)
            .expect("interned") as StrId
    };
    let (app, hostname) = (id("app"), id("kubernetes.io/hostname"));
    let mut with_terms = 0;
    for pod in &mut snapshot.pods {
        let Some(rs) = pod
            .name
            .strip_prefix("app-")
            .and_then(|rest| rest.get(..5))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if rs % 20 != 0 {
            continue;
        }
        let owner = pod
            .labels
            .iter()
            .find(|kv| kv.key == app)
            .expect("app label")
            .value;
        pod.affinity.pod_anti_affinity_required = vec![PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: vec![KeyValue {
                    key: app,
                    value: owner,
                }],
                match_expressions: Vec::new(),
            }),
            topology_key: hostname,
            ..PodAffinityTerm::default()
        }];
        with_terms += 1;
    }
    let bytes = to_bytes(&snapshot).expect("archive");
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let ready_nodes = cluster
        .nodes()
        .filter(|n| n.is_ready())
        .map(|n| n.id)
        .collect();
    let args = RemovePodsViolatingInterPodAntiAffinityArgs::default();
    let mut best = std::time::Duration::MAX;
    let mut last = plan::Outcome::default();
    for _ in 0..5 {
        let mut host = PassThroughHost {
            ready_nodes: Vec::clone(&ready_nodes),
            ..PassThroughHost::default()
        };
        let mut ctx = Context::new(cluster, &mut host);
        let start = Instant::now();
        last = plan::deschedule(&mut ctx, &args).expect("runs");
        best = best.min(start.elapsed());
    }
    eprintln!(
        "RemovePodsViolatingInterPodAntiAffinity on the reference cluster ({with_terms} pods with \
         terms): {best:?}, {last:?}"
    );
    assert!(
        last.proposed > 0,
        "stacked replicas violate their anti-affinity"
    );
    if !cfg!(debug_assertions) {
        assert!(best.as_millis() < 75, "took {best:?}");
    }
}
