//! Performance check on the reference cluster (150k pods / 5k nodes) with three zones and a zone
//! spread constraint (maxSkew 1, on the app label) on every 7th ReplicaSet — about the 15% of
//! deployments the bench generator gives one, placed without regard to zones. Timing only means
//! something in release builds:
//! `cargo test -p remove-pods-violating-topology-spread-constraint --release -- --ignored --nocapture`.

#[path = "../../perf/reference_cluster.rs"]
mod reference_cluster;

use std::time::Instant;

use rebalancer_policy_sdk::model::{
    KeyValue, LabelSelector, Snapshot, StrId, TopologySpreadConstraint, to_bytes,
};
use rebalancer_policy_sdk::{Cluster, Context};

use reference_cluster::PassThroughHost;

use crate::args::RemovePodsViolatingTopologySpreadConstraintArgs;
use crate::plan;

fn intern(snapshot: &mut Snapshot, s: &str) -> StrId {
    match snapshot.strings.iter().position(|x| x == s) {
        Some(i) => i as StrId,
        None => {
            snapshot.strings.push(s.to_owned());
            (snapshot.strings.len() - 1) as StrId
        }
    }
}

#[test]
#[ignore = "performance check; run in release with --ignored"]
fn reference_cluster_is_fast() {
    let mut snapshot =
        reference_cluster::snapshot(reference_cluster::NODES, reference_cluster::PODS);
    let zone = intern(&mut snapshot, "topology.kubernetes.io/zone");
    let zones = ["eu-west-1a", "eu-west-1b", "eu-west-1c"].map(|z| intern(&mut snapshot, z));
    let app = intern(&mut snapshot, "app");
    for (i, node) in snapshot.nodes.iter_mut().enumerate() {
        node.labels.push(KeyValue {
            key: zone,
            value: zones[i % 3],
        });
    }
    let mut with_spread = 0;
    for pod in &mut snapshot.pods {
        let Some(rs) = pod
            .name
            .strip_prefix("app-")
            .and_then(|rest| rest.get(..5))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if rs % 7 != 0 {
            continue;
        }
        let owner = pod
            .labels
            .iter()
            .find(|kv| kv.key == app)
            .expect("app label")
            .value;
        pod.topology_spread = vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: zone,
            label_selector: Some(LabelSelector {
                match_labels: vec![KeyValue {
                    key: app,
                    value: owner,
                }],
                match_expressions: Vec::new(),
            }),
            ..TopologySpreadConstraint::default()
        }];
        with_spread += 1;
    }
    let strings = &snapshot.strings;
    let mut sorted: Vec<StrId> = (0..strings.len() as StrId).collect();
    sorted.sort_unstable_by(|&a, &b| strings[a as usize].cmp(&strings[b as usize]));
    snapshot.strings_sorted = sorted;

    let bytes = to_bytes(&snapshot).expect("archive");
    let cluster = Cluster::from_bytes(&bytes).expect("archive");
    let ready_nodes = cluster
        .nodes()
        .filter(|n| n.is_ready())
        .map(|n| n.id)
        .collect();
    let args = RemovePodsViolatingTopologySpreadConstraintArgs::default();
    let mut best = std::time::Duration::MAX;
    let mut last = plan::Outcome::default();
    let mut host_calls = 0;
    for _ in 0..5 {
        let mut host = PassThroughHost {
            ready_nodes: Vec::clone(&ready_nodes),
            ..PassThroughHost::default()
        };
        let mut ctx = Context::new(cluster, &mut host);
        let start = Instant::now();
        last = plan::balance(&mut ctx, &args).expect("runs");
        best = best.min(start.elapsed());
        host_calls = host.host_calls;
    }
    eprintln!(
        "RemovePodsViolatingTopologySpreadConstraint on the reference cluster ({with_spread} pods \
         with a constraint): {best:?}, {host_calls} filter calls, {last:?}"
    );
    assert!(last.imbalanced > 0 && last.proposed > 0, "{last:?}");
    if !cfg!(debug_assertions) {
        assert!(best.as_millis() < 75, "took {best:?}");
    }
}
