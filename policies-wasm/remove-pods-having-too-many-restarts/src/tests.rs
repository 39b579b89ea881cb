//! Table-driven tests of RemovePodsHavingTooManyRestarts against the SDK's native host (the same
//! evictor the server runs), after descheduler's `toomanyrestarts_test.go`, plus the reactions
//! to refusals and the conformance scenarios 053/056 in miniature.

use rebalancer_policy_sdk::testing::*;

use crate::RemovePodsHavingTooManyRestarts;

fn nodes(names: &[&str]) -> Vec<TestNode> {
    names.iter().map(|n| TestNode::new(n)).collect()
}

/// A ReplicaSet pod on `node` whose `main` container restarted `restarts` times.
fn pod(name: &str, node: &str, restarts: i32) -> TestPod {
    TestPod::new("default", name)
        .on_node(node)
        .owned_by("ReplicaSet", name)
        .restarts(restarts)
}

fn crashing(name: &str, restarts: i32) -> TestContainer {
    TestContainer::new(name, "img")
        .restarts(restarts)
        .waiting("CrashLoopBackOff")
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
        let run = run::<RemovePodsHavingTooManyRestarts>(&case.cluster, Deschedule, case.args);
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
            assert_eq!(p.plugin, "RemovePodsHavingTooManyRestarts", "{}", case.name);
        }
    }
}

#[test]
fn restart_threshold() {
    let two = || TestCluster::new().nodes(nodes(&["n1", "n2"]));
    check(vec![
        Case {
            name: "at or above the threshold, most restarts first",
            cluster: two().pods([
                pod("p9", "n1", 9),
                pod("p10", "n1", 10),
                pod("p11", "n1", 11),
            ]),
            args: r#"{"podRestartThreshold":10}"#,
            want: &["p11", "p10"],
        },
        Case {
            name: "restarts of all app containers add up",
            cluster: two().pods([
                pod("two-containers", "n1", 6)
                    .container(TestContainer::new("side", "img").restarts(4)),
                pod("one", "n1", 6),
            ]),
            args: r#"{"podRestartThreshold":10}"#,
            want: &["two-containers"],
        },
        Case {
            name: "init container restarts only with includingInitContainers",
            cluster: two().pod(
                pod("init", "n1", 3).init_container(TestContainer::new("i", "img").restarts(30)),
            ),
            args: r#"{"podRestartThreshold":10}"#,
            want: &[],
        },
        Case {
            name: "... and with it",
            cluster: two().pod(
                pod("init", "n1", 3).init_container(TestContainer::new("i", "img").restarts(30)),
            ),
            args: r#"{"podRestartThreshold":10,"includingInitContainers":true}"#,
            want: &["init"],
        },
        Case {
            name: "node by node: order is per node",
            cluster: two().pods([
                pod("a-20", "n1", 20),
                pod("b-90", "n2", 90),
                pod("a-50", "n1", 50),
                pod("b-30", "n2", 30),
            ]),
            args: r#"{"podRestartThreshold":1}"#,
            want: &["a-50", "a-20", "b-90", "b-30"],
        },
        Case {
            name: "ties keep snapshot order",
            cluster: two().pods([pod("x", "n1", 5), pod("y", "n1", 5), pod("z", "n1", 7)]),
            args: r#"{"podRestartThreshold":5}"#,
            want: &["z", "x", "y"],
        },
        Case {
            name: "any phase is considered",
            cluster: two().pods([
                pod("failed", "n1", 12).phase(PodPhase::Failed),
                pod("pending", "n1", 11).phase(PodPhase::Pending),
            ]),
            args: r#"{"podRestartThreshold":10}"#,
            want: &["failed", "pending"],
        },
        Case {
            name: "not evictable: DaemonSet, mirror, critical, local storage, terminating",
            cluster: two().pods([
                pod("ds", "n1", 50).owned_by("DaemonSet", "ds"),
                pod("mirror", "n1", 50).mirror(),
                pod("critical", "n1", 50).priority(2_000_000_000),
                pod("local", "n1", 50).empty_dir("tmp"),
                pod("going", "n1", 50).terminating(),
                pod("plain", "n1", 50),
            ]),
            args: r#"{"podRestartThreshold":10}"#,
            want: &["plain"],
        },
        Case {
            name: "nodeFit: the only other node is cordoned",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").unschedulable())
                .pod(pod("p", "n1", 50))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: r#"{"podRestartThreshold":10}"#,
            want: &[],
        },
        Case {
            name: "namespaces and label selector",
            cluster: two().pods([
                pod("a", "n1", 50).label("app", "x"),
                pod("b", "n1", 40).label("app", "y"),
                TestPod::new("kube-system", "c")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "c")
                    .label("app", "x")
                    .restarts(60),
            ]),
            args: r#"{"podRestartThreshold":10,"namespaces":{"include":["default"]},"labelSelector":{"matchLabels":{"app":"x"}}}"#,
            want: &["a"],
        },
        Case {
            name: "pods on nodes out of scope stay",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").label("pool", "a"))
                .node(TestNode::new("n2").label("pool", "b"))
                .node(TestNode::new("n3").label("pool", "a"))
                .pods([pod("a", "n1", 50), pod("b", "n2", 60)])
                .node_selector("pool=a"),
            args: r#"{"podRestartThreshold":10}"#,
            want: &["a"],
        },
    ]);
}

#[test]
fn states() {
    let two = || TestCluster::new().nodes(nodes(&["n1", "n2"]));
    check(vec![
        Case {
            name: "Running",
            cluster: two().pods([
                pod("running", "n1", 20),
                pod("pending", "n1", 30).phase(PodPhase::Pending),
            ]),
            args: r#"{"podRestartThreshold":10,"states":["Running"]}"#,
            want: &["running"],
        },
        Case {
            name: "CrashLoopBackOff of an app container",
            cluster: two().pods([
                pod("crashing", "n1", 0).main_container(crashing("main", 20)),
                pod("restarting", "n1", 30),
            ]),
            args: r#"{"podRestartThreshold":10,"states":["CrashLoopBackOff"]}"#,
            want: &["crashing"],
        },
        Case {
            name: "CrashLoopBackOff of an init container only with includingInitContainers",
            cluster: two().pod(
                pod("init-crash", "n1", 0)
                    .phase(PodPhase::Pending)
                    .init_container(crashing("init", 20)),
            ),
            args: r#"{"podRestartThreshold":10,"states":["CrashLoopBackOff"]}"#,
            want: &[],
        },
        Case {
            name: "... and with it",
            cluster: two().pod(
                pod("init-crash", "n1", 0)
                    .phase(PodPhase::Pending)
                    .init_container(crashing("init", 20)),
            ),
            args: r#"{"podRestartThreshold":10,"states":["CrashLoopBackOff"],"includingInitContainers":true}"#,
            want: &["init-crash"],
        },
        Case {
            name: "states are ORed",
            cluster: two().pods([
                pod("running", "n1", 20),
                pod("crash", "n1", 0)
                    .phase(PodPhase::Pending)
                    .main_container(crashing("main", 30)),
                pod("pending", "n1", 40).phase(PodPhase::Pending),
            ]),
            args: r#"{"podRestartThreshold":10,"states":["Running","CrashLoopBackOff"]}"#,
            want: &["crash", "running"],
        },
    ]);
}

#[test]
fn refusals() {
    let cluster = || {
        TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
            pod("a1", "n1", 10),
            pod("a2", "n1", 20),
            pod("b1", "n2", 30),
            pod("b2", "n2", 40),
        ])
    };
    check(vec![
        Case {
            name: "per-node limit: next node",
            cluster: cluster().max_per_node(1),
            args: r#"{"podRestartThreshold":1}"#,
            want: &["a2", "b2"],
        },
        Case {
            name: "total limit: stop",
            cluster: cluster().max_total(3),
            args: r#"{"podRestartThreshold":1}"#,
            want: &["a2", "a1", "b2"],
        },
        Case {
            name: "PDB: next pod",
            cluster: cluster()
                .pod(pod("guarded", "n1", 99).label("app", "g"))
                .pdb(TestPdb::new("default", "g").match_label("app", "g")),
            args: r#"{"podRestartThreshold":1}"#,
            want: &["a2", "a1", "b2", "b1"],
        },
    ]);
}

#[test]
fn reasons_are_readable() {
    let cluster = TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
        pod("plain", "n1", 12),
        pod("crash", "n2", 0)
            .phase(PodPhase::Pending)
            .init_container(crashing("migrate", 11)),
    ]);
    let reasons = |args: &str| -> Vec<String> {
        let r = run::<RemovePodsHavingTooManyRestarts>(&cluster, Deschedule, args);
        r.assert_ok();
        r.proposals.iter().map(|p| p.reason.clone()).collect()
    };
    assert_eq!(
        reasons(r#"{"podRestartThreshold":10}"#),
        ["restarted 12 times (threshold 10)"]
    );
    assert_eq!(
        reasons(
            r#"{"podRestartThreshold":10,"includingInitContainers":true,"states":["Running","CrashLoopBackOff"]}"#
        ),
        [
            "restarted 12 times (threshold 10, init containers included); pod is Running",
            "restarted 11 times (threshold 10, init containers included); init container \
             migrate is waiting: CrashLoopBackOff"
        ]
    );
}

/// Conformance scenarios 053 and 056, shrunk to what decides them.
#[test]
fn conformance_in_miniature() {
    let three = || TestCluster::new().nodes(nodes(&["worker-01", "worker-02", "worker-03"]));
    let svc = |i: usize, node: &str, restarts: i32| {
        pod(&format!("svc{i}-{}", &node[7..]), node, restarts)
    };
    check(vec![
        Case {
            name: "053 init containers",
            cluster: three().pods([
                pod("init-looper", "worker-01", 3).init_container(
                    TestContainer::new("migrate", "img")
                        .restarts(30)
                        .terminated("Completed", 0),
                ),
                pod("main-looper", "worker-02", 12),
                pod("quiet", "worker-03", 0).init_container(
                    TestContainer::new("migrate", "img")
                        .restarts(5)
                        .terminated("Completed", 0),
                ),
            ]),
            args: r#"{"podRestartThreshold":10,"includingInitContainers":true}"#,
            want: &["init-looper", "main-looper"],
        },
        Case {
            name: "056 per-node limit",
            cluster: TestCluster::new()
                .nodes(nodes(&["worker-01", "worker-02"]))
                .pods(
                    [16, 41, 91, 8, 61]
                        .into_iter()
                        .enumerate()
                        .map(|(i, r)| svc(i, "worker-01", r)),
                )
                .pods(
                    [17, 42, 92, 9, 62]
                        .into_iter()
                        .enumerate()
                        .map(|(i, r)| svc(i, "worker-02", r)),
                )
                .max_per_node(2),
            args: r#"{"podRestartThreshold":10}"#,
            want: &["svc2-01", "svc4-01", "svc2-02", "svc4-02"],
        },
    ]);
}
