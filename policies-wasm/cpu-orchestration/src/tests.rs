//! CpuOrchestration against the SDK's native host (the evictor the server runs): every
//! invariant both ways on realistic nodes, soft ones only with `includeSoft`, the invariant
//! selection, newer-pod-moves for conflicts, malformed annotations and the summary line.
//!
//! Nodes: `TestNode::cpus(2, 1, 8, 2)` is 2 sockets with one NUMA node each, 8 cores per NUMA
//! node and SMT 2, numbered like Linux: core `c` has CPUs `c` and `c + 16`; NUMA node 0 holds
//! CPUs 0-7,16-23 and NUMA node 1 holds 8-15,24-31.

use rebalancer_policy_sdk::LogLevel;
use rebalancer_policy_sdk::k8s::koordinator::{LABEL_PRIORITY_CLASS, LABEL_QOS};
use rebalancer_policy_sdk::testing::*;

use crate::CpuOrchestration;
use crate::annotations::{
    LABEL_CPU_BIND_POLICY, LABEL_NUMA_ALLOCATE_STRATEGY, LABEL_NUMA_TOPOLOGY_POLICY,
    NUMA_TOPOLOGY_SPEC, RESOURCE_SPEC, RESOURCE_STATUS,
};

/// 2 sockets, 2 NUMA nodes, 8 cores per NUMA node, SMT 2 (32 CPUs).
fn node(name: &str) -> TestNode {
    TestNode::new(name).cpu("32").cpus(2, 1, 8, 2)
}

/// A kubelet `static` + `full-pcpus-only` node, CPUs 0 and 16 reserved by the kubelet.
fn kubelet_static(name: &str) -> TestNode {
    node(name)
        .kubelet_cpu_policy("static", "0,16")
        .kubelet_cpu_option("full-pcpus-only", "true")
}

/// A ReplicaSet pod on `n1` requesting `cpu` (Guaranteed), with QoS label `qos` (unless empty)
/// and a `resource-status` cpuset (unless empty).
fn pod(name: &str, qos: &str, cpuset: &str, cpu: &str) -> TestPod {
    let mut p = TestPod::new("default", name)
        .on_node("n1")
        .owned_by("ReplicaSet", name)
        .cpu(cpu)
        .memory("1Gi")
        .guaranteed();
    if !qos.is_empty() {
        p = p.label(LABEL_QOS, qos);
    }
    if !cpuset.is_empty() {
        p = p.annotation(RESOURCE_STATUS, &format!(r#"{{"cpuset":"{cpuset}"}}"#));
    }
    p
}

/// An LSR pod with a cpuset of `n` CPUs' worth of request.
fn lsr(name: &str, cpuset: &str, cpu: &str) -> TestPod {
    pod(name, "LSR", cpuset, cpu)
}

fn cluster(n1: TestNode) -> TestCluster {
    TestCluster::new()
        .node(n1)
        .node(TestNode::new("spare").cpu("64"))
}

/// Run and return `(name, reason)` of every proposal.
fn proposals(cluster: &TestCluster, args: &str) -> Vec<(String, String)> {
    let run = cluster.run::<CpuOrchestration>(Deschedule, args);
    run.assert_ok();
    run.proposals
        .iter()
        .map(|p| (p.name.clone(), p.reason.clone()))
        .collect()
}

/// Exactly one proposal, of `name`, whose reason starts with `reason`.
#[track_caller]
fn expect_one(cluster: &TestCluster, args: &str, name: &str, reason: &str) {
    let got = proposals(cluster, args);
    assert_eq!(got.len(), 1, "want only {name}: {got:#?}");
    assert_eq!(got[0].0, name, "{got:#?}");
    assert!(
        got[0].1.starts_with(reason),
        "reason {:?} does not start with {reason:?}",
        got[0].1
    );
}

#[track_caller]
fn expect_none(cluster: &TestCluster, args: &str) {
    let got = proposals(cluster, args);
    assert!(got.is_empty(), "want no proposal: {got:#?}");
}

const ALL_SOFT: &str = r#"{"includeSoft":true}"#;

#[test]
fn h1_cpuset_must_parse_and_exist_in_the_topology() {
    expect_one(
        &cluster(node("n1")).pod(lsr("db", "4,20,40-41", "4")),
        "{}",
        "db",
        "H1: cpuset 4,20,40-41 names CPUs 40-41 that the node's cpu-topology (0-31) does not have",
    );
    expect_one(
        &cluster(node("n1"))
            .pod(lsr("db", "", "2").annotation(RESOURCE_STATUS, r#"{"cpuset":"5-4"}"#)),
        "{}",
        "db",
        "H1: resource-status cpuset \"5-4\" does not parse",
    );
    expect_one(
        &cluster(node("n1")).pod(lsr("db", "", "2").annotation(RESOURCE_STATUS, "{cpuset")),
        "{}",
        "db",
        "H1: resource-status is not valid",
    );
    expect_none(&cluster(node("n1")).pod(lsr("db", "4,20", "2")), ALL_SOFT);
}

#[test]
fn h2_cpuset_size_matches_the_integer_request() {
    expect_one(
        &cluster(node("n1")).pod(lsr("db", "4-5,20-21", "2")),
        "{}",
        "db",
        "H2: cpuset 4-5,20-21 has 4 CPUs but requests.cpu is 2",
    );
    expect_one(
        &cluster(node("n1")).pod(pod("web", "LS", "4,20", "1500m")),
        "{}",
        "web",
        "H2: cpuset 4,20 but requests.cpu 1500m is not a whole number of CPUs",
    );
    expect_none(
        &cluster(node("n1")).pod(lsr("db", "4-5,20-21", "4")),
        ALL_SOFT,
    );
}

#[test]
fn h3_lse_and_lsr_pods_are_integer_prod_and_pinned() {
    expect_one(
        &cluster(node("n1")).pod(lsr("db", "", "4")),
        "{}",
        "db",
        "H3: LSR pod requests 4 CPUs but has no resource-status cpuset",
    );
    expect_one(
        &cluster(node("n1")).pod(pod("db", "LSE", "", "1500m")),
        "{}",
        "db",
        "H3: LSE pod requests a fractional cpu (1500m)",
    );
    expect_one(
        &cluster(node("n1"))
            .pod(pod("db", "LSE", "4,20", "2").label(LABEL_PRIORITY_CLASS, "koord-batch")),
        "{}",
        "db",
        "H3: LSE pod is koord-batch, not koord-prod",
    );
    // ConstrainedBurst allocates no cpuset: an LSR pod without one is fine.
    expect_none(
        &cluster(node("n1")).pod(lsr("burst", "", "4").annotation(
            RESOURCE_SPEC,
            r#"{"preferredCPUBindPolicy":"ConstrainedBurst"}"#,
        )),
        ALL_SOFT,
    );
    expect_none(&cluster(node("n1")).pod(lsr("db", "4,20", "2")), ALL_SOFT);
}

#[test]
fn h4_full_pcpus_only_nodes_need_integer_whole_core_cpusets() {
    // Kubelet static + full-pcpus-only.
    let n = || cluster(kubelet_static("n1"));
    expect_one(
        &n().pod(pod("web", "LS", "", "1500m")),
        "{}",
        "web",
        "H4: requests.cpu 1500m is not an integer on a FullPCPUsOnly node (kubelet static + full-pcpus-only)",
    );
    expect_one(
        &n().pod(pod("web", "LS", "1-2", "2")),
        "{}",
        "web",
        "H4: cpuset 1-2 is not whole cores (2 cores × 2 threads ≠ 2 CPUs)",
    );
    expect_one(
        &n().pod(pod("web", "LS", "3", "1")),
        "{}",
        "web",
        "H4: 1 CPUs are not a multiple of 2 threads per core",
    );
    expect_one(
        &n().pod(pod("web", "LS", "", "2")),
        "{}",
        "web",
        "H4: no cpuset although the node is FullPCPUsOnly",
    );
    // The label says the same.
    expect_one(
        &cluster(node("n1").label(LABEL_CPU_BIND_POLICY, "FullPCPUsOnly"))
            .pod(pod("web", "LS", "1-2", "2")),
        "{}",
        "web",
        "H4: cpuset 1-2 is not whole cores",
    );
    // Whole cores, kubelet-pinned whole cores, and BestEffort pods without cpu are fine.
    expect_none(
        &cluster(kubelet_static("n1").kubelet_pinned("default", "guar", "10,26"))
            .pod(pod("web", "LS", "1,17", "2"))
            .pod(pod("guar", "", "", "2"))
            .pod(
                TestPod::new("default", "be")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "be"),
            ),
        ALL_SOFT,
    );
}

#[test]
fn h5_spread_by_pcpus_nodes_need_one_cpu_per_core() {
    let n = || cluster(node("n1").label(LABEL_CPU_BIND_POLICY, "SpreadByPCPUs"));
    expect_one(
        &n().pod(pod("web", "LS", "1,17", "2")),
        "{}",
        "web",
        "H5: cpuset 1,17 has CPUs 1,17 on one core on a SpreadByPCPUs node",
    );
    expect_one(
        &n().pod(pod("web", "LS", "", "500m")),
        "{}",
        "web",
        "H5: requests.cpu 500m is not an integer on a SpreadByPCPUs node",
    );
    expect_none(&n().pod(pod("web", "LS", "1-2", "2")), ALL_SOFT);
}

#[test]
fn h6_required_bind_policy_is_honoured() {
    let full = r#"{"requiredCPUBindPolicy":"FullPCPUs"}"#;
    let spread = r#"{"requiredCPUBindPolicy":"SpreadByPCPUs"}"#;
    expect_one(
        &cluster(node("n1")).pod(lsr("db", "1-2", "2").annotation(RESOURCE_SPEC, full)),
        "{}",
        "db",
        "H6: requiredCPUBindPolicy FullPCPUs but cpuset 1-2 is not whole cores",
    );
    expect_one(
        &cluster(node("n1")).pod(lsr("db", "1,17", "2").annotation(RESOURCE_SPEC, spread)),
        "{}",
        "db",
        "H6: requiredCPUBindPolicy SpreadByPCPUs but cpuset 1,17 has CPUs 1,17 on one core",
    );
    expect_none(
        &cluster(node("n1"))
            .pod(lsr("a", "1,17", "2").annotation(RESOURCE_SPEC, full))
            .pod(lsr("b", "2-3", "2").annotation(RESOURCE_SPEC, spread)),
        r#"{"invariants":["H6"]}"#,
    );
}

#[test]
fn h7_required_policy_must_match_the_node_policy() {
    let n = || cluster(node("n1").label(LABEL_CPU_BIND_POLICY, "SpreadByPCPUs"));
    let full = r#"{"requiredCPUBindPolicy":"FullPCPUs"}"#;
    let c = n().pod(lsr("db", "1,17", "2").annotation(RESOURCE_SPEC, full));
    // Alone, H7; with every invariant, H5 comes first and H7 is counted.
    expect_one(
        &c,
        r#"{"invariants":["H7"]}"#,
        "db",
        "H7: requiredCPUBindPolicy FullPCPUs conflicts with the node's SpreadByPCPUs (label node.koordinator.sh/cpu-bind-policy)",
    );
    let got = proposals(&c, "{}");
    assert_eq!(got.len(), 1);
    assert!(got[0].1.starts_with("H5: "), "{got:?}");
    assert!(got[0].1.ends_with("(and 1 more violation: H7)"), "{got:?}");
    expect_none(
        &n().pod(lsr("db", "1-2", "2").annotation(
            RESOURCE_SPEC,
            r#"{"requiredCPUBindPolicy":"SpreadByPCPUs"}"#,
        )),
        ALL_SOFT,
    );
}

#[test]
fn h8_overlapping_cpusets_move_the_newer_pod() {
    let old = lsr("db-0", "4,20", "2")
        .created_ago_secs(7200)
        .owned_by("ReplicaSet", "db");
    let new = lsr("cache", "4-5,20-21", "4").created_ago_secs(3600);
    expect_one(
        &cluster(node("n1")).pod(new.clone()).pod(old.clone()),
        "{}",
        "cache",
        "H8: CPUs 4,20 also pinned by default/db-0",
    );
    // The same creation time: namespace/name decides (default/a is older than default/b).
    expect_one(
        &cluster(node("n1"))
            .pod(lsr("b", "6,22", "2"))
            .pod(lsr("a", "6,22", "2")),
        "{}",
        "b",
        "H8: CPUs 6,22 also pinned by default/a",
    );
    // Three pods on the same CPUs: both newer ones move, each naming the oldest.
    let got = proposals(
        &cluster(node("n1"))
            .pod(lsr("c", "6,22", "2").created_ago_secs(10))
            .pod(lsr("b", "6,22", "2").created_ago_secs(20))
            .pod(lsr("a", "6,22", "2").created_ago_secs(30)),
        "{}",
    );
    let mut names: Vec<&str> = got.iter().map(|p| p.0.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["b", "c"], "{got:?}");
    assert!(
        got.iter()
            .all(|p| p.1.starts_with("H8: CPUs 6,22 also pinned by default/a")),
        "{got:?}"
    );
    expect_none(
        &cluster(node("n1"))
            .pod(old)
            .pod(lsr("cache", "9-10,25-26", "4").created_ago_secs(60)),
        ALL_SOFT,
    );
}

#[test]
fn h9_reserved_system_and_kubelet_cpus_are_not_handed_out() {
    expect_one(
        &cluster(kubelet_static("n1")).pod(lsr("db", "0,16", "2")),
        "{}",
        "db",
        "H9: CPUs 0,16 are kubelet reservedCPUs",
    );
    expect_one(
        &cluster(node("n1").reserved_cpus("2,18", "Default")).pod(lsr("db", "2-3,18-19", "4")),
        "{}",
        "db",
        "H9: CPUs 2,18 are node reservation reservedCPUs",
    );
    expect_one(
        &cluster(node("n1").system_qos_cpus("3,19", true)).pod(lsr("db", "3,19", "2")),
        "{}",
        "db",
        "H9: CPUs 3,19 are the exclusive system-QoS cpuset",
    );
    expect_none(
        &cluster(node("n1").system_qos_cpus("3,19", false)).pod(lsr("db", "3,19", "2")),
        ALL_SOFT,
    );
    // A kubelet-pinned Guaranteed pod and a koord cpuset: the newer one moves.
    let pinned = || node("n1").kubelet_pinned("team-b", "guar", "6,22");
    let guar = |ago| {
        TestPod::new("team-b", "guar")
            .on_node("n1")
            .owned_by("ReplicaSet", "guar")
            .cpu("2")
            .memory("1Gi")
            .guaranteed()
            .created_ago_secs(ago)
    };
    expect_one(
        &cluster(pinned())
            .pod(guar(7200))
            .pod(lsr("db", "6,22", "2").created_ago_secs(60)),
        "{}",
        "db",
        "H9: CPUs 6,22 also pinned by the kubelet for team-b/guar",
    );
    expect_one(
        &cluster(pinned())
            .pod(guar(60))
            .pod(lsr("db", "6,22", "2").created_ago_secs(7200)),
        "{}",
        "guar",
        "H9: kubelet pinned CPUs 6,22, also held by older default/db",
    );
    expect_none(
        &cluster(pinned())
            .pod(guar(60))
            .pod(lsr("db", "7,23", "2").created_ago_secs(7200)),
        ALL_SOFT,
    );
}

#[test]
fn h10_numa_policy_matches_the_node_and_bounds_the_cpuset() {
    let single = r#"{"numaTopologyPolicy":"SingleNUMANode"}"#;
    let status = |cpuset: &str, numa: &str| {
        format!(r#"{{"cpuset":"{cpuset}","numaNodeResources":[{numa}]}}"#)
    };
    expect_one(
        &cluster(node("n1").label(LABEL_NUMA_TOPOLOGY_POLICY, "Restricted"))
            .pod(lsr("db", "4,20", "2").annotation(NUMA_TOPOLOGY_SPEC, single)),
        "{}",
        "db",
        "H10: pod NUMA policy SingleNUMANode differs from the node's Restricted (label node.koordinator.sh/numa-topology-policy)",
    );
    expect_one(
        &cluster(node("n1")).pod(
            lsr("db", "", "2")
                .annotation(NUMA_TOPOLOGY_SPEC, single)
                .annotation(RESOURCE_STATUS, &status("4,20", r#"{"node":0},{"node":1}"#)),
        ),
        "{}",
        "db",
        "H10: SingleNUMANode but numaNodeResources lists 2 NUMA nodes",
    );
    // The NRT's SingleNUMANodePodLevel is the node's policy.
    expect_one(
        &cluster(node("n1").topology_policy("SingleNUMANodePodLevel"))
            .pod(lsr("db", "", "2").annotation(RESOURCE_STATUS, &status("4,8", r#"{"node":0}"#))),
        r#"{"invariants":["H10"]}"#,
        "db",
        "H10: SingleNUMANode but cpuset 4,8 has CPUs 8 outside the listed NUMA nodes 0",
    );
    expect_none(
        &cluster(node("n1").topology_policy("SingleNUMANodePodLevel")).pod(
            lsr("db", "", "2")
                .annotation(NUMA_TOPOLOGY_SPEC, single)
                .annotation(RESOURCE_STATUS, &status("4,20", r#"{"node":0}"#)),
        ),
        ALL_SOFT,
    );
}

#[test]
fn h11_single_and_multi_numa_pods_do_not_share_a_numa_node() {
    let restricted = r#"{"numaTopologyPolicy":"Restricted"}"#;
    let multi = |name: &str, ago| {
        lsr(name, "", "4")
            .annotation(NUMA_TOPOLOGY_SPEC, restricted)
            .annotation(
                RESOURCE_STATUS,
                r#"{"cpuset":"5,21,8,24","numaNodeResources":[{"node":0},{"node":1}]}"#,
            )
            .created_ago_secs(ago)
    };
    let single = |name: &str, ago| {
        lsr(name, "", "2")
            .annotation(NUMA_TOPOLOGY_SPEC, restricted)
            .annotation(
                RESOURCE_STATUS,
                r#"{"cpuset":"4,20","numaNodeResources":[{"node":0}]}"#,
            )
            .created_ago_secs(ago)
    };
    let only = r#"{"invariants":["H11"]}"#;
    expect_one(
        &cluster(node("n1"))
            .pod(single("small", 7200))
            .pod(multi("big", 60)),
        only,
        "big",
        "H11: multi-NUMA pod uses NUMA node 0, which single-NUMA default/small holds",
    );
    expect_one(
        &cluster(node("n1"))
            .pod(single("small", 60))
            .pod(multi("big", 7200)),
        only,
        "small",
        "H11: single-NUMA pod sits on NUMA node 0, which multi-NUMA default/big holds",
    );
    // Preferred exclusivity on the newer pod: legal.
    expect_none(
        &cluster(node("n1"))
            .pod(single("small", 7200))
            .pod(multi("big", 60).annotation(
                NUMA_TOPOLOGY_SPEC,
                r#"{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Preferred"}"#,
            )),
        only,
    );
}

#[test]
fn h12_per_numa_cpu_counts_match_numa_node_resources() {
    let pod_with = |cpu: &str| {
        lsr("db", "", "4").annotation(
            RESOURCE_STATUS,
            &format!(
                r#"{{"cpuset":"4-5,20-21","numaNodeResources":[{{"node":0,"resources":{{"cpu":"{cpu}","memory":"1Gi"}}}}]}}"#
            ),
        )
    };
    expect_one(
        &cluster(node("n1")).pod(pod_with("2")),
        "{}",
        "db",
        "H12: cpuset 4-5,20-21 has 4 CPUs on NUMA node 0 but numaNodeResources lists cpu 2 there",
    );
    expect_none(&cluster(node("n1")).pod(pod_with("4")), ALL_SOFT);
}

#[test]
fn h13_cpuset_pods_need_a_valid_cpu_topology() {
    expect_one(
        &TestCluster::new()
            .node(TestNode::new("n1"))
            .node(node("with-nrt"))
            .pod(lsr("db", "4,20", "2")),
        "{}",
        "db",
        "H13: node n1 has no NodeResourceTopology but the pod holds cpuset 4,20",
    );
    expect_one(
        &cluster(TestNode::new("n1").topology_policy("None")).pod(lsr("db", "4,20", "2")),
        "{}",
        "db",
        "H13: node n1 has no valid cpu-topology in its NodeResourceTopology",
    );
    // No node of the cluster has an NRT: the cluster does not report them, which is no
    // evidence against the pod; one warning says why nothing is checked.
    let blind = cluster(TestNode::new("n1")).pod(lsr("db", "4,20", "2"));
    expect_none(&blind, "{}");
    let run = blind.run::<CpuOrchestration>(Deschedule, "{}");
    let warnings: Vec<&str> = run
        .logs
        .iter()
        .filter(|l| l.level == LogLevel::Warn)
        .map(|l| l.message.as_str())
        .collect();
    assert!(
        warnings.len() == 1 && warnings[0].contains("no node has a NodeResourceTopology"),
        "{warnings:#?}"
    );
    // No topology and no cpuset pods: nothing to say.
    expect_none(
        &cluster(TestNode::new("n1")).pod(pod("web", "LS", "", "500m")),
        ALL_SOFT,
    );
}

#[test]
fn s1_preferred_full_pcpus_pod_on_partial_cores() {
    let c = cluster(node("n1")).pod(lsr("db", "4-5", "2"));
    expect_none(&c, "{}");
    expect_one(
        &c,
        ALL_SOFT,
        "db",
        "S1: preferred FullPCPUs cpuset 4-5 holds partial cores (siblings 20-21 are not in it) although 2 CPUs are a multiple of 2 threads per core",
    );
    expect_none(&cluster(node("n1")).pod(lsr("db", "4,20", "2")), ALL_SOFT);
}

#[test]
fn s2_cpuset_spanning_numa_nodes_that_one_would_hold() {
    let c = cluster(node("n1")).pod(lsr("db", "7-8,23-24", "4"));
    expect_none(&c, "{}");
    expect_one(
        &c,
        ALL_SOFT,
        "db",
        "S2: 4 CPUs span NUMA nodes 0,1 though NUMA node 0 has 14 free CPUs",
    );
    expect_none(
        &cluster(node("n1")).pod(lsr("db", "6-7,22-23", "4")),
        ALL_SOFT,
    );
}

#[test]
fn s3_exclusive_pods_share_a_core_or_numa_node() {
    let pcpu =
        r#"{"preferredCPUBindPolicy":"SpreadByPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}"#;
    let numa = r#"{"preferredCPUExclusivePolicy":"NUMANodeLevel"}"#;
    let only = r#"{"invariants":["S3"],"includeSoft":true}"#;
    expect_one(
        &cluster(node("n1"))
            .pod(
                lsr("old", "4", "1")
                    .annotation(RESOURCE_SPEC, pcpu)
                    .created_ago_secs(7200),
            )
            .pod(
                lsr("new", "20", "1")
                    .annotation(RESOURCE_SPEC, pcpu)
                    .created_ago_secs(60),
            ),
        only,
        "new",
        "S3: PCPULevel pod shares core 4 (its CPUs 20) with PCPULevel pod default/old",
    );
    expect_one(
        &cluster(node("n1"))
            .pod(
                lsr("old", "4,20", "2")
                    .annotation(RESOURCE_SPEC, numa)
                    .created_ago_secs(7200),
            )
            .pod(
                lsr("new", "5,21", "2")
                    .annotation(RESOURCE_SPEC, numa)
                    .created_ago_secs(60),
            ),
        only,
        "new",
        "S3: NUMANodeLevel pod shares NUMA node 0 with NUMANodeLevel pod default/old",
    );
    expect_none(
        &cluster(node("n1"))
            .pod(lsr("old", "4", "1").annotation(RESOURCE_SPEC, pcpu))
            .pod(lsr("new", "5", "1").annotation(RESOURCE_SPEC, pcpu))
            .pod(lsr("n0", "6,22", "2").annotation(RESOURCE_SPEC, numa))
            .pod(lsr("n1", "8,24", "2").annotation(RESOURCE_SPEC, numa)),
        only,
    );
    // Not without includeSoft.
    expect_none(
        &cluster(node("n1"))
            .pod(lsr("old", "4", "1").annotation(RESOURCE_SPEC, pcpu))
            .pod(lsr("new", "20", "1").annotation(RESOURCE_SPEC, pcpu)),
        r#"{"invariants":["S3"]}"#,
    );
}

#[test]
fn s4_preferred_spread_pod_doubled_on_a_core() {
    let spread = r#"{"preferredCPUBindPolicy":"SpreadByPCPUs"}"#;
    let c = cluster(node("n1")).pod(lsr("db", "4,20", "2").annotation(RESOURCE_SPEC, spread));
    expect_none(&c, "{}");
    expect_one(
        &c,
        ALL_SOFT,
        "db",
        "S4: preferred SpreadByPCPUs cpuset 4,20 has CPUs 4,20 on one core while 15 other cores have a free CPU",
    );
    expect_none(
        &cluster(node("n1")).pod(lsr("db", "4-5", "2").annotation(RESOURCE_SPEC, spread)),
        ALL_SOFT,
    );
}

#[test]
fn s5_numa_allocate_strategy() {
    let only = r#"{"invariants":["S5"],"includeSoft":true}"#;
    // LeastAllocated (the default): two pods packed on NUMA node 0, NUMA node 1 empty.
    let packed = cluster(node("n1"))
        .pod(lsr("a", "1,17", "2"))
        .pod(lsr("b", "2,18", "2"));
    // a came first (tie: the lowest NUMA id); b should have gone to NUMA node 1.
    expect_one(
        &packed,
        only,
        "b",
        "S5: LeastAllocated node: when the pod was placed (older pods only), NUMA node 1 had 16 free CPUs, more than NUMA node 0 (14) where it sits",
    );
    expect_none(&packed, r#"{"invariants":["S5"]}"#);
    // Spread over both NUMA nodes: LeastAllocated is respected.
    expect_none(
        &cluster(node("n1"))
            .pod(lsr("a", "1,17", "2"))
            .pod(lsr("b", "9,25", "2")),
        only,
    );
    // MostAllocated by label: the lone pod on NUMA node 1 should have joined NUMA node 0.
    expect_one(
        &cluster(node("n1").label(LABEL_NUMA_ALLOCATE_STRATEGY, "MostAllocated"))
            .pod(lsr("a", "1-2,17-18", "4"))
            .pod(lsr("b", "9,25", "2")),
        only,
        "b",
        "S5: MostAllocated node: when the pod was placed (older pods only), NUMA node 0 had 12 free CPUs, fewer than NUMA node 1 (16) where it sits",
    );
    // The arg sets the default.
    expect_none(
        &cluster(node("n1"))
            .pod(lsr("a", "1-2,17-18", "4"))
            .pod(lsr("b", "9,25", "2")),
        r#"{"invariants":["S5"],"includeSoft":true,"numaScoringStrategy":"LeastAllocated"}"#,
    );
}

#[test]
fn invariant_selection_limits_what_is_checked() {
    let c = cluster(node("n1"))
        .pod(lsr("a", "6,22", "2"))
        .pod(lsr("b", "6,22", "2"))
        .pod(lsr("c", "4-5,20-21", "2"));
    assert_eq!(proposals(&c, "{}").len(), 2);
    expect_one(&c, r#"{"invariants":["H2"]}"#, "c", "H2: ");
    expect_one(&c, r#"{"invariants":["H8"]}"#, "b", "H8: ");
    expect_none(&c, r#"{"invariants":["H1","H13"]}"#);
    let run = c.run::<CpuOrchestration>(Deschedule, r#"{"invariants":["H99"]}"#);
    assert!(
        run.result
            .as_ref()
            .is_err_and(|e| e.contains("invariants[0]: unknown invariant \"H99\"")),
        "{:?}",
        run.result
    );
}

#[test]
fn several_violations_one_proposal_naming_the_others() {
    // 3 CPUs for a 2-CPU request (H2), partial cores (S1), and CPU 40 is not in the topology (H1).
    let got = proposals(&cluster(node("n1")).pod(lsr("db", "4-5,40", "2")), ALL_SOFT);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].1.starts_with("H1: "), "{got:?}");
    assert!(got[0].1.ends_with("(and 1 more violation: H2)"), "{got:?}");
}

#[test]
fn malformed_specs_are_logged_and_their_checks_skipped() {
    let c = cluster(node("n1")).pod(
        lsr("db", "4-5", "2")
            .annotation(RESOURCE_SPEC, "{not json")
            .annotation(NUMA_TOPOLOGY_SPEC, r#"{"numaTopologyPolicy":7}"#),
    );
    let run = c.run::<CpuOrchestration>(Deschedule, ALL_SOFT);
    run.assert_ok();
    // S1 needs the spec: skipped; S5 does not but the pod is alone. Nothing is proposed.
    assert!(run.proposals.is_empty(), "{:?}", run.proposals);
    let logs = run.log_messages();
    assert!(
        logs.iter().any(|l| l
            .starts_with("pod default/db: scheduling.koordinator.sh/resource-spec is malformed")
            && l.ends_with("its spec-based checks are skipped")),
        "{logs:?}"
    );
    assert!(
        logs.iter().any(|l| l.starts_with(
            "pod default/db: scheduling.koordinator.sh/numa-topology-spec is malformed"
        )),
        "{logs:?}"
    );
    assert!(
        logs.iter().any(|l| l.contains("2 malformed annotations")),
        "{logs:?}"
    );
    // Status-based checks still run: H2 needs no spec.
    expect_one(
        &cluster(node("n1")).pod(lsr("db", "4-5,20-21", "2").annotation(RESOURCE_SPEC, "{")),
        "{}",
        "db",
        "H2: ",
    );
}

#[test]
fn scope_args_and_the_evictor_decide_who_may_move() {
    let ns_pod = |ns: &str| {
        TestPod::new(ns, "db")
            .on_node("n1")
            .owned_by("ReplicaSet", "db")
            .cpu("2")
            .memory("1Gi")
            .guaranteed()
            .label(LABEL_QOS, "LSR")
            .label("app", "db")
            .annotation(RESOURCE_STATUS, r#"{"cpuset":"4-5,20-21"}"#)
    };
    let c = cluster(node("n1"))
        .pod(ns_pod("team-a"))
        .pod(ns_pod("team-b"));
    assert_eq!(proposals(&c, "{}").len(), 2);
    let got = proposals(&c, r#"{"evictableNamespaces":{"exclude":["team-a"]}}"#);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "db");
    let run = c.run::<CpuOrchestration>(
        Deschedule,
        r#"{"evictableNamespaces":{"include":["team-a"]}}"#,
    );
    assert_eq!(run.evicted(), [("team-a", "db")]);
    expect_none(&c, r#"{"labelSelector":{"matchLabels":{"app":"web"}}}"#);
    // A DaemonSet pod violates too but the evictor keeps it.
    let ds = cluster(node("n1")).pod(lsr("agent", "4-5,20-21", "2").owned_by("DaemonSet", "agent"));
    let run = ds.run::<CpuOrchestration>(Deschedule, "{}");
    run.assert_ok();
    assert!(run.proposals.is_empty());
    assert!(
        run.log_messages()
            .iter()
            .any(|l| l.contains("H2=1") && l.contains("1 not evictable")),
        "{:?}",
        run.log_messages()
    );
}

#[test]
fn summary_line_counts_nodes_violations_and_proposals() {
    let c = cluster(node("n1"))
        .pod(lsr("a", "6,22", "2"))
        .pod(lsr("b", "6,22", "2"))
        .pod(lsr("c", "4-5", "2"));
    let run = c.run::<CpuOrchestration>(Deschedule, "{}");
    run.assert_ok();
    let line = run
        .log_messages()
        .into_iter()
        .find(|l| l.starts_with("CpuOrchestration: "))
        .expect("summary line")
        .to_owned();
    assert_eq!(
        line,
        "CpuOrchestration: 2 nodes checked; violations: H8=1 S1=1 S5=2 (2 pods); 0 malformed \
         annotations; 0 not evictable; 1 candidate pods, 1 proposals, 0 refused"
    );
}

#[test]
fn limits_apply_through_the_evictor() {
    let c = cluster(node("n1"))
        .pod(lsr("a", "4-5,20-21", "2"))
        .pod(lsr("b", "6-7,22-23", "2"))
        .max_per_node(1);
    let run = c.run::<CpuOrchestration>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.proposals.len(), 1);
}
