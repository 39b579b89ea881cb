//! Table-driven tests of RemoveFailedPods against the SDK's native host (the same evictor the
//! server runs), after descheduler's `failedpods_test.go`, plus the reactions to refusals and
//! the conformance scenarios 066/069/072 in miniature.

use rebalancer_policy_sdk::testing::*;

use crate::RemoveFailedPods;

const DAY: i64 = 86_400;

fn nodes(names: &[&str]) -> Vec<TestNode> {
    names.iter().map(|n| TestNode::new(n)).collect()
}

/// A failed pod of Job `name` on `node`, created a day before the snapshot time.
fn failed(name: &str, node: &str) -> TestPod {
    TestPod::new("default", name)
        .on_node(node)
        .owned_by("Job", name)
        .phase(PodPhase::Failed)
}

fn terminated(reason: &str, code: i32) -> TestContainer {
    TestContainer::new("main", "img").terminated(reason, code)
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
        let run = run::<RemoveFailedPods>(&case.cluster, Deschedule, case.args);
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
            assert_eq!(p.plugin, "RemoveFailedPods", "{}", case.name);
        }
    }
}

#[test]
fn failed_pods() {
    let two = || TestCluster::new().nodes(nodes(&["n1", "n2"]));
    check(vec![
        Case {
            name: "only failed pods",
            cluster: two().pods([
                failed("failed", "n1"),
                failed("running", "n1").phase(PodPhase::Running),
                failed("pending", "n1").phase(PodPhase::Pending),
                failed("succeeded", "n2").phase(PodPhase::Succeeded),
                failed("unknown", "n2").phase(PodPhase::Unknown),
            ]),
            args: "{}",
            want: &["failed"],
        },
        Case {
            name: "node by node, snapshot order",
            cluster: two().pods([
                failed("b", "n2"),
                failed("a", "n1"),
                failed("c", "n2"),
                failed("d", "n1"),
            ]),
            args: "{}",
            want: &["a", "d", "b", "c"],
        },
        Case {
            name: "default minimum age is an hour",
            cluster: two().pods([
                failed("old", "n1").created_ago_secs(3600),
                failed("young", "n1").created_ago_secs(3599),
            ]),
            args: "{}",
            want: &["old"],
        },
        Case {
            name: "explicit minimum age",
            cluster: two().pods([
                failed("old", "n1").created_ago_secs(2 * DAY),
                failed("young", "n1").created_ago_secs(DAY),
            ]),
            args: r#"{"minPodLifetimeSeconds":100000}"#,
            want: &["old"],
        },
        Case {
            name: "a pod created in the future is young, not ancient",
            cluster: two().pods([
                failed("future", "n1").created_ago_secs(-3600),
                failed("old", "n1"),
            ]),
            args: "{}",
            want: &["old"],
        },
        Case {
            name: "... and counts as age 0 when there is no minimum",
            cluster: two().pod(failed("future", "n1").created_ago_secs(-3600)),
            args: r#"{"minPodLifetimeSeconds":0}"#,
            want: &["future"],
        },
        Case {
            name: "excluded owner kinds (any ownerRef)",
            cluster: two().pods([
                failed("job", "n1"),
                failed("rs", "n1")
                    .owned_by("ReplicaSet", "rs")
                    .owned_by("Job", "other"),
                TestPod::new("default", "plain")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "plain")
                    .phase(PodPhase::Failed),
            ]),
            args: r#"{"excludeOwnerKinds":["Job"]}"#,
            want: &["plain"],
        },
        Case {
            name: "failed bare pods are protected by default",
            cluster: two().pod(
                TestPod::new("default", "bare")
                    .on_node("n1")
                    .phase(PodPhase::Failed),
            ),
            args: "{}",
            want: &[],
        },
        Case {
            name: "... unless evictFailedBarePods",
            cluster: two()
                .pod(
                    TestPod::new("default", "bare")
                        .on_node("n1")
                        .phase(PodPhase::Failed),
                )
                .evictor_args(r#"{"evictFailedBarePods":true}"#),
            args: "{}",
            want: &["bare"],
        },
        Case {
            name: "not evictable: DaemonSet, local storage, critical",
            cluster: two().pods([
                failed("ds", "n1").owned_by("DaemonSet", "ds"),
                failed("local", "n1").host_path("data"),
                failed("critical", "n1").priority(2_000_000_000),
            ]),
            args: "{}",
            want: &[],
        },
        Case {
            name: "nodeFit: no other node fits",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").unschedulable())
                .pod(failed("stuck", "n1"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            want: &[],
        },
        Case {
            name: "namespaces and label selector",
            cluster: two().pods([
                failed("a", "n1").label("team", "x"),
                TestPod::new("other", "b")
                    .on_node("n1")
                    .owned_by("Job", "b")
                    .phase(PodPhase::Failed)
                    .label("team", "x"),
                failed("c", "n1").label("team", "y"),
            ]),
            args: r#"{"namespaces":{"exclude":["other"]},"labelSelector":{"matchLabels":{"team":"x"}}}"#,
            want: &["a"],
        },
        Case {
            name: "pods on nodes out of scope stay",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").not_ready())
                .node(TestNode::new("n3"))
                .pods([failed("a", "n2"), failed("b", "n3")]),
            args: "{}",
            want: &["b"],
        },
    ]);
}

#[test]
fn reasons_and_exit_codes() {
    let two = || TestCluster::new().nodes(nodes(&["n1", "n2"]));
    check(vec![
        Case {
            name: "terminated reason",
            cluster: two().pods([
                failed("oom", "n1").main_container(terminated("OOMKilled", 137)),
                failed("err", "n1").main_container(terminated("Error", 1)),
            ]),
            args: r#"{"reasons":["OOMKilled"]}"#,
            want: &["oom"],
        },
        Case {
            name: "waiting reason",
            cluster: two().pods([
                failed("cfg", "n1").main_container(
                    TestContainer::new("main", "img").waiting("CreateContainerConfigError"),
                ),
                failed("none", "n1"),
            ]),
            args: r#"{"reasons":["CreateContainerConfigError"]}"#,
            want: &["cfg"],
        },
        Case {
            name: "pod status reason",
            cluster: two().pods([
                failed("affinity", "n1").reason("NodeAffinity"),
                failed("evicted", "n1").reason("Evicted"),
            ]),
            args: r#"{"reasons":["NodeAffinity"]}"#,
            want: &["affinity"],
        },
        Case {
            name: "a reason no object has matches nothing",
            cluster: two().pod(failed("oom", "n1").main_container(terminated("OOMKilled", 137))),
            args: r#"{"reasons":["Nope"]}"#,
            want: &[],
        },
        Case {
            name: "init container reasons only with includingInitContainers",
            cluster: two().pod(
                failed("init", "n1").init_container(
                    TestContainer::new("init", "img").terminated("StartError", 128),
                ),
            ),
            args: r#"{"reasons":["StartError"]}"#,
            want: &[],
        },
        Case {
            name: "... and with it",
            cluster: two().pod(
                failed("init", "n1").init_container(
                    TestContainer::new("init", "img").terminated("StartError", 128),
                ),
            ),
            args: r#"{"reasons":["StartError"],"includingInitContainers":true}"#,
            want: &["init"],
        },
        Case {
            name: "exit codes",
            cluster: two().pods([
                failed("137", "n1").main_container(terminated("OOMKilled", 137)),
                failed("1", "n1").main_container(terminated("Error", 1)),
                failed("none", "n1"),
            ]),
            args: r#"{"exitCodes":[137, 2]}"#,
            want: &["137"],
        },
        Case {
            name: "init exit codes with the flag",
            cluster: two().pods([
                failed("init", "n1")
                    .init_container(TestContainer::new("init", "img").terminated("Error", 2)),
                failed("app", "n1").main_container(terminated("Error", 2)),
            ]),
            args: r#"{"exitCodes":[2],"includingInitContainers":true}"#,
            want: &["init", "app"],
        },
        Case {
            name: "reasons and exit codes are ANDed",
            cluster: two().pods([
                failed("both", "n1").main_container(terminated("OOMKilled", 137)),
                failed("reason-only", "n1").main_container(terminated("OOMKilled", 1)),
                failed("code-only", "n1").main_container(terminated("Error", 137)),
            ]),
            args: r#"{"reasons":["OOMKilled"],"exitCodes":[137]}"#,
            want: &["both"],
        },
    ]);
}

#[test]
fn refusals() {
    let cluster = || {
        TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
            failed("a1", "n1"),
            failed("a2", "n1"),
            failed("b1", "n2"),
            failed("b2", "n2"),
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
            cluster: cluster().max_total(3),
            args: "{}",
            want: &["a1", "a2", "b1"],
        },
        Case {
            name: "namespace limit: next pod",
            cluster: cluster()
                .pod(
                    TestPod::new("other", "c1")
                        .on_node("n2")
                        .owned_by("Job", "c1")
                        .phase(PodPhase::Failed),
                )
                .max_per_namespace(1),
            args: "{}",
            want: &["a1", "c1"],
        },
    ]);
    let r = run::<RemoveFailedPods>(&cluster().max_per_node(1), Deschedule, "{}");
    assert_eq!(r.refused_names(), ["a2", "b2"], "one refusal per node");
}

#[test]
fn reasons_are_readable() {
    let cluster = TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
        failed("oom", "n1")
            .created_ago_secs(2 * DAY + 3 * 3600)
            .main_container(terminated("OOMKilled", 137)),
        failed("evicted", "n2").reason("Evicted"),
    ]);
    let r = run::<RemoveFailedPods>(&cluster, Deschedule, r#"{"exitCodes":[137,0]}"#);
    r.assert_ok();
    assert_eq!(
        r.proposals[0].reason,
        "pod failed and was created 2d3h ago (minPodLifetimeSeconds 3600); container main \
         exited with code 137"
    );
    let r = run::<RemoveFailedPods>(&cluster, Deschedule, r#"{"reasons":["OOMKilled"]}"#);
    assert_eq!(
        r.proposals[0].reason,
        "pod failed and was created 2d3h ago (minPodLifetimeSeconds 3600); container main \
         terminated: OOMKilled"
    );
    let r = run::<RemoveFailedPods>(&cluster, Deschedule, "{}");
    assert_eq!(
        r.proposals[1].reason,
        "pod failed and was created 1d ago (minPodLifetimeSeconds 3600); pod status reason Evicted"
    );
}

/// Conformance scenarios 066, 069 and 072, shrunk to what decides them.
#[test]
fn conformance_in_miniature() {
    let three = || TestCluster::new().nodes(nodes(&["worker-01", "worker-02", "worker-03"]));
    let rs_failed = |name: &str, node: &str| {
        TestPod::new("shop", name)
            .on_node(node)
            .owned_by("ReplicaSet", name)
            .phase(PodPhase::Failed)
    };
    let batch_failed = |name: &str, node: &str| {
        TestPod::new("batch", name)
            .on_node(node)
            .owned_by("Job", name)
            .phase(PodPhase::Failed)
    };
    let zoo = || {
        three().pods([
            batch_failed("import-1", "worker-01").main_container(terminated("Error", 1)),
            batch_failed("import-2", "worker-02").main_container(terminated("OOMKilled", 137)),
            batch_failed("import-3", "worker-03").main_container(terminated("Error", 2)),
            rs_failed("evicted", "worker-01")
                .reason("Evicted")
                .main_container(terminated("ContainerStatusUnknown", 137)),
            rs_failed("affinity", "worker-02")
                .reason("NodeAffinity")
                .main_container(terminated("Error", 1)),
            TestPod::new("shop", "healthy")
                .on_node("worker-01")
                .owned_by("ReplicaSet", "healthy"),
            batch_failed("done", "worker-03")
                .phase(PodPhase::Succeeded)
                .main_container(terminated("Completed", 0)),
        ])
    };
    check(vec![
        Case {
            name: "066 reasons",
            cluster: zoo(),
            args: r#"{"reasons":["OOMKilled","NodeAffinity"]}"#,
            want: &["import-2", "affinity"],
        },
        Case {
            name: "069 failed bare pods",
            cluster: zoo()
                .pods([
                    TestPod::new("default", "debug-shell")
                        .on_node("worker-01")
                        .phase(PodPhase::Failed),
                    TestPod::new("default", "one-off").on_node("worker-02"),
                ])
                .evictor_args(r#"{"evictFailedBarePods":true}"#),
            args: r#"{"namespaces":{"include":["default"]}}"#,
            want: &["debug-shell"],
        },
        Case {
            name: "072 explicit minimum lifetime",
            cluster: three().pods([
                failed("archive-0", "worker-01").created_ago_secs(1_600_000_000),
                failed("recent-0", "worker-01").created_ago_secs(200_000_000),
                failed("archive-1", "worker-02").created_ago_secs(1_599_900_000),
                failed("recent-1", "worker-02").created_ago_secs(190_000_000),
            ]),
            args: r#"{"minPodLifetimeSeconds":1500000000}"#,
            want: &["archive-0", "archive-1"],
        },
    ]);
}
