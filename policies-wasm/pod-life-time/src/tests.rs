//! Table-driven tests of PodLifeTime against the SDK's native host (the same evictor the server
//! runs), after descheduler's `pod_lifetime_test.go`, plus the reactions to refusals and the
//! conformance scenarios 058/061/064 in miniature.

use rebalancer_policy_sdk::testing::*;

use crate::PodLifeTime;

const DAY: i64 = 86_400;

fn nodes(names: &[&str]) -> Vec<TestNode> {
    names.iter().map(|n| TestNode::new(n)).collect()
}

/// A ReplicaSet pod on `node`, created `age` seconds before the snapshot time.
fn pod(name: &str, node: &str, age: i64) -> TestPod {
    TestPod::new("default", name)
        .on_node(node)
        .owned_by("ReplicaSet", name)
        .created_ago_secs(age)
        .started_ago_secs(age.max(0))
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
        let run = run::<PodLifeTime>(&case.cluster, Deschedule, case.args);
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
            assert_eq!(p.plugin, "PodLifeTime", "{}", case.name);
        }
    }
}

#[test]
fn max_pod_lifetime() {
    let two = || TestCluster::new().nodes(nodes(&["n1", "n2"]));
    check(vec![
        Case {
            name: "old pod evicted, young pod kept",
            cluster: two().pods([pod("old", "n1", 700), pod("young", "n1", 500)]),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &["old"],
        },
        Case {
            name: "exactly the limit is not older than it",
            cluster: two().pods([pod("edge", "n1", 600), pod("over", "n1", 601)]),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &["over"],
        },
        Case {
            name: "oldest first over all nodes",
            cluster: two().pods([
                pod("b", "n1", 2 * DAY),
                pod("a", "n2", 3 * DAY),
                pod("c", "n1", DAY),
            ]),
            args: r#"{"maxPodLifeTimeSeconds":60}"#,
            want: &["a", "b", "c"],
        },
        Case {
            name: "a creation time in the future is a negative age: never old enough",
            cluster: two().pods([pod("future", "n1", -3600), pod("now", "n1", 0)]),
            args: r#"{"maxPodLifeTimeSeconds":0}"#,
            want: &[],
        },
        Case {
            name: "a second past zero is older than zero",
            cluster: two().pods([pod("future", "n1", -3600), pod("now", "n1", 1)]),
            args: r#"{"maxPodLifeTimeSeconds":0}"#,
            want: &["now"],
        },
        Case {
            name: "terminal pods are seen too (any phase)",
            cluster: two().pods([
                pod("done", "n1", 700).phase(PodPhase::Succeeded),
                pod("failed", "n2", 800).phase(PodPhase::Failed),
            ]),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &["failed", "done"],
        },
        Case {
            name: "not evictable: DaemonSet, mirror, system-critical, local storage",
            cluster: two().pods([
                pod("ds", "n1", 700).owned_by("DaemonSet", "ds"),
                pod("mirror", "n1", 700).mirror(),
                pod("critical", "n1", 700).priority(2_000_000_000),
                pod("local", "n1", 700).empty_dir("scratch"),
                pod("plain", "n1", 700),
            ]),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &["plain"],
        },
        Case {
            name: "the evict annotation overrides the protections",
            cluster: two().pod(
                pod("local", "n1", 700)
                    .empty_dir("scratch")
                    .evict_annotation(),
            ),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &["local"],
        },
        Case {
            name: "pods on a node that is not Ready, or outside the node selector, stay",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").label("pool", "a"))
                .node(TestNode::new("n2").label("pool", "a").not_ready())
                .node(TestNode::new("n3").label("pool", "b"))
                .node(TestNode::new("n4").label("pool", "a"))
                .pods([
                    pod("p1", "n1", 700),
                    pod("p2", "n2", 900),
                    pod("p3", "n3", 800),
                    pod("unbound", "", 1000),
                ])
                .node_selector("pool=a"),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &["p1"],
        },
        Case {
            name: "terminating pods are not evictable",
            cluster: two().pod(pod("going", "n1", 700).terminating()),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &[],
        },
        Case {
            name: "nodeFit: a pod that fits no other node stays",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").cpu("100m"))
                .pods([
                    pod("big", "n1", 700).cpu("1"),
                    pod("small", "n1", 700).cpu("50m"),
                ])
                .evictor_args(r#"{"nodeFit":true}"#),
            args: r#"{"maxPodLifeTimeSeconds":600}"#,
            want: &["small"],
        },
    ]);
}

#[test]
fn states() {
    let one = || TestCluster::new().nodes(nodes(&["n1", "n2"]));
    check(vec![
        Case {
            name: "pod phase",
            cluster: one().pods([
                pod("pending", "n1", 10).phase(PodPhase::Pending),
                pod("running", "n1", 10),
            ]),
            args: r#"{"states":["Pending"]}"#,
            want: &["pending"],
        },
        Case {
            name: "pod status reason",
            cluster: one().pods([
                pod("lost", "n1", 10)
                    .phase(PodPhase::Unknown)
                    .reason("NodeLost"),
                pod("other", "n1", 10)
                    .phase(PodPhase::Failed)
                    .reason("Shutdown"),
            ]),
            args: r#"{"states":["NodeLost"]}"#,
            want: &["lost"],
        },
        Case {
            name: "container waiting reason",
            cluster: one().pods([
                pod("crashing", "n1", 10)
                    .main_container(TestContainer::new("main", "img").waiting("CrashLoopBackOff")),
                pod("pulling", "n1", 10)
                    .main_container(TestContainer::new("main", "img").waiting("ErrImagePull")),
            ]),
            args: r#"{"states":["CrashLoopBackOff"]}"#,
            want: &["crashing"],
        },
        Case {
            name: "container terminated reason",
            cluster: one().pods([
                pod("oom", "n1", 10)
                    .main_container(TestContainer::new("main", "img").terminated("OOMKilled", 137)),
                pod("err", "n1", 10)
                    .main_container(TestContainer::new("main", "img").terminated("Error", 1)),
            ]),
            args: r#"{"states":["OOMKilled"]}"#,
            want: &["oom"],
        },
        Case {
            name: "a second app container counts",
            cluster: one().pod(
                pod("sidecar-crash", "n1", 10)
                    .container(TestContainer::new("side", "img").waiting("CrashLoopBackOff")),
            ),
            args: r#"{"states":["CrashLoopBackOff"]}"#,
            want: &["sidecar-crash"],
        },
        Case {
            name: "init containers only with includingInitContainers",
            cluster: one().pod(
                pod("init-crash", "n1", 10)
                    .phase(PodPhase::Pending)
                    .init_container(TestContainer::new("init", "img").waiting("CrashLoopBackOff")),
            ),
            args: r#"{"states":["CrashLoopBackOff"]}"#,
            want: &[],
        },
        Case {
            name: "... and with it",
            cluster: one().pod(
                pod("init-crash", "n1", 10)
                    .phase(PodPhase::Pending)
                    .init_container(TestContainer::new("init", "img").waiting("CrashLoopBackOff")),
            ),
            args: r#"{"states":["CrashLoopBackOff"],"includingInitContainers":true}"#,
            want: &["init-crash"],
        },
        Case {
            name: "states and lifetime are ANDed",
            cluster: one().pods([
                pod("old-pending", "n1", 700).phase(PodPhase::Pending),
                pod("young-pending", "n1", 10).phase(PodPhase::Pending),
                pod("old-running", "n1", 700),
            ]),
            args: r#"{"states":["Pending"],"maxPodLifeTimeSeconds":600}"#,
            want: &["old-pending"],
        },
    ]);
}

#[test]
fn conditions_exit_codes_and_owner_kinds() {
    let one = || TestCluster::new().nodes(nodes(&["n1", "n2"]));
    check(vec![
        Case {
            name: "condition type and status",
            cluster: one().pods([pod("unready", "n1", 10).not_ready(), pod("ready", "n1", 10)]),
            args: r#"{"conditions":[{"type":"Ready","status":"False"}]}"#,
            want: &["unready"],
        },
        Case {
            name: "condition reason must match when set",
            cluster: one().pods([
                pod("a", "n1", 10).condition("DisruptionTarget", "True", "EvictionByEvictionAPI"),
                pod("b", "n1", 10).condition("DisruptionTarget", "True", "PreemptionByScheduler"),
            ]),
            args: r#"{"conditions":[{"type":"DisruptionTarget","reason":"PreemptionByScheduler"}]}"#,
            want: &["b"],
        },
        Case {
            name: "filters are ORed",
            cluster: one().pods([
                pod("a", "n1", 30).condition("X", "True", ""),
                pod("b", "n1", 20).condition("Y", "True", ""),
                pod("c", "n1", 10).condition("Z", "True", ""),
            ]),
            args: r#"{"conditions":[{"type":"X"},{"type":"Y"}]}"#,
            want: &["a", "b"],
        },
        Case {
            name: "minTimeSinceLastTransitionSeconds",
            cluster: one().pods([
                pod("stale", "n1", 10).condition_since("Stuck", "True", "", 601),
                pod("edge", "n1", 10).condition_since("Stuck", "True", "", 600),
                pod("fresh", "n1", 10).condition_since("Stuck", "True", "", 599),
                pod("future", "n1", 10).condition_since("Stuck", "True", "", -600),
                pod("unknown", "n1", 10).condition("Stuck", "True", ""),
            ]),
            args: r#"{"conditions":[{"type":"Stuck","minTimeSinceLastTransitionSeconds":600}]}"#,
            want: &["stale", "edge"],
        },
        Case {
            name: "a filter with only a transition age matches any old condition",
            cluster: one().pods([
                pod("old", "n1", 3600).condition("PodScheduled", "True", ""),
                pod("young", "n1", 30),
            ]),
            // The Ready condition changed when each pod started.
            args: r#"{"conditions":[{"minTimeSinceLastTransitionSeconds":600}]}"#,
            want: &["old"],
        },
        Case {
            name: "a condition value no object has matches nothing",
            cluster: one().pod(pod("a", "n1", 10).not_ready()),
            args: r#"{"conditions":[{"type":"Ready","status":"Maybe"}]}"#,
            want: &[],
        },
        Case {
            name: "exit codes of app containers",
            cluster: one().pods([
                pod("oom", "n1", 10)
                    .phase(PodPhase::Failed)
                    .main_container(TestContainer::new("main", "img").terminated("OOMKilled", 137)),
                pod("ok", "n1", 10)
                    .phase(PodPhase::Succeeded)
                    .main_container(TestContainer::new("main", "img").terminated("Completed", 0)),
            ]),
            args: r#"{"exitCodes":[137, 1]}"#,
            want: &["oom"],
        },
        Case {
            name: "exit codes of init containers only with the flag",
            cluster: one().pod(
                pod("init-failed", "n1", 10)
                    .phase(PodPhase::Failed)
                    .init_container(TestContainer::new("init", "img").terminated("Error", 2)),
            ),
            args: r#"{"exitCodes":[2]}"#,
            want: &[],
        },
        Case {
            name: "... and with it",
            cluster: one().pod(
                pod("init-failed", "n1", 10)
                    .phase(PodPhase::Failed)
                    .init_container(TestContainer::new("init", "img").terminated("Error", 2)),
            ),
            args: r#"{"exitCodes":[2],"includingInitContainers":true}"#,
            want: &["init-failed"],
        },
        Case {
            name: "ownerKinds include",
            cluster: one().pods([
                pod("job", "n1", 30).owned_by("Job", "j"),
                pod("rs", "n1", 20),
                TestPod::new("default", "bare")
                    .on_node("n1")
                    .phase(PodPhase::Failed)
                    .created_ago_secs(10),
            ]),
            args: r#"{"maxPodLifeTimeSeconds":1,"ownerKinds":{"include":["Job"]}}"#,
            want: &["job"],
        },
        Case {
            name: "ownerKinds exclude (any ownerRef counts)",
            cluster: one().pods([
                pod("job", "n1", 30).owned_by("Job", "j"),
                pod("rs", "n1", 20),
            ]),
            args: r#"{"maxPodLifeTimeSeconds":1,"ownerKinds":{"exclude":["Job"]}}"#,
            want: &["rs"],
        },
        Case {
            name: "ownerKinds include of a kind no pod has",
            cluster: one().pod(pod("rs", "n1", 20)),
            args: r#"{"maxPodLifeTimeSeconds":1,"ownerKinds":{"include":["CronJob"]}}"#,
            want: &[],
        },
    ]);
}

#[test]
fn namespaces_and_label_selector() {
    let cluster = || {
        TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
            pod("a", "n1", 50).label("tier", "web"),
            TestPod::new("kube-system", "b")
                .on_node("n1")
                .owned_by("ReplicaSet", "b")
                .created_ago_secs(40)
                .label("tier", "web"),
            TestPod::new("monitoring", "c")
                .on_node("n2")
                .owned_by("ReplicaSet", "c")
                .created_ago_secs(30),
            pod("d", "n2", 20).label("tier", "db"),
        ])
    };
    check(vec![
        Case {
            name: "include",
            cluster: cluster(),
            args: r#"{"maxPodLifeTimeSeconds":1,"namespaces":{"include":["kube-system","monitoring"]}}"#,
            want: &["b", "c"],
        },
        Case {
            name: "exclude",
            cluster: cluster(),
            args: r#"{"maxPodLifeTimeSeconds":1,"namespaces":{"exclude":["kube-system","monitoring"]}}"#,
            want: &["a", "d"],
        },
        Case {
            name: "include of a namespace nobody uses",
            cluster: cluster(),
            args: r#"{"maxPodLifeTimeSeconds":1,"namespaces":{"include":["nope"]}}"#,
            want: &[],
        },
        Case {
            name: "label selector",
            cluster: cluster(),
            args: r#"{"maxPodLifeTimeSeconds":1,"labelSelector":{"matchLabels":{"tier":"web"}}}"#,
            want: &["a", "b"],
        },
        Case {
            name: "label selector expression",
            cluster: cluster(),
            args: r#"{"maxPodLifeTimeSeconds":1,"labelSelector":{"matchExpressions":[{"key":"tier","operator":"NotIn","values":["web"]}]}}"#,
            want: &["c", "d"],
        },
        Case {
            name: "empty label selector selects everything",
            cluster: cluster(),
            args: r#"{"maxPodLifeTimeSeconds":1,"labelSelector":{}}"#,
            want: &["a", "b", "c", "d"],
        },
    ]);
}

#[test]
fn refusals() {
    let cluster = || {
        TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
            pod("n1-old", "n1", 50),
            pod("n1-mid", "n1", 40),
            pod("n2-old", "n2", 45),
            pod("n2-new", "n2", 10),
        ])
    };
    check(vec![
        Case {
            name: "a per-node limit skips the pod, not the rest of the list",
            cluster: cluster().max_per_node(1),
            args: r#"{"maxPodLifeTimeSeconds":1}"#,
            want: &["n1-old", "n2-old"],
        },
        Case {
            name: "the total limit ends the pass",
            cluster: cluster().max_total(2),
            args: r#"{"maxPodLifeTimeSeconds":1}"#,
            want: &["n1-old", "n2-old"],
        },
        Case {
            name: "a PDB refusal moves on to the next pod",
            cluster: cluster()
                .pod(pod("guarded", "n1", 100).label("app", "guarded"))
                .pdb(TestPdb::new("default", "pdb").match_label("app", "guarded")),
            args: r#"{"maxPodLifeTimeSeconds":1}"#,
            want: &["n1-old", "n2-old", "n1-mid", "n2-new"],
        },
    ]);

    // The refusals themselves.
    let run = run::<PodLifeTime>(
        &cluster().max_total(1),
        Deschedule,
        r#"{"maxPodLifeTimeSeconds":1}"#,
    );
    assert_eq!(run.evicted_names(), ["n1-old"]);
    assert_eq!(run.refused_names(), ["n2-old"], "one refusal, then stop");
    assert!(
        run.log_messages().iter().any(
            |m| m.starts_with("PodLifeTime: 4 candidate pods, 1 proposals, 1 refused; stopped")
        ),
        "{:?}",
        run.log_messages()
    );
}

#[test]
fn reasons_are_readable() {
    let cluster = TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
        pod("old", "n1", 3 * DAY + 4 * 3600),
        pod("stuck", "n1", 3600)
            .main_container(TestContainer::new("app", "img").waiting("ImagePullBackOff")),
        pod("stale", "n2", 3600).condition_since("Ready", "False", "ContainersNotReady", 7200),
        pod("oom", "n2", 3600)
            .phase(PodPhase::Failed)
            .main_container(TestContainer::new("app", "img").terminated("OOMKilled", 137)),
    ]);
    let reason_of = |args: &str, name: &str| {
        let run = run::<PodLifeTime>(&cluster, Deschedule, args);
        run.assert_ok();
        run.proposals
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} not proposed: {:?}", run.evicted_names()))
            .reason
            .clone()
    };
    assert_eq!(
        reason_of(r#"{"maxPodLifeTimeSeconds":86400}"#, "old"),
        "pod is 3d4h old, more than maxPodLifeTimeSeconds 86400 (1d)"
    );
    assert_eq!(
        reason_of(r#"{"states":["ImagePullBackOff"]}"#, "stuck"),
        "container app is waiting: ImagePullBackOff"
    );
    assert_eq!(
        reason_of(
            r#"{"conditions":[{"type":"Ready","status":"False","reason":"ContainersNotReady","minTimeSinceLastTransitionSeconds":600}]}"#,
            "stale"
        ),
        "condition Ready=False (reason ContainersNotReady) for 2h, at least 10m"
    );
    assert_eq!(
        reason_of(r#"{"exitCodes":[137],"states":["Failed"]}"#, "oom"),
        "pod phase is Failed; container app exited with code 137"
    );
}

/// Conformance scenarios 058, 061 and 064, shrunk to what decides them.
#[test]
fn conformance_in_miniature() {
    let three = || TestCluster::new().nodes(nodes(&["worker-01", "worker-02", "worker-03"]));
    check(vec![
        Case {
            name: "058 states pending",
            cluster: three().pods([
                pod("stuck", "worker-01", 3000)
                    .phase(PodPhase::Pending)
                    .main_container(TestContainer::new("stuck", "i").waiting("ContainerCreating")),
                pod("pull-fail", "worker-02", 2000)
                    .main_container(TestContainer::new("pull", "i").waiting("ImagePullBackOff")),
                pod("running", "worker-03", 1500),
                pod("creating", "worker-03", 1000)
                    .phase(PodPhase::Pending)
                    .main_container(TestContainer::new("c", "i").waiting("ContainerCreating")),
            ]),
            args: r#"{"states":["Pending","ContainerCreating","ImagePullBackOff"]}"#,
            want: &["stuck", "pull-fail", "creating"],
        },
        Case {
            name: "061 conditions",
            cluster: three().pods([
                pod("stale-1", "worker-01", 3000).condition_since(
                    "Ready",
                    "False",
                    "ContainersNotReady",
                    2000,
                ),
                pod("stale-2", "worker-02", 2000).condition_since(
                    "Ready",
                    "False",
                    "ContainersNotReady",
                    2000,
                ),
                pod("fresh", "worker-01", 1000).condition_since(
                    "Ready",
                    "False",
                    "ContainersNotReady",
                    -DAY,
                ),
                pod("healthy", "worker-03", 500),
            ]),
            args: r#"{"conditions":[{"type":"Ready","status":"False","reason":"ContainersNotReady","minTimeSinceLastTransitionSeconds":600}]}"#,
            want: &["stale-1", "stale-2"],
        },
        Case {
            name: "064 namespaces and label selector",
            cluster: three().pods([
                TestPod::new("kube-system", "kube-proxy")
                    .on_node("worker-01")
                    .owned_by("DaemonSet", "kube-proxy")
                    .priority(2_000_001_000)
                    .created_ago_secs(9000),
                TestPod::new("monitoring", "legacy-b")
                    .on_node("worker-02")
                    .owned_by("ReplicaSet", "legacy-b")
                    .label("app.kubernetes.io/part-of", "legacy")
                    .created_ago_secs(8000),
                TestPod::new("shop", "legacy-a")
                    .on_node("worker-01")
                    .owned_by("ReplicaSet", "legacy-a")
                    .label("app.kubernetes.io/part-of", "legacy")
                    .created_ago_secs(8500),
                TestPod::new("shop", "modern")
                    .on_node("worker-03")
                    .owned_by("ReplicaSet", "modern")
                    .label("app.kubernetes.io/part-of", "modern")
                    .created_ago_secs(7000),
            ]),
            args: r#"{"maxPodLifeTimeSeconds":600,"namespaces":{"exclude":["kube-system","monitoring"]},"labelSelector":{"matchLabels":{"app.kubernetes.io/part-of":"legacy"}}}"#,
            want: &["legacy-a"],
        },
    ]);
}

#[test]
fn invalid_args_fail_the_run() {
    let cluster = TestCluster::new().nodes(nodes(&["n1", "n2"]));
    let run = run::<PodLifeTime>(&cluster, Deschedule, "{}");
    let err = run.result.expect_err("no criterion is an error");
    assert!(
        err.contains("at least one filtering criterion must be specified"),
        "{err}"
    );
}

/// Ephemeral containers (`kubectl debug`) count for `states` only with their flag, and never for
/// `exitCodes`. The test builders have no ephemeral containers, so the criteria are checked on
/// a snapshot edited by hand.
#[test]
fn ephemeral_containers() {
    use rebalancer_policy_sdk::Cluster;
    use rebalancer_policy_sdk::model::{Container, ContainerKind, Snapshot, to_bytes};

    use crate::args::PodLifeTimeArgs;
    use crate::plan::Criteria;

    let mut snapshot = TestCluster::new()
        .node(TestNode::new("n1"))
        .pod(pod("debugged", "n1", 10))
        .snapshot();
    let intern = |s: &mut Snapshot, text: &str| {
        let id = s.strings.len() as u32;
        s.strings.push(text.to_owned());
        id
    };
    let name = intern(&mut snapshot, "debugger");
    let reason = intern(&mut snapshot, "CrashLoopBackOff");
    snapshot.pods[0].containers.push(Container {
        kind: ContainerKind::Ephemeral,
        name,
        waiting_reason: reason,
        exit_code: Some(3),
        ..Container::default()
    });
    // Keep the sorted index (used by `Cluster::lookup`) valid after adding strings.
    let strings = &snapshot.strings;
    let mut sorted: Vec<u32> = (0..strings.len() as u32).collect();
    sorted.sort_by(|a, b| strings[*a as usize].cmp(&strings[*b as usize]));
    snapshot.strings_sorted = sorted;
    let bytes = to_bytes(&snapshot).unwrap();
    let cluster = Cluster::from_bytes(&bytes).unwrap();
    let pod = cluster.pod(0);
    let criteria = |json: &str| {
        let args: PodLifeTimeArgs = serde_json::from_str(json).unwrap();
        Criteria::new(cluster, &args, cluster.time_ms())
    };
    assert!(!criteria(r#"{"states":["CrashLoopBackOff"]}"#).matches(pod));
    let with_flag =
        criteria(r#"{"states":["CrashLoopBackOff"],"includingEphemeralContainers":true}"#);
    assert!(with_flag.matches(pod));
    assert_eq!(
        with_flag.describe(pod),
        "ephemeral container debugger is waiting: CrashLoopBackOff"
    );
    assert!(
        !criteria(r#"{"exitCodes":[3],"includingEphemeralContainers":true,"includingInitContainers":true}"#)
            .matches(pod)
    );
}
