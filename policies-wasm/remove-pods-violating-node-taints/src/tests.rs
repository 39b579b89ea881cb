//! Table-driven tests of RemovePodsViolatingNodeTaints against the SDK's native host (the same
//! evictor the server runs), after descheduler's `node_taint_test.go`, plus the reactions to
//! refusals and the conformance scenarios 037/040 in miniature.

use rebalancer_policy_sdk::testing::*;

use crate::RemovePodsViolatingNodeTaints;

/// A ReplicaSet pod on `node`.
fn pod(name: &str, node: &str) -> TestPod {
    TestPod::new("default", name)
        .on_node(node)
        .owned_by("ReplicaSet", name)
        .cpu("100m")
}

/// Tolerates `testTaint1=test1:NoSchedule` (descheduler's test taint).
fn tolerant(name: &str, node: &str) -> TestPod {
    pod(name, node).toleration("testTaint1", "test1", Some(NoSchedule))
}

fn tainted(name: &str) -> TestNode {
    TestNode::new(name).taint("testTaint1", "test1", NoSchedule)
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
        let run = run::<RemovePodsViolatingNodeTaints>(&case.cluster, Deschedule, case.args);
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
            assert_eq!(p.plugin, "RemovePodsViolatingNodeTaints", "{}", case.name);
        }
    }
}

#[test]
fn descheduler_node_taint_cases() {
    let n1 = || {
        TestCluster::new()
            .node(tainted("n1"))
            .node(TestNode::new("spare"))
    };
    let testing_taint = || TestNode::new("n2").taint("testingTaint1", "testing1", NoSchedule);
    check(vec![
        Case {
            name: "pods not tolerating the node taint are evicted",
            cluster: n1().pods([tolerant("p1", "n1"), pod("p2", "n1"), tolerant("p3", "n1")]),
            args: "{}",
            want: &["p2"],
        },
        Case {
            name: "a toleration of another taint does not help",
            cluster: n1().pods([
                tolerant("p1", "n1"),
                pod("p4", "n1").toleration("testTaintX1", "testX1", Some(NoSchedule)),
            ]),
            args: "{}",
            want: &["p4"],
        },
        Case {
            name: "a toleration with another value does not help; Exists does",
            cluster: n1().pods([
                pod("other-value", "n1").toleration("testTaint1", "test2", Some(NoSchedule)),
                pod("exists", "n1").toleration_exists("testTaint1", None),
                pod("everything", "n1").tolerate_everything(),
                pod("wrong-effect", "n1").toleration("testTaint1", "test1", Some(NoExecute)),
            ]),
            args: "{}",
            want: &["other-value", "wrong-effect"],
        },
        Case {
            name: "not evictable: critical, DaemonSet, local storage, mirror",
            cluster: TestCluster::new()
                .node(testing_taint())
                .node(TestNode::new("spare"))
                .pods([
                    pod("p7", "n2").priority(2_000_000_000),
                    pod("p8", "n2").owned_by("DaemonSet", "ds"),
                    pod("p9", "n2").host_path("data"),
                    pod("p10", "n2").mirror(),
                ]),
            args: "{}",
            want: &[],
        },
        Case {
            name: "evictLocalStoragePods lets the local-storage pod go",
            cluster: TestCluster::new()
                .node(testing_taint())
                .node(TestNode::new("spare"))
                .pods([
                    pod("p7", "n2").priority(2_000_000_000),
                    pod("p8", "n2").owned_by("DaemonSet", "ds"),
                    pod("p9", "n2").host_path("data"),
                    pod("p10", "n2").mirror(),
                ])
                .evictor_args(r#"{"evictLocalStoragePods":true}"#),
            args: "{}",
            want: &["p9"],
        },
        Case {
            name: "evictSystemCriticalPods lets the critical pod go",
            cluster: TestCluster::new()
                .node(tainted("n1"))
                .node(testing_taint())
                .pods([
                    pod("p2", "n1"),
                    pod("p7", "n2").priority(2_000_000_000),
                    pod("p9", "n2").host_path("data"),
                    pod("p10", "n2").mirror(),
                ])
                .evictor_args(r#"{"evictSystemCriticalPods":true}"#),
            args: "{}",
            want: &["p2", "p7"],
        },
        Case {
            name: "nodeFit: the other node's taint is not tolerated either",
            cluster: TestCluster::new()
                .node(tainted("n1"))
                .node(testing_taint())
                .pods([tolerant("p1", "n1"), pod("p2", "n1"), tolerant("p3", "n1")])
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            want: &[],
        },
        Case {
            name: "nodeFit: the other node does not match the pod's nodeSelector",
            cluster: TestCluster::new()
                .node(tainted("n1"))
                .node(TestNode::new("n3").label("datacenter", "east"))
                .pod(pod("p12", "n1").node_selector("datacenter", "west"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            want: &[],
        },
        Case {
            name: "nodeFit: the other node is cordoned",
            cluster: TestCluster::new()
                .node(tainted("n1"))
                .node(TestNode::new("n4").unschedulable())
                .pod(pod("p2", "n1"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            want: &[],
        },
        Case {
            name: "nodeFit: the other node has no room",
            cluster: TestCluster::new()
                .node(tainted("n1"))
                .node(TestNode::new("n6").cpu("1m").memory("1").pods(1))
                .pod(pod("p2", "n1"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            want: &[],
        },
        Case {
            name: "nodeFit: the other node fits",
            cluster: TestCluster::new()
                .node(tainted("n1"))
                .node(TestNode::new("n7"))
                .pod(pod("p2", "n1"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            want: &["p2"],
        },
        Case {
            name: "NoExecute taints are the kubelet's business",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").taint("gone", "", NoExecute))
                .node(TestNode::new("spare"))
                .pod(pod("p", "n1")),
            args: r#"{"includePreferNoSchedule":true}"#,
            want: &[],
        },
        Case {
            name: "terminal pods are not considered",
            cluster: n1().pods([
                pod("done", "n1").phase(PodPhase::Succeeded),
                pod("failed", "n1").phase(PodPhase::Failed),
                pod("pending", "n1").phase(PodPhase::Pending),
            ]),
            args: "{}",
            want: &["pending"],
        },
        Case {
            name: "pods on nodes out of scope stay",
            cluster: TestCluster::new()
                .node(tainted("n1").not_ready())
                .node(tainted("n2").label("pool", "other"))
                .node(tainted("n3"))
                .node(TestNode::new("n4"))
                .pods([pod("a", "n1"), pod("b", "n2"), pod("c", "n3")])
                .node_selector("pool!=other"),
            args: "{}",
            want: &["c"],
        },
        Case {
            name: "namespaces and label selector",
            cluster: n1().pods([
                pod("a", "n1").label("app", "x"),
                pod("b", "n1").label("app", "y"),
                TestPod::new("kube-system", "c")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "c")
                    .label("app", "x"),
            ]),
            args: r#"{"namespaces":{"exclude":["kube-system"]},"labelSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["x"]}]}}"#,
            want: &["a"],
        },
    ]);
}

#[test]
fn prefer_no_schedule_and_taint_lists() {
    let prefer = || {
        TestCluster::new()
            .node(TestNode::new("n5").taint("testTaint1", "test1", PreferNoSchedule))
            .node(TestNode::new("spare"))
            .pod(pod("p13", "n5").toleration("testTaint0", "test0", Some(PreferNoSchedule)))
    };
    let both = || {
        TestCluster::new()
            .node(
                TestNode::new("n7")
                    .taint("testTaint1", "test1", NoSchedule)
                    .taint("testingTaint1", "testing1", NoSchedule),
            )
            .node(TestNode::new("spare"))
    };
    let n1 = || {
        TestCluster::new()
            .node(tainted("n1"))
            .node(TestNode::new("spare"))
    };
    check(vec![
        Case {
            name: "PreferNoSchedule is ignored by default",
            cluster: prefer(),
            args: "{}",
            want: &[],
        },
        Case {
            name: "PreferNoSchedule with includePreferNoSchedule",
            cluster: prefer(),
            args: r#"{"includePreferNoSchedule":true}"#,
            want: &["p13"],
        },
        Case {
            name: "excluded by key",
            cluster: n1().pod(pod("p2", "n1")),
            args: r#"{"excludedTaints":["excludedTaint1","testTaint1"]}"#,
            want: &[],
        },
        Case {
            name: "excluded by key=value",
            cluster: n1().pod(pod("p2", "n1")),
            args: r#"{"excludedTaints":["testTaint1=test1"]}"#,
            want: &[],
        },
        Case {
            name: "excluded key=value with another value excludes nothing",
            cluster: n1().pod(pod("p2", "n1")),
            args: r#"{"excludedTaints":["testTaint1=test2"]}"#,
            want: &["p2"],
        },
        Case {
            name: "key= never matches a taint with an empty value",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").taint("bare", "", NoSchedule))
                .node(TestNode::new("spare"))
                .pod(pod("p", "n1")),
            args: r#"{"excludedTaints":["bare="]}"#,
            want: &["p"],
        },
        Case {
            name: "tolerating the included taint is enough, other taints are ignored",
            cluster: both().pod(tolerant("p1", "n7")),
            args: r#"{"includedTaints":["testTaint1=test1"]}"#,
            want: &[],
        },
        Case {
            name: "a taint that is not included is ignored",
            cluster: n1().pods([tolerant("p1", "n1"), pod("p2", "n1"), pod("p4", "n1")]),
            args: r#"{"includedTaints":["testTaint2=test2"]}"#,
            want: &[],
        },
        Case {
            name: "an included taint must be tolerated",
            cluster: n1().pods([tolerant("p1", "n1"), pod("p2", "n1"), tolerant("p3", "n1")]),
            args: r#"{"includedTaints":["testTaint1"]}"#,
            want: &["p2"],
        },
        Case {
            name: "without includedTaints every taint counts",
            cluster: both().pods([
                tolerant("p14", "n7"),
                tolerant("p15", "n7").toleration("testingTaint1", "testing1", Some(NoSchedule)),
            ]),
            args: "{}",
            want: &["p14"],
        },
        Case {
            name: "an empty includedTaints considers no taint (as descheduler)",
            cluster: both().pod(pod("p2", "n7")),
            args: r#"{"includedTaints":[]}"#,
            want: &[],
        },
        Case {
            name: "includedTaints null is absent",
            cluster: both().pod(pod("p2", "n7")),
            args: r#"{"includedTaints":null}"#,
            want: &["p2"],
        },
    ]);
}

#[test]
fn refusals() {
    let cluster = || {
        TestCluster::new()
            .node(tainted("n1"))
            .node(tainted("n2"))
            .node(TestNode::new("spare"))
            .pods([
                pod("a1", "n1"),
                pod("a2", "n1"),
                pod("b1", "n2"),
                pod("b2", "n2"),
            ])
    };
    check(vec![
        Case {
            name: "per-node limit: next node",
            cluster: cluster().max_per_node(1),
            args: "{}",
            want: &["a1", "b1"],
        },
        Case {
            name: "total limit: stop",
            cluster: cluster().max_total(1).max_per_node(2),
            args: "{}",
            want: &["a1"],
        },
        Case {
            name: "namespace limit: next pod",
            cluster: cluster()
                .pod(
                    TestPod::new("other", "c")
                        .on_node("n1")
                        .owned_by("ReplicaSet", "c"),
                )
                .max_per_namespace(1),
            args: "{}",
            want: &["a1", "c"],
        },
        Case {
            name: "PDB: next pod",
            cluster: cluster()
                .pod(pod("guarded", "n1").label("app", "g"))
                .pdb(TestPdb::new("default", "g").match_label("app", "g")),
            args: "{}",
            want: &["a1", "a2", "b1", "b2"],
        },
    ]);
}

#[test]
fn reasons_name_the_taints() {
    let cluster = TestCluster::new()
        .node(
            TestNode::new("worker-1")
                .taint("dedicated", "gpu", NoSchedule)
                .taint("spot", "", PreferNoSchedule)
                .taint("maintenance", "true", NoSchedule),
        )
        .node(TestNode::new("spare"))
        .pods([
            pod("none", "worker-1"),
            pod("gpu", "worker-1").toleration("dedicated", "gpu", None),
        ]);
    let r = run::<RemovePodsViolatingNodeTaints>(
        &cluster,
        Deschedule,
        r#"{"includePreferNoSchedule":true}"#,
    );
    r.assert_ok();
    let reasons: Vec<&str> = r.proposals.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "does not tolerate taints dedicated=gpu:NoSchedule, spot:PreferNoSchedule, \
             maintenance=true:NoSchedule of node worker-1",
            "does not tolerate taints spot:PreferNoSchedule, maintenance=true:NoSchedule of \
             node worker-1",
        ]
    );
    let r = run::<RemovePodsViolatingNodeTaints>(&cluster, Deschedule, "{}");
    assert_eq!(
        r.proposals[1].reason,
        "does not tolerate taint maintenance=true:NoSchedule of node worker-1"
    );
}

/// Conformance scenarios 037 and 040, shrunk to what decides them.
#[test]
fn conformance_in_miniature() {
    let api = |name: &str, node: &str| {
        pod(name, node)
            .toleration_exists("node.kubernetes.io/not-ready", Some(NoExecute))
            .toleration_exists("node.kubernetes.io/unreachable", Some(NoExecute))
    };
    check(vec![
        Case {
            name: "037 PreferNoSchedule",
            cluster: TestCluster::new()
                .node(TestNode::new("worker-01").taint("spot", "true", PreferNoSchedule))
                .node(TestNode::new("worker-02").taint("maintenance", "true", NoSchedule))
                .node(TestNode::new("worker-03"))
                .pods([
                    api("api-1", "worker-01"),
                    api("api-2", "worker-02"),
                    api("api-3", "worker-03"),
                    api("spot-ok", "worker-01").toleration_exists("spot", None),
                ]),
            args: r#"{"includePreferNoSchedule":true}"#,
            want: &["api-1", "api-2"],
        },
        Case {
            name: "040 includedTaints",
            cluster: TestCluster::new()
                .node(TestNode::new("worker-01").taint("dedicated", "gpu", NoSchedule))
                .node(TestNode::new("worker-02").taint("dedicated", "infra", NoSchedule))
                .node(TestNode::new("worker-03"))
                .pods([
                    api("web-1", "worker-01"),
                    api("web-2", "worker-02"),
                    api("web-3", "worker-03"),
                ]),
            args: r#"{"includedTaints":["dedicated=gpu"]}"#,
            want: &["web-1"],
        },
    ]);
}
