//! Table-driven tests of HighNodeUtilization against the SDK's native host (the same evictor the
//! server runs), after descheduler's `highnodeutilization_test.go`: classification (cordoned
//! sources, schedulable destinations), numberOfNodes, the destination pool, eviction modes,
//! namespaces, eviction order, destination taints and the reactions to refusals.
//!
//! Nodes have 4 cpu, 16Gi memory and 10 pod slots unless a case says otherwise; workload pods
//! request 400m cpu (10% of a node).

use rebalancer_policy_sdk::Refusal;
use rebalancer_policy_sdk::testing::*;

use crate::HighNodeUtilization;

const CPU_20: &str = r#"{"thresholds":{"cpu":20}}"#;

fn node(name: &str) -> TestNode {
    TestNode::new(name).cpu("4").memory("16Gi").pods(10)
}

fn pod(namespace: &str, name: &str, node: &str) -> TestPod {
    TestPod::new(namespace, name)
        .on_node(node)
        .owned_by("ReplicaSet", "rs")
        .cpu("400m")
}

/// `n` pods `{prefix}1..` in namespace `web` on `node`.
fn fill(node: &str, prefix: &str, n: usize) -> Vec<TestPod> {
    (1..=n)
        .map(|i| pod("web", &format!("{prefix}{i}"), node))
        .collect()
}

/// n1 at 10% (underutilized), n2 at 50% and n3 at 60% (destinations).
fn base() -> TestCluster {
    TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n1", "a", 1))
        .pods(fill("n2", "b", 5))
        .pods(fill("n3", "c", 6))
}

struct Case {
    name: &'static str,
    cluster: TestCluster,
    args: &'static str,
    /// The proposed pods, in order.
    evicted: &'static [&'static str],
}

fn check(cases: Vec<Case>) {
    for case in cases {
        let run = run::<HighNodeUtilization>(&case.cluster, Balance, case.args);
        if let Err(e) = &run.result {
            panic!("{}: policy failed: {e}", case.name);
        }
        assert_eq!(
            run.evicted_names(),
            case.evicted,
            "{}: refused {:?}, logs {:?}",
            case.name,
            run.refused_names(),
            run.log_messages()
        );
        for p in &run.proposals {
            assert_eq!(p.plugin, "HighNodeUtilization", "{}", case.name);
        }
    }
}

#[test]
fn classification_and_when_to_act() {
    check(vec![
        Case {
            name: "the underutilized node is drained",
            cluster: base(),
            args: CPU_20,
            evicted: &["a1"],
        },
        Case {
            name: "usage exactly at the threshold is underutilized",
            cluster: base().pods(fill("n1", "x", 1)),
            args: CPU_20,
            evicted: &["a1", "x1"],
        },
        Case {
            name: "a cordoned underutilized node is drained too",
            cluster: TestCluster::new()
                .nodes([node("n1").unschedulable(), node("n2")])
                .pods(fill("n1", "a", 1))
                .pods(fill("n2", "b", 5)),
            args: CPU_20,
            evicted: &["a1"],
        },
        Case {
            name: "a cordoned busy node is no destination",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2").unschedulable()])
                .pods(fill("n1", "a", 1))
                .pods(fill("n2", "b", 5)),
            args: CPU_20,
            evicted: &[],
        },
        Case {
            name: "numberOfNodes: one underutilized node is not more than 1",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":20},"numberOfNodes":1}"#,
            evicted: &[],
        },
        Case {
            name: "numberOfNodes: two underutilized nodes are more than 1",
            cluster: base().node(node("n4")).pods(fill("n4", "d", 2)),
            args: r#"{"thresholds":{"cpu":20},"numberOfNodes":1}"#,
            evicted: &["a1", "d1", "d2"],
        },
        Case {
            name: "all nodes underutilized",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":60}}"#,
            evicted: &[],
        },
        Case {
            name: "no node underutilized",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":5}}"#,
            evicted: &[],
        },
        Case {
            // With cpu alone listed, n1's 9 pods (90% of its slots) do not matter.
            name: "unlisted resources are ignored by the classification",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods((1..=9).map(|i| pod("web", &format!("a{i}"), "n1").cpu("10m")))
                .pods(fill("n2", "b", 5)),
            args: CPU_20,
            evicted: &["a1", "a2", "a3", "a4", "a5"],
        },
        Case {
            // Listed pods: n1 has 1 of 10 slots used, n2 5 of 10.
            name: "every listed resource must be at or below its threshold",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":20,"pods":5}}"#,
            evicted: &[],
        },
        Case {
            name: "a not-Ready node is out of scope: every node left is underutilized",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2").not_ready()])
                .pods(fill("n1", "a", 1))
                .pods(fill("n2", "b", 5)),
            args: CPU_20,
            evicted: &[],
        },
        Case {
            name: "the policy nodeSelector narrows the scope",
            cluster: base().node_selector("kubernetes.io/hostname!=n3"),
            args: CPU_20,
            evicted: &["a1"],
        },
    ]);
}

#[test]
fn drain_order_and_pool() {
    check(vec![
        Case {
            // n4 (1 pod of 100m) is emptier than n1 (1 pod of 400m): it is drained first.
            name: "underutilized nodes by ascending usage",
            cluster: base()
                .node(node("n4"))
                .pod(pod("web", "d1", "n4").cpu("100m")),
            args: CPU_20,
            evicted: &["d1", "a1"],
        },
        Case {
            // n2 is the only destination and has 400m left: one pod fits, then the pool is 0.
            name: "the pass stops when the destinations' cpu is used up",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods(fill("n1", "a", 2))
                .pods(fill("n2", "b", 9)),
            args: CPU_20,
            evicted: &["a1"],
        },
        Case {
            // Pods are not listed, yet the destinations' free pod slots are a budget: n2 has 1.
            name: "unlisted resources still count in the pool",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods((1..=2).map(|i| pod("web", &format!("a{i}"), "n1").cpu("10m")))
                .pods((1..=9).map(|i| pod("web", &format!("b{i}"), "n2").cpu("300m"))),
            args: CPU_20,
            evicted: &["a1"],
        },
        Case {
            name: "the pool spans several destinations and source nodes",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2"), node("n3"), node("n4")])
                .pods(fill("n1", "a", 2))
                .pods(fill("n2", "b", 1))
                .pods(fill("n3", "c", 9))
                .pods(fill("n4", "d", 9)),
            args: CPU_20,
            evicted: &["b1", "a1"],
        },
    ]);
}

#[test]
fn a_listed_resource_the_destinations_lack_stops_the_pass() {
    // n2 reports no gpu (0% of it) but is busy on cpu: it is the destination, and the pool has
    // no gpu to offer, so nothing moves.
    let cluster = TestCluster::new()
        .nodes([node("n1").allocatable("example.com/gpu", "4"), node("n2")])
        .pods(fill("n1", "a", 1))
        .pods(fill("n2", "b", 5));
    let run = run::<HighNodeUtilization>(
        &cluster,
        Balance,
        r#"{"thresholds":{"example.com/gpu":20,"cpu":20}}"#,
    );
    run.assert_ok();
    assert!(run.proposals.is_empty());
    let summary = run.log_messages().join("\n");
    assert!(
        summary.contains("1 underutilized, 1 destinations, 0 proposals")
            && summary.contains("the destination nodes have no example.com/gpu left"),
        "{summary}"
    );
}

#[test]
fn candidates() {
    check(vec![
        Case {
            name: "OnlyThresholdingResources: pods without a cpu request stay",
            cluster: base().pods([
                TestPod::new("web", "besteffort")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "be"),
                TestPod::new("web", "memory-only")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "mem")
                    .memory("512Mi"),
            ]),
            args: r#"{"thresholds":{"cpu":20},"evictionModes":["OnlyThresholdingResources"]}"#,
            evicted: &["a1"],
        },
        Case {
            name: "without an eviction mode they go too, BestEffort first",
            cluster: base().pods([
                TestPod::new("web", "besteffort")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "be"),
                TestPod::new("web", "memory-only")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "mem")
                    .memory("512Mi"),
            ]),
            args: CPU_20,
            evicted: &["besteffort", "a1", "memory-only"],
        },
        Case {
            name: "a request in an init container counts",
            cluster: base().pod(
                TestPod::new("web", "init-cpu")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "init")
                    .init_container(TestContainer::new("setup", "busybox").cpu("100m")),
            ),
            args: r#"{"thresholds":{"cpu":20},"evictionModes":["OnlyThresholdingResources"]}"#,
            evicted: &["a1", "init-cpu"],
        },
        Case {
            name: "excluded namespaces count towards usage but are not evicted",
            cluster: base().pod(pod("jobs", "j1", "n1").cpu("100m")),
            args: r#"{"thresholds":{"cpu":20},"evictableNamespaces":{"exclude":["jobs"]}}"#,
            evicted: &["a1"],
        },
        Case {
            name: "pods the evictor protects are not evicted",
            cluster: base().pod(
                TestPod::new("kube-system", "ds1")
                    .on_node("n1")
                    .owned_by("DaemonSet", "ds")
                    .cpu("100m"),
            ),
            args: CPU_20,
            evicted: &["a1"],
        },
        Case {
            name: "terminal pods neither count nor move",
            cluster: base().pods([
                pod("web", "done", "n1").cpu("2").phase(PodPhase::Succeeded),
                pod("web", "failed", "n1").cpu("2").phase(PodPhase::Failed),
            ]),
            args: CPU_20,
            evicted: &["a1"],
        },
    ]);
}

#[test]
fn eviction_order() {
    check(vec![Case {
        name: "priority ascending, unset first, then QoS, prefer-no-eviction last",
        cluster: base().pods([
            pod("web", "p100", "n1").cpu("10m").priority(100),
            pod("web", "guaranteed", "n1")
                .cpu("10m")
                .memory("10Mi")
                .guaranteed(),
            pod("web", "prefers-staying", "n1")
                .cpu("10m")
                .prefer_no_eviction(),
            pod("web", "neg", "n1").cpu("10m").priority(-5),
            TestPod::new("web", "besteffort")
                .on_node("n1")
                .owned_by("ReplicaSet", "be"),
        ]),
        args: CPU_20,
        evicted: &[
            "besteffort",
            "a1",
            "prefers-staying",
            "guaranteed",
            "neg",
            "p100",
        ],
    }]);
}

#[test]
fn destination_taints() {
    let web = |name: &str| pod("web", name, "n1").toleration("dedicated", "web", Some(NoSchedule));
    check(vec![
        Case {
            name: "only pods tolerating a destination's taints move",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2").taint("dedicated", "web", NoSchedule)])
                .pods(fill("n1", "x", 1))
                .pod(web("w1"))
                .pods(fill("n2", "b", 5)),
            args: r#"{"thresholds":{"cpu":30}}"#,
            evicted: &["w1"],
        },
        Case {
            // Descheduler's crude check: as many tolerations as taints, every effect included.
            name: "one wildcard toleration does not cover two taints",
            cluster: TestCluster::new()
                .nodes([
                    node("n1"),
                    node("n2").taint("dedicated", "web", NoSchedule).taint(
                        "zone",
                        "z",
                        PreferNoSchedule,
                    ),
                ])
                .pod(pod("web", "wild", "n1").tolerate_everything())
                .pod(
                    pod("web", "both", "n1")
                        .toleration("dedicated", "web", Some(NoSchedule))
                        .toleration_exists("zone", None),
                )
                .pods(fill("n2", "b", 5)),
            args: r#"{"thresholds":{"cpu":30}}"#,
            evicted: &["both"],
        },
        Case {
            name: "any one destination will do",
            cluster: TestCluster::new()
                .nodes([
                    node("n1"),
                    node("n2").taint("dedicated", "web", NoSchedule),
                    node("n3"),
                ])
                .pods(fill("n1", "x", 1))
                .pods(fill("n2", "b", 5))
                .pods(fill("n3", "c", 5)),
            args: CPU_20,
            evicted: &["x1"],
        },
    ]);
}

#[test]
fn refusals() {
    // n1 and n4 both underutilized; the global per-node limit allows one eviction per node.
    let cluster = base()
        .node(node("n4"))
        .pods(fill("n4", "d", 2))
        .max_per_node(1);
    let run = run::<HighNodeUtilization>(&cluster, Balance, CPU_20);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1", "d1"]);
    assert_eq!(run.refused_names(), ["d2"]);
    assert_eq!(run.refusals[0].refusal, Refusal::NodeLimit);

    // The total limit ends the pass.
    let cluster = base()
        .node(node("n4"))
        .pods(fill("n4", "d", 2))
        .max_total(2);
    let run = cluster.run::<HighNodeUtilization>(Balance, CPU_20);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1", "d1"]);
    assert_eq!(run.refused_names(), ["d2"]);
    assert_eq!(run.refusals[0].refusal, Refusal::TotalLimit);

    // A PDB refusal skips the pod; the next one goes.
    let cluster = base()
        .pod(
            pod("web", "guarded", "n1")
                .cpu("100m")
                .label("app", "guarded"),
        )
        .pdb(
            TestPdb::new("web", "guard")
                .match_label("app", "guarded")
                .disruptions_allowed(0),
        );
    let run = cluster.run::<HighNodeUtilization>(Balance, CPU_20);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1"]);
    assert_eq!(run.refused_names(), ["guarded"]);
    assert!(matches!(
        run.refusals[0].refusal,
        Refusal::DisruptionBudget(_)
    ));

    // nodeFit in PreEvictionFilter: the pod fits no other node, so it is not even proposed.
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2")])
        .pod(pod("web", "big", "n1").cpu("500m"))
        .pods(fill("n2", "b", 9))
        .evictor_args(r#"{"nodeFit":true}"#);
    let run = cluster.run::<HighNodeUtilization>(Balance, CPU_20);
    run.assert_ok();
    assert!(run.proposals.is_empty());
    assert!(run.refusals.is_empty());
}

#[test]
fn reasons_describe_the_node() {
    let run =
        run::<HighNodeUtilization>(&base(), Balance, r#"{"thresholds":{"cpu":20,"pods":50}}"#);
    run.assert_ok();
    assert_eq!(
        run.proposals[0].reason,
        "node n1 is underutilized (cpu 10.0% ≤ 20%, pods 10.0% ≤ 50% of allocatable); 2 busier \
         schedulable nodes have room for its pods"
    );
    let cordoned = TestCluster::new()
        .nodes([node("n1").unschedulable(), node("n2")])
        .pods(fill("n1", "a", 1))
        .pods(fill("n2", "b", 5));
    let run = cordoned.run::<HighNodeUtilization>(Balance, CPU_20);
    assert_eq!(
        run.proposals[0].reason,
        "node n1 is underutilized and cordoned (cpu 10.0% ≤ 20% of allocatable); 1 busier \
         schedulable node has room for its pods"
    );
}

#[test]
fn invalid_args_fail_the_run() {
    for (args, want) in [
        ("{}", "thresholds: no resource threshold is configured"),
        (
            r#"{"thresholds":{"cpu":120}}"#,
            "thresholds.cpu: cpu threshold not in [0, 100] range",
        ),
        (
            r#"{"thresholds":{"cpu":20},"evictionModes":["All"]}"#,
            "evictionModes[0]: invalid eviction mode All",
        ),
        (
            r#"{"thresholds":{"cpu":20},"evictableNamespaces":{"include":["web"]}}"#,
            "evictableNamespaces.include",
        ),
    ] {
        let run = run::<HighNodeUtilization>(&base(), Balance, args);
        let err = run.result.expect_err(args);
        assert!(err.contains(want), "{args}: {err}");
        assert!(run.proposals.is_empty());
    }
}

/// Conformance scenario 022 (evictionModes [OnlyThresholdingResources] with a cpu-only
/// threshold), rebuilt with the builders: three nodes are underutilized; the DaemonSet pods are
/// protected and the pods without a cpu request stay.
#[test]
fn only_thresholding_resources_scenario() {
    let ds = |node: &str| {
        TestPod::new("monitoring", &format!("node-exporter-{node}"))
            .on_node(node)
            .owned_by("DaemonSet", "node-exporter")
            .cpu("50m")
            .memory("64Mi")
            .priority(0)
    };
    let rs = |ns: &str, owner: &str, name: &str, node: &str, prio: i32| {
        TestPod::new(ns, name)
            .on_node(node)
            .owned_by("ReplicaSet", owner)
            .priority(prio)
    };
    let workers = ["w1", "w2", "w3", "w4", "w5"];
    let cluster = TestCluster::new()
        .nodes(workers.map(|n| TestNode::new(n).cpu("4").memory("16Gi").pods(110)))
        .pods(workers.map(ds))
        .pods((1..=4).map(|i| {
            rs("shop", "api", &format!("api-{i}"), "w1", 1000)
                .cpu("500m")
                .memory("1Gi")
        }))
        .pods((1..=3).map(|i| {
            rs("web", "web", &format!("web-{i}"), "w2", 500)
                .cpu("400m")
                .memory("512Mi")
        }))
        .pod(
            rs("ops", "cron-ui", "cron-ui-1", "w3", 10)
                .cpu("200m")
                .memory("256Mi"),
        )
        .pod(rs("ops", "besteffort", "besteffort-1", "w4", 20))
        .pod(rs("ops", "mem-only", "mem-only-1", "w4", 30).memory("512Mi"))
        .pods((1..=2).map(|i| {
            rs("monitoring", "metrics", &format!("metrics-{i}"), "w5", 40)
                .cpu("300m")
                .memory("2Gi")
        }));
    let run = run::<HighNodeUtilization>(
        &cluster,
        Balance,
        r#"{"thresholds":{"cpu":20},"evictionModes":["OnlyThresholdingResources"]}"#,
    );
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["cron-ui-1", "metrics-1", "metrics-2"]);
}

/// `perTaintTolerations` (Rebalancer extension): off, descheduler's count check; on, each
/// NoSchedule/NoExecute taint of some destination must be tolerated.
#[test]
fn per_taint_tolerations_option() {
    const OFF: &str = r#"{"thresholds":{"cpu":30}}"#;
    const ON: &str = r#"{"thresholds":{"cpu":30},"perTaintTolerations":true}"#;
    let two_taints = || {
        node("n2")
            .taint("dedicated", "web", NoSchedule)
            .taint("zone", "z", PreferNoSchedule)
    };
    // (name, cluster, evicted off, evicted on); n1 is underutilized, n2 the only destination.
    let cases: Vec<(&str, TestCluster, &[&str], &[&str])> = vec![
        (
            "one wildcard toleration covers two taints",
            TestCluster::new()
                .nodes([node("n1"), two_taints()])
                .pod(pod("web", "wild", "n1").tolerate_everything())
                .pod(
                    pod("web", "both", "n1")
                        .toleration("dedicated", "web", Some(NoSchedule))
                        .toleration_exists("zone", None),
                )
                .pods(fill("n2", "b", 5)),
            &["both"],
            &["wild", "both"],
        ),
        (
            "PreferNoSchedule does not repel",
            TestCluster::new()
                .nodes([node("n1"), node("n2").taint("zone", "z", PreferNoSchedule)])
                .pods(fill("n1", "x", 2))
                .pods(fill("n2", "b", 5)),
            &[],
            &["x1", "x2"],
        ),
        (
            "NoExecute still repels",
            TestCluster::new()
                .nodes([node("n1"), node("n2").taint("dedicated", "web", NoExecute)])
                .pod(pod("web", "w1", "n1").toleration("dedicated", "web", Some(NoSchedule)))
                .pods(fill("n2", "b", 5)),
            &[],
            &[],
        ),
    ];
    for (name, cluster, off, on) in cases {
        for (args, want) in [(OFF, off), (ON, on)] {
            let run = run::<HighNodeUtilization>(&cluster, Balance, args);
            run.assert_ok();
            assert_eq!(
                run.evicted_names(),
                want,
                "{name} with {args}: refused {:?}, logs {:?}",
                run.refused_names(),
                run.log_messages()
            );
        }
    }
}
