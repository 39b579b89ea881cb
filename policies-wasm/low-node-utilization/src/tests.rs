//! Table-driven tests of LowNodeUtilization against the SDK's native host (the same evictor the
//! server runs), after descheduler's `lownodeutilization_test.go`: classification, numberOfNodes,
//! deviation thresholds, limits, namespaces, eviction order, pool exhaustion and the taint check.
//!
//! Nodes have 4 cpu, 16Gi memory and 10 pod slots unless a case says otherwise; workload pods
//! request 400m cpu (10% of a node), so a node with 8 of them is at 80% cpu and 80% pods.

use rebalancer_policy_sdk::Refusal;
use rebalancer_policy_sdk::testing::*;

use crate::LowNodeUtilization;

const CPU_PODS_20_50: &str =
    r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50}}"#;

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

/// n1 at 80%, n2 empty (underutilized), n3 at 40% (appropriately utilized).
fn base() -> TestCluster {
    TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n1", "a", 8))
        .pods(fill("n3", "c", 4))
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
        let run = run::<LowNodeUtilization>(&case.cluster, Balance, case.args);
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
    }
}

#[test]
fn classification_and_when_to_act() {
    check(vec![
        Case {
            // cpu capped at 2000m and pods at 5: three 400m pods bring n1 down to exactly 50%.
            name: "over → under until the node is at its target",
            cluster: base(),
            args: CPU_PODS_20_50,
            evicted: &["a1", "a2", "a3"],
        },
        Case {
            name: "a cordoned empty node is not underutilized, so nothing moves",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2").unschedulable(), node("n3")])
                .pods(fill("n1", "a", 8))
                .pods(fill("n3", "c", 4)),
            args: CPU_PODS_20_50,
            evicted: &[],
        },
        Case {
            name: "a cordoned node is not a target, but another underutilized node is",
            cluster: TestCluster::new()
                .nodes([
                    node("n1"),
                    node("n2").unschedulable(),
                    node("n3"),
                    node("n4"),
                ])
                .pods(fill("n1", "a", 8))
                .pods(fill("n3", "c", 4)),
            args: CPU_PODS_20_50,
            evicted: &["a1", "a2", "a3"],
        },
        Case {
            name: "numberOfNodes: one underutilized node is not more than 1",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
                      "numberOfNodes":1}"#,
            evicted: &[],
        },
        Case {
            name: "numberOfNodes: two underutilized nodes are more than 1",
            cluster: base().node(node("n4")),
            args: r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
                      "numberOfNodes":1}"#,
            evicted: &["a1", "a2", "a3"],
        },
        Case {
            name: "all nodes underutilized",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":90,"pods":90},"targetThresholds":{"cpu":95,"pods":95}}"#,
            evicted: &[],
        },
        Case {
            name: "no node above its target",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":80,"pods":80}}"#,
            evicted: &[],
        },
        Case {
            name: "no node underutilized",
            cluster: base().pods(fill("n2", "b", 3)),
            args: CPU_PODS_20_50,
            evicted: &[],
        },
        Case {
            // With cpu alone listed, n3 (40% cpu) is neither; pods no longer matter for the
            // classification but still cap the node (unlisted: full capacity).
            name: "unlisted resources are ignored by the classification",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50}}"#,
            evicted: &["a1", "a2", "a3"],
        },
        Case {
            // A not-Ready node is outside the scope: with it, n2 would not be the only node.
            name: "every node in scope underutilized, the not-Ready one aside",
            cluster: TestCluster::new()
                .nodes([node("n1").not_ready(), node("n2")])
                .pods(fill("n1", "a", 8)),
            args: CPU_PODS_20_50,
            evicted: &[],
        },
        Case {
            name: "usage exactly at the threshold is underutilized",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods(fill("n1", "a", 8))
                .pods(fill("n2", "b", 2)),
            args: CPU_PODS_20_50,
            evicted: &["a1", "a2", "a3"],
        },
    ]);
}

#[test]
fn headroom_pool_and_limits() {
    check(vec![
        Case {
            // n2 offers 500m cpu (50% of 1 cpu): after 400m + 400m the pool is negative.
            name: "pool exhaustion stops the eviction",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2").cpu("1")])
                .pods(fill("n1", "a", 8)),
            args: CPU_PODS_20_50,
            evicted: &["a1", "a2"],
        },
        Case {
            // Memory is not listed, yet the underutilized nodes' free memory is a budget too:
            // n2 offers 16Gi − 15Gi of the 1Gi pods.
            name: "unlisted resources still count in the pool",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods((1..=8).map(|i| pod("web", &format!("a{i}"), "n1").memory("1Gi")))
                .pod(
                    TestPod::new("web", "big")
                        .on_node("n2")
                        .owned_by("ReplicaSet", "big")
                        .memory("15Gi"),
                ),
            args: r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50}}"#,
            evicted: &["a1"],
        },
        Case {
            name: "evictionLimits.node caps each node",
            cluster: base().node(node("n4")).pods(fill("n4", "d", 8)),
            args: r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
                      "evictionLimits":{"node":1}}"#,
            evicted: &["a1", "d1"],
        },
        Case {
            name: "evictionLimits.node of 0 evicts nothing",
            cluster: base(),
            args: r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
                      "evictionLimits":{"node":0}}"#,
            evicted: &[],
        },
        Case {
            // The busier node first: n4 (9 pods) before n1 (8 pods).
            name: "overutilized nodes by descending usage",
            cluster: base().node(node("n4")).pods(fill("n4", "d", 9)),
            args: r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
                      "evictionLimits":{"node":1}}"#,
            evicted: &["d1", "a1"],
        },
        Case {
            name: "excluded namespaces count towards usage but are not evicted",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods((1..=4).map(|i| pod("jobs", &format!("j{i}"), "n1")))
                .pods(fill("n1", "w", 4)),
            args: r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
                      "evictableNamespaces":{"exclude":["jobs"]}}"#,
            evicted: &["w1", "w2", "w3"],
        },
        Case {
            name: "pods the evictor protects count towards usage but are not evicted",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods((1..=4).map(|i| {
                    TestPod::new("kube-system", &format!("ds{i}"))
                        .on_node("n1")
                        .owned_by("DaemonSet", "ds")
                        .cpu("400m")
                }))
                .pods(fill("n1", "w", 4)),
            args: CPU_PODS_20_50,
            evicted: &["w1", "w2", "w3"],
        },
        Case {
            name: "extended resources",
            cluster: TestCluster::new()
                .nodes([
                    node("n1").allocatable("example.com/gpu", "4"),
                    node("n2").allocatable("example.com/gpu", "4"),
                    // Reports no gpu: its usage share counts as 0, so it is underutilized too.
                    node("n3"),
                ])
                .pods(
                    (1..=4)
                        .map(|i| pod("ml", &format!("g{i}"), "n1").request("example.com/gpu", "1")),
                )
                .pods(fill("n1", "w", 2)),
            args: r#"{"thresholds":{"example.com/gpu":20},"targetThresholds":{"example.com/gpu":50}}"#,
            evicted: &["g1", "g2"],
        },
    ]);
}

#[test]
fn deviation_thresholds() {
    // cpu 10%, 50%, 90% → mean 50%: underutilized ≤ 40%, overutilized > 60%.
    let cluster = || {
        TestCluster::new()
            .nodes([node("n1"), node("n2"), node("n3")])
            .pods(fill("n1", "a", 1))
            .pods(fill("n2", "b", 5))
            .pods(fill("n3", "c", 9))
    };
    check(vec![
        Case {
            name: "mean ± deviation",
            cluster: cluster(),
            args: r#"{"thresholds":{"cpu":10},"targetThresholds":{"cpu":10},"useDeviationThresholds":true}"#,
            evicted: &["c1", "c2", "c3"],
        },
        Case {
            // 50 − 10 = 40 and 50 + 40 = 90: n3 at 90% is not above.
            name: "nothing above mean + deviation",
            cluster: cluster(),
            args: r#"{"thresholds":{"cpu":10},"targetThresholds":{"cpu":40},"useDeviationThresholds":true}"#,
            evicted: &[],
        },
        Case {
            // Low = clamp(50 − 60) = 0: only an idle node would be underutilized.
            name: "thresholds are clamped to [0, 100]",
            cluster: cluster(),
            args: r#"{"thresholds":{"cpu":60},"targetThresholds":{"cpu":10},"useDeviationThresholds":true}"#,
            evicted: &[],
        },
        Case {
            name: "clamped at 0, an idle node is underutilized",
            cluster: cluster().node(node("n4")),
            // mean (10+50+90+0)/4 = 37.5: low = 0, high = 47.5 → n2 (50%) and n3 over. n4
            // offers 1900m (47.5% of 4 cpu): five pods leave n3, then the pool is spent and n2
            // keeps its pods.
            args: r#"{"thresholds":{"cpu":60},"targetThresholds":{"cpu":10},"useDeviationThresholds":true}"#,
            evicted: &["c1", "c2", "c3", "c4", "c5"],
        },
    ]);
}

#[test]
fn eviction_order() {
    check(vec![
        Case {
            name: "priority ascending, unset first",
            cluster: TestCluster::new().nodes([node("n1"), node("n2")]).pods([
                pod("web", "p100", "n1").priority(100),
                pod("web", "unset-1", "n1"),
                pod("web", "zero-1", "n1").priority(0),
                pod("web", "unset-2", "n1"),
                pod("web", "p1000", "n1").priority(1000),
                pod("web", "zero-2", "n1").priority(0),
                pod("web", "p100-2", "n1").priority(100),
                pod("web", "neg", "n1").priority(-5),
            ]),
            args: CPU_PODS_20_50,
            evicted: &["unset-1", "unset-2", "neg"],
        },
        Case {
            // pods only: 8 of 10 slots, capped at 5 → three go.
            name: "QoS BestEffort < Burstable < Guaranteed, prefer-no-eviction last",
            cluster: TestCluster::new().nodes([node("n1"), node("n2")]).pods([
                TestPod::new("web", "g1")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .cpu("100m")
                    .memory("64Mi")
                    .guaranteed(),
                TestPod::new("web", "u1-prefers-staying")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .cpu("100m")
                    .prefer_no_eviction(),
                TestPod::new("web", "b1")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs"),
                TestPod::new("web", "u2")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .cpu("100m"),
                TestPod::new("web", "b2")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs"),
                TestPod::new("web", "u3")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .cpu("100m"),
                TestPod::new("web", "g2")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .cpu("100m")
                    .memory("64Mi")
                    .guaranteed(),
                TestPod::new("web", "b3-prefers-staying")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .prefer_no_eviction(),
            ]),
            args: r#"{"thresholds":{"pods":20},"targetThresholds":{"pods":50}}"#,
            evicted: &["b1", "b2", "b3-prefers-staying"],
        },
        Case {
            name: "prefer-no-eviction goes after its QoS peers",
            cluster: TestCluster::new().nodes([node("n1"), node("n2")]).pods([
                pod("web", "u1-prefers-staying", "n1").prefer_no_eviction(),
                pod("web", "u2", "n1"),
                pod("web", "u3", "n1"),
                pod("web", "u4", "n1"),
                pod("web", "u5", "n1"),
                pod("web", "u6", "n1"),
                pod("web", "u7", "n1"),
                pod("web", "u8", "n1"),
            ]),
            args: CPU_PODS_20_50,
            evicted: &["u2", "u3", "u4"],
        },
        Case {
            name: "priority beats QoS",
            cluster: TestCluster::new().nodes([node("n1"), node("n2")]).pods([
                TestPod::new("web", "besteffort-high")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .priority(10),
                pod("web", "burstable-low-1", "n1").priority(1),
                pod("web", "burstable-low-2", "n1").priority(1),
                pod("web", "burstable-low-3", "n1").priority(1),
                pod("web", "burstable-low-4", "n1").priority(1),
                pod("web", "burstable-low-5", "n1").priority(1),
                pod("web", "burstable-low-6", "n1").priority(1),
                pod("web", "burstable-low-7", "n1").priority(1),
            ]),
            args: CPU_PODS_20_50,
            evicted: &["burstable-low-1", "burstable-low-2", "burstable-low-3"],
        },
    ]);
}

#[test]
fn destination_taints() {
    let web = |name: &str| pod("web", name, "n1").toleration("dedicated", "web", Some(NoSchedule));
    check(vec![
        Case {
            name: "only pods tolerating the underutilized node's taint move",
            cluster: TestCluster::new()
                .nodes([node("n1"), node("n2").taint("dedicated", "web", NoSchedule)])
                .pods(fill("n1", "x", 4))
                .pods([web("w1"), web("w2"), web("w3"), web("w4")]),
            args: CPU_PODS_20_50,
            evicted: &["w1", "w2", "w3"],
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
                .pods(fill("n1", "x", 4))
                .pods(["wild1", "wild2"].map(|n| pod("web", n, "n1").tolerate_everything()))
                .pods(["both1", "both2"].map(|n| {
                    pod("web", n, "n1")
                        .toleration("dedicated", "web", Some(NoSchedule))
                        .toleration_exists("zone", None)
                })),
            args: CPU_PODS_20_50,
            evicted: &["both1", "both2"],
        },
        Case {
            name: "any one underutilized node will do",
            cluster: TestCluster::new()
                .nodes([
                    node("n1"),
                    node("n2").taint("dedicated", "web", NoSchedule),
                    node("n3").taint("dedicated", "db", NoSchedule),
                ])
                .pods(fill("n1", "x", 4))
                .pods([
                    pod("db", "d1", "n1").toleration("dedicated", "db", Some(NoSchedule)),
                    web("w1"),
                    web("w2"),
                    web("w3"),
                ]),
            args: CPU_PODS_20_50,
            evicted: &["d1", "w1", "w2"],
        },
    ]);
}

#[test]
fn a_refusal_inside_a_batch_resumes_after_the_refused_pod() {
    // A node's pods go to the host as one batch, which stops at the first refusal. The refused
    // pod frees nothing, so the walk resumes after it: the same proposals as one pod at a time.
    let plain = run::<LowNodeUtilization>(&base(), Balance, CPU_PODS_20_50);
    plain.assert_ok();
    assert_eq!(plain.evicted_names(), ["a1", "a2", "a3"]);

    let blocked = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pod(pod("web", "a1", "n1").label("guarded", "yes"))
        .pods(fill("n1", "a", 8).into_iter().skip(1))
        .pods(fill("n3", "c", 4))
        .pdb(TestPdb::new("web", "guard").match_label("guarded", "yes"));
    let run = run::<LowNodeUtilization>(&blocked, Balance, CPU_PODS_20_50);
    run.assert_ok();
    assert_eq!(run.refused_names(), ["a1"]);
    assert!(matches!(
        run.refusals[0].refusal,
        Refusal::DisruptionBudget(_)
    ));
    assert_eq!(run.evicted_names(), ["a2", "a3", "a4"]);
}

#[test]
fn refusals() {
    // n1 and n4 both over; the global per-node limit allows one eviction per node.
    let cluster = base()
        .node(node("n4"))
        .pods(fill("n4", "d", 8))
        .max_per_node(1);
    let run = run::<LowNodeUtilization>(&cluster, Balance, CPU_PODS_20_50);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1", "d1"]);
    assert_eq!(run.refused_names(), ["a2", "d2"]);
    assert!(run.refusals.iter().all(|r| r.refusal == Refusal::NodeLimit));

    let cluster = base()
        .node(node("n4"))
        .pods(fill("n4", "d", 8))
        .max_total(2);
    let run = cluster.run::<LowNodeUtilization>(Balance, CPU_PODS_20_50);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1", "a2"]);
    assert_eq!(run.refused_names(), ["a3"]);
    assert_eq!(run.refusals[0].refusal, Refusal::TotalLimit);

    // A PDB refusal skips the pod; its usage stays on the node, so one more pod goes.
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2")])
        .pod(pod("web", "guarded", "n1").label("app", "guarded"))
        .pods(fill("n1", "a", 7))
        .pdb(
            TestPdb::new("web", "guard")
                .match_label("app", "guarded")
                .disruptions_allowed(0),
        );
    let run = cluster.run::<LowNodeUtilization>(Balance, CPU_PODS_20_50);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1", "a2", "a3"]);
    assert_eq!(run.refused_names(), ["guarded"]);
}

#[test]
fn reasons_describe_the_node() {
    let run = run::<LowNodeUtilization>(&base(), Balance, CPU_PODS_20_50);
    run.assert_ok();
    assert_eq!(
        run.proposals[0].reason,
        "node n1 is above its target utilization (cpu 80.0%, pods 80.0% of allocatable; targets \
         cpu 50%, pods 50%); 1 underutilized node (cpu ≤ 20%, pods ≤ 20%) has room for its pods"
    );
    // The node's usage when it was picked, shared by all the pods it gives up.
    assert_eq!(run.proposals[1].reason, run.proposals[0].reason);
}

#[test]
fn invalid_args_fail_the_run() {
    for (args, want) in [
        (
            "{}",
            "thresholds: thresholds config is not valid: no resource threshold is configured",
        ),
        (
            r#"{"thresholds":{"cpu":60},"targetThresholds":{"cpu":50}}"#,
            "thresholds.cpu: thresholds' cpu percentage is greater than targetThresholds'",
        ),
        (
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{"source":"KubernetesMetrics"}}"#,
            "metricsUtilization.source: actual usage from metrics-server",
        ),
        (
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"evictableNamespaces":{"include":["web"]}}"#,
            "evictableNamespaces.include",
        ),
    ] {
        let run = run::<LowNodeUtilization>(&base(), Balance, args);
        let err = run.result.expect_err(args);
        assert!(err.contains(want), "{args}: {err}");
        assert!(run.proposals.is_empty());
    }
}

/// Runs each case with `off` args and with `on` args; `want` is (evicted off, evicted on).
fn check_option(
    off: &str,
    on: &str,
    cases: Vec<(&str, TestCluster, &[&str], &[&str])>,
) -> Vec<TestRun> {
    let mut runs = Vec::new();
    for (name, cluster, want_off, want_on) in cases {
        for (args, want) in [(off, want_off), (on, want_on)] {
            let run = run::<LowNodeUtilization>(&cluster, Balance, args);
            if let Err(e) = &run.result {
                panic!("{name} with {args}: policy failed: {e}");
            }
            assert_eq!(
                run.evicted_names(),
                want,
                "{name} with {args}: refused {:?}, logs {:?}",
                run.refused_names(),
                run.log_messages()
            );
            runs.push(run);
        }
    }
    runs
}

/// `targetResourceFit` (Rebalancer extension, descheduler #1237): off, the pooled room of all
/// underutilized nodes is all that is checked; on, one destination must have the room.
#[test]
fn target_resource_fit_option() {
    const ON: &str = r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
        "targetResourceFit":true}"#;
    const OFF_EXPLICIT: &str = r#"{"thresholds":{"cpu":20,"pods":20},
        "targetThresholds":{"cpu":50,"pods":50},"targetResourceFit":false}"#;
    // n2 and n3 at 20% (two 400m pods each): 1200m cpu and 3 pod slots of room each below 50%.
    let two_under = || {
        TestCluster::new()
            .nodes([node("n1"), node("n2"), node("n3")])
            .pods(fill("n2", "u", 2))
            .pods(fill("n3", "v", 2))
    };
    let sized = |name: &str, cpu: &str| pod("web", name, "n1").cpu(cpu);
    let runs = check_option(
        CPU_PODS_20_50,
        ON,
        vec![
            (
                // n1: a 1600m pod + four 400m pods = 80%. The pool (2400m) takes the big pod,
                // which alone brings n1 to 40%; no single node has 1600m of room, so with the
                // option the small pods move instead, to the node with the most room each time.
                "a pod bigger than any single destination's room",
                two_under()
                    .pod(sized("big", "1600m"))
                    .pods(fill("n1", "x", 4)),
                &["big"],
                &["x1", "x2", "x3"],
            ),
            (
                // Five 700m pods on n1 (87.5%). Each destination has room for one of them; the
                // pool would take three. The chosen destination's room shrinks after each move.
                "room is taken as pods move",
                two_under().pods((1..=5).map(|i| sized(&format!("p{i}"), "700m"))),
                &["p1", "p2", "p3"],
                &["p1", "p2"],
            ),
            (
                // The pool only tracks the thresholds' resources and cpu, memory, pods; with the
                // option any other requested resource must fit a destination's allocatable too.
                "an extended resource no destination has",
                TestCluster::new()
                    .nodes([node("n1").allocatable("example.com/gpu", "1"), node("n2")])
                    .pod(pod("web", "gpu", "n1").request("example.com/gpu", "1"))
                    .pods(fill("n1", "x", 7)),
                &["gpu", "x1", "x2"],
                &["x1", "x2", "x3"],
            ),
            (
                "an extended resource a destination has",
                TestCluster::new()
                    .nodes([
                        node("n1").allocatable("example.com/gpu", "1"),
                        node("n2").allocatable("example.com/gpu", "1"),
                    ])
                    .pod(pod("web", "gpu", "n1").request("example.com/gpu", "1"))
                    .pods(fill("n1", "x", 7)),
                &["gpu", "x1", "x2"],
                &["gpu", "x1", "x2"],
            ),
            (
                // n2 has room but a taint the pod does not tolerate; n3 is tolerated but has
                // 1200m of room for a 1600m pod. Off, the taint check and the pool pass
                // separately.
                "room must be on a destination the pod tolerates",
                TestCluster::new()
                    .nodes([
                        node("n1"),
                        node("n2").taint("dedicated", "db", NoSchedule),
                        node("n3"),
                    ])
                    .pods(fill("n3", "v", 2))
                    .pod(sized("big", "1600m"))
                    .pods(fill("n1", "x", 4)),
                &["big"],
                &["x1", "x2", "x3"],
            ),
            (
                "enough room everywhere: no difference",
                base(),
                &["a1", "a2", "a3"],
                &["a1", "a2", "a3"],
            ),
        ],
    );
    // The explicit `false` is the default.
    let run = run::<LowNodeUtilization>(
        &two_under()
            .pod(sized("big", "1600m"))
            .pods(fill("n1", "x", 4)),
        Balance,
        OFF_EXPLICIT,
    );
    assert_eq!(run.evicted_names(), ["big"]);
    // With the option on, reasons name the destination: n2 and n3 tie (first wins), then n3 has
    // more room left, then they tie again.
    let on = &runs[1];
    let targets: Vec<&str> = on
        .proposals
        .iter()
        .map(|p| p.reason.rsplit("; ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        targets,
        [
            "node n2 has room for it",
            "node n3 has room for it",
            "node n2 has room for it"
        ]
    );
    assert!(
        on.log_messages()
            .iter()
            .any(|m| m.contains("web/big stays (targetResourceFit)")),
        "{:?}",
        on.log_messages()
    );
    assert!(
        on.log_messages()
            .iter()
            .any(|m| m.contains("1 kept for lack of room on a single destination")),
        "{:?}",
        on.log_messages()
    );
}

/// `perTaintTolerations` (Rebalancer extension): off, descheduler's count check; on, each
/// NoSchedule/NoExecute taint of some destination must be tolerated.
#[test]
fn per_taint_tolerations_option() {
    const ON: &str = r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
        "perTaintTolerations":true}"#;
    let two_taints = || {
        node("n2")
            .taint("dedicated", "web", NoSchedule)
            .taint("zone", "z", PreferNoSchedule)
    };
    check_option(
        CPU_PODS_20_50,
        ON,
        vec![
            (
                "one wildcard toleration covers two taints",
                TestCluster::new()
                    .nodes([node("n1"), two_taints()])
                    .pods(fill("n1", "x", 4))
                    .pods(["wild1", "wild2"].map(|n| pod("web", n, "n1").tolerate_everything()))
                    .pods(["both1", "both2"].map(|n| {
                        pod("web", n, "n1")
                            .toleration("dedicated", "web", Some(NoSchedule))
                            .toleration_exists("zone", None)
                    })),
                &["both1", "both2"],
                &["wild1", "wild2", "both1"],
            ),
            (
                "PreferNoSchedule does not repel",
                TestCluster::new()
                    .nodes([node("n1"), node("n2").taint("zone", "z", PreferNoSchedule)])
                    .pods(fill("n1", "x", 8)),
                &[],
                &["x1", "x2", "x3"],
            ),
            (
                "a NoSchedule toleration alone is enough, without one for PreferNoSchedule",
                TestCluster::new()
                    .nodes([node("n1"), two_taints()])
                    .pods(fill("n1", "x", 5))
                    .pods(["web1", "web2", "web3"].map(|n| {
                        pod("web", n, "n1")
                            .toleration("dedicated", "web", Some(NoSchedule))
                            .toleration_exists("other", None)
                    })),
                &[],
                &["web1", "web2", "web3"],
            ),
            (
                "NoExecute still repels",
                TestCluster::new()
                    .nodes([node("n1"), node("n2").taint("dedicated", "web", NoExecute)])
                    .pods(fill("n1", "x", 4))
                    .pods(["w1", "w2", "w3", "w4"].map(|n| {
                        pod("web", n, "n1").toleration("dedicated", "web", Some(NoSchedule))
                    })),
                &[],
                &[],
            ),
            (
                "a toleration for another value does not match",
                TestCluster::new()
                    .nodes([node("n1"), node("n2").taint("dedicated", "web", NoSchedule)])
                    .pods(fill("n1", "x", 4))
                    .pods(["d1", "d2", "d3", "d4"].map(|n| {
                        pod("web", n, "n1").toleration("dedicated", "db", Some(NoSchedule))
                    })),
                &[],
                &[],
            ),
        ],
    );
    // Both options together: the destination search applies the per-taint check.
    let both = r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
        "perTaintTolerations":true,"targetResourceFit":true}"#;
    let cluster = TestCluster::new()
        .nodes([node("n1"), two_taints()])
        .pods(fill("n1", "x", 4))
        .pods(
            ["wild1", "wild2", "wild3", "wild4"].map(|n| pod("web", n, "n1").tolerate_everything()),
        );
    let with_both = run::<LowNodeUtilization>(&cluster, Balance, both);
    with_both.assert_ok();
    assert_eq!(with_both.evicted_names(), ["wild1", "wild2", "wild3"]);
    let fit_only = run::<LowNodeUtilization>(
        &cluster,
        Balance,
        r#"{"thresholds":{"cpu":20,"pods":20},"targetThresholds":{"cpu":50,"pods":50},
            "targetResourceFit":true}"#,
    );
    fit_only.assert_ok();
    assert!(
        fit_only.proposals.is_empty(),
        "{:?}",
        fit_only.evicted_names()
    );
}
