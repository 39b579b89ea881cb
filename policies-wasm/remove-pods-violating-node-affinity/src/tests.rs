//! Table-driven tests of RemovePodsViolatingNodeAffinity against the SDK's native host (the same
//! evictor and nodeFit the server runs), after descheduler's `node_affinity_test.go`, plus the
//! reactions to refusals and the conformance scenarios 032/035 in miniature.

use rebalancer_policy_sdk::testing::*;

use crate::RemovePodsViolatingNodeAffinity;

const REQUIRED: &str = r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution"]}"#;
const PREFERRED: &str =
    r#"{"nodeAffinityType":["preferredDuringSchedulingIgnoredDuringExecution"]}"#;
const BOTH: &str = r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution","preferredDuringSchedulingIgnoredDuringExecution"]}"#;

/// The label descheduler's tests put on the node a pod should run on.
const DESIRED: &str = "kubernetes.io/desiredNode";

fn pod(name: &str, node: &str) -> TestPod {
    TestPod::new("default", name)
        .on_node(node)
        .owned_by("ReplicaSet", name)
        .cpu("100m")
}

/// A pod that requires `DESIRED=yes`.
fn requires(name: &str, node: &str) -> TestPod {
    pod(name, node).require_node_affinity(TestTerm::new().expr(
        DESIRED,
        SelectorOperator::In,
        &["yes"],
    ))
}

/// A pod that prefers `DESIRED=yes` with weight 10.
fn prefers(name: &str, node: &str) -> TestPod {
    pod(name, node).prefer_node_affinity(
        10,
        TestTerm::new().expr(DESIRED, SelectorOperator::In, &["yes"]),
    )
}

fn desired(name: &str) -> TestNode {
    TestNode::new(name).label(DESIRED, "yes")
}

struct Case {
    name: &'static str,
    cluster: TestCluster,
    args: &'static str,
    /// Proposed pods, in order.
    want: &'static [&'static str],
}

fn check(cases: Vec<Case>) {
    for case in cases {
        let run = run::<RemovePodsViolatingNodeAffinity>(&case.cluster, Deschedule, case.args);
        run.assert_ok();
        assert_eq!(
            run.evicted_names(),
            case.want,
            "{}: refused {:?}, logs {:?}",
            case.name,
            run.refused_names(),
            run.log_messages()
        );
        for p in &run.proposals {
            assert_eq!(p.plugin, "RemovePodsViolatingNodeAffinity", "{}", case.name);
        }
    }
}

#[test]
fn required() {
    let cluster = || {
        TestCluster::new()
            .node(TestNode::new("n1"))
            .node(desired("n2"))
    };
    check(vec![
        Case {
            name: "the node no longer matches and another node does: evicted",
            cluster: cluster().pods([
                requires("p1", "n1"),
                requires("ok", "n2"),
                pod("free", "n1"),
            ]),
            args: REQUIRED,
            want: &["p1"],
        },
        Case {
            name: "only the preferred type configured: required affinity is not looked at",
            cluster: cluster().pod(requires("p1", "n1")),
            args: PREFERRED,
            want: &[],
        },
        Case {
            name: "a pod with only a nodeSelector is not considered",
            cluster: cluster().pod(pod("selector", "n1").node_selector(DESIRED, "yes")),
            args: REQUIRED,
            want: &[],
        },
        Case {
            name: "nodeSelector and required affinity both count once the pod has affinity",
            cluster: cluster().node(desired("n3").label("disk", "ssd")).pods([
                // The affinity matches n2 and n3, the nodeSelector only n3.
                requires("both", "n2").node_selector("disk", "ssd"),
            ]),
            args: REQUIRED,
            want: &["both"],
        },
        Case {
            name: "no node matches: the pod stays",
            cluster: TestCluster::new()
                .nodes([TestNode::new("n1"), TestNode::new("n2")])
                .pod(requires("p1", "n1")),
            args: REQUIRED,
            want: &[],
        },
        Case {
            name: "the matching node is cordoned: the pod stays",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(desired("n2").unschedulable())
                .pod(requires("p1", "n1")),
            args: REQUIRED,
            want: &[],
        },
        Case {
            name: "the matching node has a taint the pod does not tolerate",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(desired("n2").taint("dedicated", "x", NoSchedule))
                .pods([
                    requires("intolerant", "n1"),
                    requires("tolerant", "n1").toleration("dedicated", "x", None),
                ]),
            args: REQUIRED,
            want: &["tolerant"],
        },
        Case {
            name: "the matching node lacks room",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(desired("n2").cpu("1"))
                .pod(pod("filler", "n2").cpu("800m"))
                .pods([
                    requires("big", "n1").cpu("500m"),
                    requires("small", "n1").cpu("100m"),
                ]),
            args: REQUIRED,
            want: &["small"],
        },
        Case {
            name: "the matching node is outside the node selector: no fit",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").label("pool", "a"))
                .node(desired("n2").label("pool", "b"))
                .node(TestNode::new("n3").label("pool", "a"))
                .pod(requires("p1", "n1"))
                .node_selector("pool=a"),
            args: REQUIRED,
            want: &[],
        },
        Case {
            name: "not evictable pods stay",
            cluster: cluster().pods([
                requires("ds", "n1").owned_by("DaemonSet", "ds"),
                requires("critical", "n1").priority(2_000_000_000),
                requires("local", "n1").empty_dir("tmp"),
            ]),
            args: REQUIRED,
            want: &[],
        },
        Case {
            name: "terminal pods are not considered",
            cluster: cluster().pods([
                requires("done", "n1").phase(PodPhase::Succeeded),
                requires("failed", "n1").phase(PodPhase::Failed),
            ]),
            args: REQUIRED,
            want: &[],
        },
        Case {
            name: "namespaces and label selector",
            cluster: cluster().pods([
                requires("a", "n1").label("app", "a"),
                requires("b", "n1").label("app", "b"),
                TestPod::new("other", "c")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "c")
                    .label("app", "a")
                    .require_node_affinity(TestTerm::new().expr(
                        DESIRED,
                        SelectorOperator::In,
                        &["yes"],
                    )),
            ]),
            args: r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution"],"namespaces":{"include":["default"]},"labelSelector":{"matchLabels":{"app":"a"}}}"#,
            want: &["a"],
        },
        Case {
            name: "DefaultEvictor nodeFit agrees",
            cluster: cluster()
                .pod(requires("p1", "n1"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: REQUIRED,
            want: &["p1"],
        },
    ]);
}

#[test]
fn preferred() {
    let cluster = || {
        TestCluster::new()
            .node(TestNode::new("n1"))
            .node(desired("n2"))
    };
    check(vec![
        Case {
            name: "a better node exists: evicted",
            cluster: cluster().pods([
                prefers("p1", "n1"),
                prefers("happy", "n2"),
                pod("free", "n1"),
            ]),
            args: PREFERRED,
            want: &["p1"],
        },
        Case {
            name: "no node scores higher than the current one",
            cluster: TestCluster::new()
                .nodes([TestNode::new("n1"), TestNode::new("n2")])
                .pod(prefers("p1", "n1")),
            args: PREFERRED,
            want: &[],
        },
        Case {
            name: "weights add up over terms; the best node wins",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").label("zone", "a"))
                .node(TestNode::new("n2").label("zone", "b").label("disk", "ssd"))
                .node(TestNode::new("n3").label("zone", "a").label("disk", "ssd"))
                .pods([
                    // On n3 it scores 30 + 20 = 50, the best there is.
                    pod("at-best", "n3")
                        .prefer_node_affinity(
                            30,
                            TestTerm::new().expr("zone", SelectorOperator::In, &["a"]),
                        )
                        .prefer_node_affinity(
                            20,
                            TestTerm::new().expr("disk", SelectorOperator::Exists, &[]),
                        ),
                    // On n1 it scores 30; n3 scores 50.
                    pod("below-best", "n1")
                        .prefer_node_affinity(
                            30,
                            TestTerm::new().expr("zone", SelectorOperator::In, &["a"]),
                        )
                        .prefer_node_affinity(
                            20,
                            TestTerm::new().expr("disk", SelectorOperator::Exists, &[]),
                        ),
                ]),
            args: PREFERRED,
            want: &["below-best"],
        },
        Case {
            // descheduler checks that the pod fits *some* node, its own included (#1707).
            name: "as descheduler, the better node being full does not keep the pod",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(desired("n2").pods(1))
                .pod(pod("filler", "n2"))
                .pod(prefers("p1", "n1")),
            args: PREFERRED,
            want: &["p1"],
        },
        Case {
            name: "... unless the pod fits no node at all",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").unschedulable())
                .node(desired("n2").pods(1))
                .pod(pod("filler", "n2"))
                .pod(prefers("p1", "n1")),
            args: PREFERRED,
            want: &[],
        },
        Case {
            name: "... and DefaultEvictor's nodeFit looks at the other nodes only",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(desired("n2").pods(1))
                .pod(pod("filler", "n2"))
                .pod(prefers("p1", "n1"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: PREFERRED,
            want: &[],
        },
        Case {
            name: "both types: a pod is proposed once",
            cluster: cluster().pods([
                requires("req", "n1").prefer_node_affinity(
                    10,
                    TestTerm::new().expr(DESIRED, SelectorOperator::In, &["yes"]),
                ),
                prefers("pref", "n1"),
            ]),
            args: BOTH,
            want: &["req", "pref"],
        },
    ]);
}

#[test]
fn refusals() {
    let cluster = || {
        TestCluster::new()
            .node(TestNode::new("n1"))
            .node(TestNode::new("n2"))
            .node(desired("n3"))
            .pods([
                requires("a1", "n1"),
                requires("a2", "n1"),
                requires("b1", "n2"),
                requires("b2", "n2"),
            ])
    };
    check(vec![
        Case {
            name: "per-node limit: next node",
            cluster: cluster().max_per_node(1),
            args: REQUIRED,
            want: &["a1", "b1"],
        },
        Case {
            name: "total limit: stop",
            cluster: cluster().max_total(3),
            args: BOTH,
            want: &["a1", "a2", "b1"],
        },
        Case {
            name: "PDB: next pod",
            cluster: cluster()
                .pod(requires("guarded", "n1").label("app", "g"))
                .pdb(TestPdb::new("default", "g").match_label("app", "g")),
            args: REQUIRED,
            want: &["a1", "a2", "b1", "b2"],
        },
    ]);
    // After the total limit, the next type is tried and refused too, as in descheduler.
    let cluster = cluster().pod(prefers("p", "n1")).max_total(1);
    let r = run::<RemovePodsViolatingNodeAffinity>(&cluster, Deschedule, BOTH);
    assert_eq!(r.evicted_names(), ["a1"]);
    assert_eq!(r.refused_names(), ["a2", "p"]);
}

#[test]
fn reasons_are_readable() {
    let cluster = TestCluster::new()
        .node(TestNode::new("n1").label("disk", "hdd"))
        .node(desired("n2").label("disk", "ssd"))
        .node(desired("n3").label("disk", "hdd"))
        .pods([
            requires("affinity", "n1"),
            requires("selector", "n2").node_selector("disk", "hdd"),
            prefers("preferred", "n1"),
        ]);
    let r = run::<RemovePodsViolatingNodeAffinity>(&cluster, Deschedule, BOTH);
    r.assert_ok();
    let reasons: Vec<(&str, &str)> = r
        .proposals
        .iter()
        .map(|p| (p.name.as_str(), p.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "affinity",
                "node n1 no longer matches the pod's required node affinity; it fits node n2"
            ),
            (
                "selector",
                "node n2 no longer matches the pod's nodeSelector; it fits node n3"
            ),
            (
                "preferred",
                "node n2 scores 10 on the pod's preferred node affinity, its node n1 only 0"
            ),
        ]
    );
}

/// Conformance scenarios 032 and 035, shrunk to what decides them.
#[test]
fn conformance_in_miniature() {
    let in_pool = |name: &str, cpu: &str| {
        pod(name, "worker-01")
            .cpu(cpu)
            .memory("128Mi")
            .require_node_affinity(TestTerm::new().expr("pool", SelectorOperator::In, &["general"]))
    };
    check(vec![
        Case {
            name: "032 required, no room",
            cluster: TestCluster::new()
                .node(TestNode::new("worker-01").label("pool", "legacy"))
                .node(
                    TestNode::new("worker-02")
                        .label("pool", "general")
                        .cpu("2")
                        .memory("4Gi"),
                )
                .pod(pod("filler", "worker-02").cpu("1500m").memory("1Gi"))
                .pods([
                    in_pool("big-1", "1"),
                    in_pool("big-2", "1"),
                    in_pool("small", "100m"),
                ]),
            args: REQUIRED,
            want: &["small"],
        },
        Case {
            name: "035 nodeSelector only",
            cluster: TestCluster::new()
                .node(TestNode::new("worker-01").label("disktype", "hdd"))
                .node(TestNode::new("worker-02").label("disktype", "ssd"))
                .node(TestNode::new("worker-03").label("disktype", "ssd"))
                .pods([
                    pod("plain-selector", "worker-01").node_selector("disktype", "ssd"),
                    pod("notin", "worker-01").require_node_affinity(TestTerm::new().expr(
                        "disktype",
                        SelectorOperator::NotIn,
                        &["hdd"],
                    )),
                ]),
            args: REQUIRED,
            want: &["notin"],
        },
    ]);
}
