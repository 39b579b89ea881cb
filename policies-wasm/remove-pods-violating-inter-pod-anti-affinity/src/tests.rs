//! Table-driven tests of RemovePodsViolatingInterPodAntiAffinity against the SDK's native host (the
//! same evictor the server runs), after descheduler's `pod_antiaffinity_test.go`: topology
//! domains, term namespaces and selectors, the plugin's filters applied to the pods that cause a
//! violation, eviction order, the working-set update, refusals and the preferred option.

use rebalancer_policy_sdk::Refusal;
use rebalancer_policy_sdk::testing::*;

use crate::RemovePodsViolatingInterPodAntiAffinity as Plugin;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn node(name: &str, zone: &str) -> TestNode {
    TestNode::new(name).label(ZONE, zone)
}

fn pod(namespace: &str, name: &str, node: &str) -> TestPod {
    TestPod::new(namespace, name)
        .on_node(node)
        .owned_by("ReplicaSet", name)
        .cpu("100m")
}

/// A pod labelled `app=<app>`.
fn app(name: &str, app: &str, node: &str) -> TestPod {
    pod("ns", name, node).label("app", app)
}

/// Required anti-affinity against `app=<target>` on `key`.
fn avoid(key: &str, target: &str) -> TestAffinityTerm {
    TestAffinityTerm::new(key).match_label("app", target)
}

/// Two zones: n1, n2 in zone a; n3 in zone b.
fn nodes() -> [TestNode; 3] {
    [node("n1", "a"), node("n2", "a"), node("n3", "b")]
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
        let run = run::<Plugin>(&case.cluster, Deschedule, case.args);
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
            assert_eq!(p.plugin, "RemovePodsViolatingInterPodAntiAffinity");
        }
    }
}

#[test]
fn topology_domains() {
    check(vec![
        Case {
            name: "same node",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db")))
                .pod(app("db", "db", "n1")),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "hostname key, other node: no violation",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db")))
                .pod(app("db", "db", "n2")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "zone key, other node of the same zone",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(ZONE, "db")))
                .pod(app("db", "db", "n2")),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "zone key, other zone",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(ZONE, "db")))
                .pod(app("db", "db", "n3")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "nodes without the topology label share only the node itself",
            cluster: TestCluster::new()
                .nodes([TestNode::new("n1"), TestNode::new("n2")])
                .pod(app("web", "web", "n1").anti_affinity(avoid(ZONE, "db")))
                .pod(app("db", "db", "n2"))
                .pod(app("db-local", "db", "n1")),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "nodes without the topology label, other node: no violation",
            cluster: TestCluster::new()
                .nodes([TestNode::new("n1"), TestNode::new("n2")])
                .pod(app("web", "web", "n1").anti_affinity(avoid(ZONE, "db")))
                .pod(app("db", "db", "n2")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "a pod on a node out of scope does not count",
            cluster: TestCluster::new()
                .nodes([
                    node("n1", "a"),
                    node("n2", "a").not_ready(),
                    node("n3", "b"),
                ])
                .pod(app("web", "web", "n1").anti_affinity(avoid(ZONE, "db")))
                .pod(app("db", "db", "n2")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "the policy nodeSelector narrows the scope",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(ZONE, "db")))
                .pod(app("db", "db", "n2"))
                .node_selector("kubernetes.io/hostname!=n2"),
            args: "{}",
            evicted: &[],
        },
    ]);
}

#[test]
fn terms() {
    check(vec![
        Case {
            name: "the term's namespaces",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db").namespaces(&["data"])))
                .pod(pod("data", "db", "n1").label("app", "db")),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "no namespaces in the term: the pod's own only",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db")))
                .pod(pod("data", "db", "n1").label("app", "db")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "a pod with the same name does not count, whatever its namespace",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("web", "web", "n1")
                        .anti_affinity(avoid(HOST, "web").namespaces(&["ns", "other"])),
                )
                .pod(pod("other", "web", "n1").label("app", "web")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "a nil selector selects nothing",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(TestAffinityTerm::new(HOST)))
                .pod(app("db", "db", "n1")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "an empty selector selects every pod of the namespace",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("web", "web", "n1").anti_affinity(TestAffinityTerm::new(HOST).select_all()),
                )
                .pod(app("db", "db", "n1")),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "match expressions",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(
                    TestAffinityTerm::new(HOST).match_expression(
                        "app",
                        SelectorOperator::In,
                        &["db", "cache"],
                    ),
                ))
                .pod(app("cache", "cache", "n1")),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "an invalid selector ends the check, even before a matching term",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("web", "web", "n1")
                        .anti_affinity(TestAffinityTerm::new(HOST).match_expression(
                            "app",
                            SelectorOperator::In,
                            &[],
                        ))
                        .anti_affinity(avoid(HOST, "db")),
                )
                .pod(app("db", "db", "n1")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "a matching term before an invalid one still counts",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("web", "web", "n1")
                        .anti_affinity(avoid(HOST, "db"))
                        .anti_affinity(TestAffinityTerm::new(HOST).match_expression(
                            "app",
                            SelectorOperator::In,
                            &[],
                        )),
                )
                .pod(app("db", "db", "n1")),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "preferred anti-affinity is ignored by default",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").preferred_anti_affinity(100, avoid(HOST, "db")))
                .pod(app("db", "db", "n1")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "pod affinity is not this plugin's business",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").pod_affinity(avoid(HOST, "db")))
                .pod(app("db", "db", "n2")),
            args: "{}",
            evicted: &[],
        },
    ]);
}

#[test]
fn considered_pods() {
    check(vec![
        Case {
            name: "a culprit outside the labelSelector causes no violation",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("web", "web", "n1")
                        .label("tier", "frontend")
                        .anti_affinity(avoid(HOST, "db")),
                )
                .pod(app("db", "db", "n1")),
            args: r#"{"labelSelector":{"matchLabels":{"tier":"frontend"}}}"#,
            evicted: &[],
        },
        Case {
            name: "a candidate outside the labelSelector is left alone",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db")))
                .pod(app("db", "db", "n1").label("tier", "backend")),
            args: r#"{"labelSelector":{"matchLabels":{"tier":"backend"}}}"#,
            evicted: &[],
        },
        Case {
            name: "both inside the labelSelector",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("web", "web", "n1")
                        .label("tier", "x")
                        .anti_affinity(avoid(HOST, "db")),
                )
                .pod(app("db", "db", "n1").label("tier", "x")),
            args: r#"{"labelSelector":{"matchExpressions":[{"key":"tier","operator":"Exists"}]}}"#,
            evicted: &["web"],
        },
        Case {
            name: "a culprit in an excluded namespace causes no violation",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db").namespaces(&["data"])))
                .pod(pod("data", "db", "n1").label("app", "db")),
            args: r#"{"namespaces":{"exclude":["data"]}}"#,
            evicted: &[],
        },
        Case {
            name: "only included namespaces are considered",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db").namespaces(&["data"])))
                .pod(pod("data", "db", "n1").label("app", "db")),
            args: r#"{"namespaces":{"include":["ns","data"]}}"#,
            evicted: &["web"],
        },
        Case {
            name: "an unevictable culprit still counts",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "agent")))
                .pod(
                    TestPod::new("ns", "agent")
                        .on_node("n1")
                        .owned_by("DaemonSet", "agent")
                        .label("app", "agent"),
                ),
            args: "{}",
            evicted: &["web"],
        },
        Case {
            name: "an unevictable violator stays, and its culprit is no violator",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    TestPod::new("ns", "agent")
                        .on_node("n1")
                        .owned_by("DaemonSet", "agent")
                        .anti_affinity(avoid(HOST, "web")),
                )
                .pod(app("web", "web", "n1")),
            args: "{}",
            evicted: &[],
        },
        Case {
            name: "a terminating culprit still counts, a finished one does not",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("web-1", "web", "n1").anti_affinity(avoid(HOST, "db")))
                .pod(app("db-1", "db", "n1").terminating())
                .pod(app("web-2", "web", "n2").anti_affinity(avoid(HOST, "db")))
                .pod(app("db-2", "db", "n2").phase(PodPhase::Succeeded)),
            args: "{}",
            evicted: &["web-1"],
        },
    ]);
}

#[test]
fn order_and_working_set() {
    check(vec![
        Case {
            // Mutually anti-affine pair: the lower priority one goes, the other is then clean.
            name: "one pod of a conflicting pair, lowest priority first",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("high", "x", "n1")
                        .priority(100)
                        .anti_affinity(avoid(HOST, "x")),
                )
                .pod(
                    app("low", "x", "n1")
                        .priority(10)
                        .anti_affinity(avoid(HOST, "x")),
                ),
            args: "{}",
            evicted: &["low"],
        },
        Case {
            name: "unset priority first, then QoS",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("guaranteed", "x", "n1")
                        .memory("64Mi")
                        .guaranteed()
                        .anti_affinity(avoid(HOST, "x")),
                )
                .pod(
                    app("prio-0", "x", "n1")
                        .priority(0)
                        .anti_affinity(avoid(HOST, "x")),
                )
                .pod(app("burstable", "x", "n1").anti_affinity(avoid(HOST, "x"))),
            args: "{}",
            evicted: &["burstable", "guaranteed"],
        },
        Case {
            name: "prefer-no-eviction after its QoS peers",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(
                    app("stay", "x", "n1")
                        .prefer_no_eviction()
                        .anti_affinity(avoid(HOST, "x")),
                )
                .pod(app("go", "x", "n1").anti_affinity(avoid(HOST, "x"))),
            args: "{}",
            evicted: &["go"],
        },
        Case {
            // Three replicas with self anti-affinity per zone: n1/n2 share zone a.
            name: "zone replicas: nodes in order, one left per zone",
            cluster: TestCluster::new().nodes(nodes()).pods(
                [("r1", "n1"), ("r2", "n2"), ("r3", "n3")]
                    .map(|(n, at)| app(n, "r", at).anti_affinity(avoid(ZONE, "r"))),
            ),
            args: "{}",
            evicted: &["r1"],
        },
        Case {
            // The evicted pod leaves the working set: d2 no longer sees d1.
            name: "an evicted culprit no longer counts",
            cluster: TestCluster::new()
                .nodes(nodes())
                .pod(app("w", "w", "n1").anti_affinity(avoid(HOST, "d")))
                .pod(app("d1", "d", "n1").anti_affinity(avoid(HOST, "w")))
                .pod(app("d2", "d", "n1")),
            args: "{}",
            evicted: &["w"],
        },
    ]);
}

#[test]
fn refusals() {
    fn stacked(node: &str, prefix: &str) -> Vec<TestPod> {
        (1..=3)
            .map(|i| app(&format!("{prefix}{i}"), "s", node).anti_affinity(avoid(HOST, "s")))
            .collect()
    }
    // Node limit: the next node.
    let cluster = TestCluster::new()
        .nodes(nodes())
        .pods(stacked("n1", "a"))
        .pods(stacked("n3", "c"))
        .max_per_node(1);
    let run = cluster.run::<Plugin>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1", "c1"]);
    assert_eq!(run.refused_names(), ["a2", "c2"]);
    assert!(run.refusals.iter().all(|r| r.refusal == Refusal::NodeLimit));

    // Total limit: the end.
    let cluster = TestCluster::new()
        .nodes(nodes())
        .pods(stacked("n1", "a"))
        .pods(stacked("n3", "c"))
        .max_total(1);
    let run = cluster.run::<Plugin>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a1"]);
    assert_eq!(run.refused_names(), ["a2"]);
    assert_eq!(run.refusals[0].refusal, Refusal::TotalLimit);

    // A PDB refusal: the pod stays in the working set and the next one goes.
    let cluster = TestCluster::new()
        .nodes(nodes())
        .pod(
            app("guarded", "x", "n1")
                .label("pdb", "yes")
                .anti_affinity(avoid(HOST, "x")),
        )
        .pod(app("free", "x", "n1").anti_affinity(avoid(HOST, "x")))
        .pdb(
            TestPdb::new("ns", "guard")
                .match_label("pdb", "yes")
                .disruptions_allowed(0),
        );
    let run = cluster.run::<Plugin>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["free"]);
    assert_eq!(run.refused_names(), ["guarded"]);

    // nodeFit (PreEvictionFilter): a violator that fits nowhere else is not proposed.
    let cluster = TestCluster::new()
        .nodes([TestNode::new("n1").cpu("1"), TestNode::new("n2").cpu("1")])
        .pod(
            app("big", "big", "n1")
                .cpu("800m")
                .anti_affinity(avoid(HOST, "db")),
        )
        .pod(app("db", "db", "n1"))
        .pod(app("filler", "filler", "n2").cpu("500m"))
        .evictor_args(r#"{"nodeFit":true}"#);
    let run = cluster.run::<Plugin>(Deschedule, "{}");
    run.assert_ok();
    assert!(run.proposals.is_empty() && run.refusals.is_empty());

    // Pods proposed earlier in the run (another plugin) stay as terminating culprits.
    let cluster = TestCluster::new()
        .nodes(nodes())
        .pod(app("web", "web", "n1").anti_affinity(avoid(HOST, "db")))
        .pod(app("db", "db", "n1"));
    let mut session = cluster.session();
    let db = session.pod_id("ns", "db");
    session
        .evictor("Other")
        .propose(db, "evicted by another plugin")
        .expect("accepted");
    let run = session.run::<Plugin>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["web"]);
}

#[test]
fn reasons() {
    let cluster = TestCluster::new()
        .nodes(nodes())
        .pod(app("web", "web", "n1").anti_affinity(avoid(ZONE, "db")))
        .pod(app("db", "db", "n2"))
        .pod(app("api", "api", "n3").anti_affinity(avoid(HOST, "cache")))
        .pod(app("cache", "cache", "n3"));
    let run = cluster.run::<Plugin>(Deschedule, "{}");
    run.assert_ok();
    let reasons: Vec<&str> = run.proposals.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "pod anti-affinity (required, topologyKey topology.kubernetes.io/zone) is violated by \
             ns/db on node n2, which has the same topology.kubernetes.io/zone=a as node n1",
            "pod anti-affinity (required, topologyKey kubernetes.io/hostname) is violated by \
             ns/cache on the same node n3",
        ]
    );
}

#[test]
fn preferred_option() {
    const ON: &str = r#"{"includePreferredAntiAffinity":true}"#;
    let spread =
        |name: &str, at: &str| app(name, "r", at).preferred_anti_affinity(50, avoid(HOST, "r"));
    check(vec![
        Case {
            name: "evicted when another node is clean and fits",
            cluster: TestCluster::new().nodes(nodes()).pods([
                spread("r1", "n1"),
                spread("r2", "n1"),
                spread("r3", "n2"),
            ]),
            args: ON,
            evicted: &["r1"],
        },
        Case {
            name: "no clean node: nothing to gain",
            cluster: TestCluster::new().nodes(nodes()).pods([
                spread("r1", "n1"),
                spread("r2", "n1"),
                spread("r3", "n2"),
                spread("r4", "n3"),
            ]),
            args: ON,
            evicted: &[],
        },
        Case {
            // r1 goes (n3 is clean), and n3 counts as taken: r3 and r4 on n2 find no clean node.
            name: "a preferred eviction takes its target node",
            cluster: TestCluster::new().nodes(nodes()).pods([
                spread("r1", "n1"),
                spread("r2", "n1"),
                spread("r3", "n2"),
                spread("r4", "n2"),
            ]),
            args: ON,
            evicted: &["r1"],
        },
        Case {
            name: "the clean node must fit the pod",
            cluster: TestCluster::new()
                .nodes([
                    node("n1", "a"),
                    node("n2", "a"),
                    node("n3", "b").taint("gpu", "yes", NoSchedule),
                ])
                .pods([spread("r1", "n1"), spread("r2", "n1"), spread("r3", "n2")]),
            args: ON,
            evicted: &[],
        },
        Case {
            name: "a cordoned node is no target",
            cluster: TestCluster::new()
                .nodes([
                    node("n1", "a"),
                    node("n2", "a"),
                    node("n3", "b").unschedulable(),
                ])
                .pods([spread("r1", "n1"), spread("r2", "n1"), spread("r3", "n2")]),
            args: ON,
            evicted: &[],
        },
        Case {
            name: "zone terms need a clean zone",
            cluster: TestCluster::new().nodes(nodes()).pods([
                app("r1", "r", "n1").preferred_anti_affinity(10, avoid(ZONE, "r")),
                app("r2", "r", "n2").preferred_anti_affinity(10, avoid(ZONE, "r")),
            ]),
            args: ON,
            evicted: &["r1"],
        },
        Case {
            name: "required violations keep descheduler's semantics with the option on",
            cluster: TestCluster::new()
                .nodes([node("n1", "a"), node("n2", "a")])
                .pods([
                    app("r1", "r", "n1").anti_affinity(avoid(HOST, "r")),
                    app("r2", "r", "n1").anti_affinity(avoid(HOST, "r")),
                    app("r3", "r", "n2").anti_affinity(avoid(HOST, "r")),
                ]),
            args: ON,
            evicted: &["r1"],
        },
    ]);

    let run = run::<Plugin>(
        &TestCluster::new().nodes(nodes()).pods([
            spread("r1", "n1"),
            spread("r2", "n1"),
            spread("r3", "n2"),
        ]),
        Deschedule,
        ON,
    );
    assert_eq!(
        run.proposals[0].reason,
        "pod anti-affinity (preferred, weight 50, topologyKey kubernetes.io/hostname) is violated \
         by ns/r2 on the same node n1; node n3 fits it and satisfies every preferred anti-affinity \
         term"
    );
}

/// Conformance scenarios 026 (zone anti-affinity across nodes) and 029 (plugin labelSelector
/// applied to the culprits; a DaemonSet violator protected by the evictor), rebuilt with the
/// builders.
#[test]
fn conformance_shapes() {
    let workers = [
        ("w1", "eu-west-1a"),
        ("w2", "eu-west-1b"),
        ("w3", "eu-west-1c"),
        ("w4", "eu-west-1a"),
        ("w5", "eu-west-1b"),
        ("w6", "eu-west-1c"),
    ];
    let ds = |ns: &str, name: &str, at: &str, priority: i32| {
        TestPod::new(ns, &format!("{name}-{at}"))
            .on_node(at)
            .owned_by("DaemonSet", name)
            .priority(priority)
            .cpu("50m")
    };
    let cluster = TestCluster::new()
        .nodes(workers.map(|(n, z)| node(n, z)))
        .pods(workers.map(|(n, _)| ds("kube-system", "kube-proxy", n, 2_000_001_000)))
        .pods(workers.map(|(n, _)| ds("monitoring", "node-exporter", n, 0)))
        .pod(
            pod("db", "primary", "w1")
                .label("role", "primary")
                .priority(0)
                .anti_affinity(TestAffinityTerm::new(ZONE).match_label("role", "replica")),
        )
        .pod(
            pod("db", "replica-1", "w4")
                .label("role", "replica")
                .priority(0),
        )
        .pod(
            pod("db", "replica-2", "w2")
                .label("role", "replica")
                .priority(0),
        );
    let run = cluster.run::<Plugin>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted(), [("db", "primary")]);

    let cluster = TestCluster::new()
        .nodes(workers[..3].iter().map(|&(n, z)| node(n, z)))
        .pod(
            pod("web", "ui", "w1")
                .label("tier", "frontend")
                .anti_affinity(avoid(HOST, "batch")),
        )
        .pod(pod("web", "batch-1", "w1").label("app", "batch"))
        .pod(pod("web", "batch-2", "w2").label("app", "batch"))
        .pod(
            pod("web", "ui-back", "w2")
                .label("tier", "backend")
                .anti_affinity(avoid(HOST, "batch")),
        )
        .pod(
            TestPod::new("web", "log-agent")
                .on_node("w2")
                .owned_by("DaemonSet", "log-agent")
                .label("tier", "frontend")
                .anti_affinity(avoid(HOST, "batch")),
        );
    let run = cluster.run::<Plugin>(
        Deschedule,
        r#"{"labelSelector":{"matchLabels":{"tier":"frontend"}}}"#,
    );
    run.assert_ok();
    assert!(run.proposals.is_empty(), "{:?}", run.evicted_names());
    // Without the selector, ui and ui-back violate (log-agent is protected).
    let run = cluster.run::<Plugin>(Deschedule, "{}");
    assert_eq!(run.evicted_names(), ["ui", "ui-back"]);
}

#[test]
fn invalid_args_fail_the_run() {
    let cluster = TestCluster::new().nodes(nodes());
    for (args, want) in [
        (
            r#"{"namespaces":{"include":["a"],"exclude":["b"]}}"#,
            "namespaces: only one of Include/Exclude namespaces can be set",
        ),
        (
            r#"{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}}"#,
            "failed to get label selectors from strategy's params",
        ),
        (r#"{"preferred":true}"#, "unknown field `preferred`"),
    ] {
        let run = cluster.run::<Plugin>(Deschedule, args);
        let err = run.result.expect_err(args);
        assert!(err.contains(want), "{args}: {err}");
    }
}

/// `includePreferredAntiAffinity` (Rebalancer extension, descheduler #250/#1125) is off by
/// default: a pod violating only a preferred term stays with `{}` and with an explicit `false`,
/// and is evicted with the option on.
#[test]
fn preferred_option_is_off_by_default() {
    let spread =
        |name: &str, at: &str| app(name, "r", at).preferred_anti_affinity(50, avoid(HOST, "r"));
    // (name, cluster, evicted with the option on)
    let cases: Vec<(&str, TestCluster, &[&str])> = vec![
        (
            "a preferred term against another app on the same node",
            TestCluster::new()
                .nodes(nodes())
                .pod(app("web", "web", "n1").preferred_anti_affinity(100, avoid(HOST, "db")))
                .pod(app("db", "db", "n1")),
            &["web"],
        ),
        (
            "replicas preferring to spread over nodes",
            TestCluster::new().nodes(nodes()).pods([
                spread("r1", "n1"),
                spread("r2", "n1"),
                spread("r3", "n2"),
            ]),
            &["r1"],
        ),
        (
            "a preferred zone term",
            TestCluster::new().nodes(nodes()).pods([
                app("r1", "r", "n1").preferred_anti_affinity(10, avoid(ZONE, "r")),
                app("r2", "r", "n2").preferred_anti_affinity(10, avoid(ZONE, "r")),
            ]),
            &["r1"],
        ),
    ];
    for (name, cluster, on) in cases {
        for (args, want) in [
            ("{}", &[][..]),
            (r#"{"includePreferredAntiAffinity":false}"#, &[][..]),
            (r#"{"includePreferredAntiAffinity":null}"#, &[][..]),
            (r#"{"includePreferredAntiAffinity":true}"#, on),
        ] {
            let run = run::<Plugin>(&cluster, Deschedule, args);
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
