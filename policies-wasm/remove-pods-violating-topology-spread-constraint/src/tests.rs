//! Table-driven tests of RemovePodsViolatingTopologySpreadConstraint against the SDK's native host
//! (the same evictor the server runs), after descheduler's `topologyspreadconstraint_test.go`
//! (same clusters and expected counts), plus inclusion policies, pod order inside a domain, the
//! fit preference, refusals and the conformance shapes 043/046/049.
//!
//! Pods are `pod-0`, `pod-1`, … in creation order, request 100m cpu and belong to one
//! ReplicaSet; where descheduler's test names the evicted pods, its test sorts the pods of a node
//! by name, while Rebalancer keeps snapshot order, so the chosen pods can differ among equals.

use rebalancer_policy_sdk::Refusal;
use rebalancer_policy_sdk::testing::*;

use crate::RemovePodsViolatingTopologySpreadConstraint as Plugin;

/// A node with `cpu` millicores, 2Gi and `pods` slots, labelled `key=value` pairs.
fn node(name: &str, cpu: u32, pods: u32, labels: &[(&str, &str)]) -> TestNode {
    labels.iter().fold(
        TestNode::new(name)
            .cpu(&format!("{cpu}m"))
            .memory("2Gi")
            .pods(pods),
        |n, (k, v)| n.label(k, v),
    )
}

/// Two nodes of 2 cpu: n1 in zoneA, n2 in zoneB.
fn two_zones() -> [TestNode; 2] {
    [
        node("n1", 2000, 10, &[("zone", "zoneA")]),
        node("n2", 2000, 10, &[("zone", "zoneB")]),
    ]
}

/// `maxSkew`/`zone`/DoNotSchedule on `foo=bar` (descheduler's `getDefaultTopologyConstraints`).
fn zone(max_skew: i32) -> TestSpread {
    TestSpread::new(max_skew, "zone").match_label("foo", "bar")
}

/// The same on the `node` key (`getDefaultNodeTopologyConstraints`).
fn node_key(max_skew: i32) -> TestSpread {
    TestSpread::new(max_skew, "node").match_label("foo", "bar")
}

/// A group of identical pods (descheduler's `testPodList`).
struct Group {
    count: usize,
    node: &'static str,
    labels: Vec<(&'static str, &'static str)>,
    spread: Vec<TestSpread>,
    tweak: fn(TestPod) -> TestPod,
    owned: bool,
}

fn group(count: usize, node: &'static str) -> Group {
    Group {
        count,
        node,
        labels: vec![("foo", "bar")],
        spread: Vec::new(),
        tweak: |p| p,
        owned: true,
    }
}

impl Group {
    fn spread(mut self, spread: TestSpread) -> Self {
        self.spread.push(spread);
        self
    }
    fn labels(mut self, labels: &[(&'static str, &'static str)]) -> Self {
        self.labels = labels.to_vec();
        self
    }
    fn with(mut self, tweak: fn(TestPod) -> TestPod) -> Self {
        self.tweak = tweak;
        self
    }
    /// No ownerReferences (descheduler's `noOwners`).
    fn bare(mut self) -> Self {
        self.owned = false;
        self
    }
}

/// `pod-0`, `pod-1`, … in namespace `ns1`.
fn create(groups: Vec<Group>) -> Vec<TestPod> {
    let mut pods = Vec::new();
    for g in groups {
        for _ in 0..g.count {
            let mut pod = TestPod::new("ns1", &format!("pod-{}", pods.len()))
                .on_node(g.node)
                .cpu("100m");
            if g.owned {
                pod = pod.owned_by("ReplicaSet", "rs");
            }
            for (k, v) in &g.labels {
                pod = pod.label(k, v);
            }
            for s in &g.spread {
                pod = pod.topology_spread(s.clone());
            }
            pods.push((g.tweak)(pod));
        }
    }
    pods
}

struct Case {
    name: &'static str,
    nodes: Vec<TestNode>,
    pods: Vec<TestPod>,
    args: &'static str,
    /// DefaultEvictor nodeFit.
    node_fit: bool,
    evicted: usize,
    /// When set, exactly these pods, in this order.
    names: Option<&'static [&'static str]>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            nodes: Vec::new(),
            pods: Vec::new(),
            args: "{}",
            node_fit: false,
            evicted: 0,
            names: None,
        }
    }
}

fn check(cases: Vec<Case>) {
    for case in cases {
        let mut cluster = TestCluster::new().nodes(case.nodes).pods(case.pods);
        if case.node_fit {
            cluster = cluster.evictor_args(r#"{"nodeFit":true}"#);
        }
        let run = cluster.run::<Plugin>(Balance, case.args);
        if let Err(e) = &run.result {
            panic!("{}: policy failed: {e}", case.name);
        }
        assert_eq!(
            run.proposals.len(),
            case.evicted,
            "{}: evicted {:?}, refused {:?}, logs {:?}",
            case.name,
            run.evicted_names(),
            run.refused_names(),
            run.log_messages()
        );
        if let Some(names) = case.names {
            assert_eq!(run.evicted_names(), names, "{}", case.name);
        }
        for p in &run.proposals {
            assert_eq!(p.plugin, "RemovePodsViolatingTopologySpreadConstraint");
        }
    }
}

#[test]
fn descheduler_two_domains() {
    check(vec![
        Case {
            name: "2 domains, sizes [2,1], maxSkew=1, move 0 pods",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(1, "n1"),
                group(1, "n2"),
            ]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2]",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(2, "n1"),
                group(1, "n2"),
            ]),
            evicted: 1,
            names: Some(&["pod-2"]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [3,1], maxSkew=1, move 1 pod (both constraints)",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1).schedule_anyway()),
                group(2, "n1"),
                group(1, "n2"),
            ]),
            args: r#"{"constraints":["DoNotSchedule","ScheduleAnyway"]}"#,
            evicted: 1,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [3,1], maxSkew=1, soft constraint ignored by default",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1).schedule_anyway()),
                group(2, "n1"),
                group(1, "n2"),
            ]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [3,1], maxSkew=1, only soft constraints balanced",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(2, "n1"),
                group(1, "n2"),
            ]),
            args: r#"{"constraints":["ScheduleAnyway"]}"#,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [3,1], maxSkew=1, no pods eligible, move 0 pods",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1)).bare(),
                group(2, "n1").bare(),
                group(1, "n2").bare(),
            ]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [3,1], maxSkew=1, exclude kube-system namespace",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(2, "n1"),
                group(1, "n2"),
            ]),
            args: r#"{"namespaces":{"exclude":["kube-system"]}}"#,
            node_fit: true,
            evicted: 1,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [3,1], maxSkew=1, the namespace excluded",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(2, "n1"),
                group(1, "n2"),
            ]),
            args: r#"{"namespaces":{"exclude":["ns1"]}}"#,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [5,2], maxSkew=1, move 1 pod to achieve [4,3]",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(4, "n1"),
                group(2, "n2"),
            ]),
            evicted: 1,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [4,0], maxSkew=1, move 2 pods to achieve [2,2]",
            nodes: two_zones().into(),
            pods: create(vec![group(1, "n1").spread(zone(1)), group(3, "n1")]),
            evicted: 2,
            names: Some(&["pod-2", "pod-3"]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [4,0], maxSkew=1, only move 1 pod since pods with nodeSelector \
                   and nodeAffinity aren't evicted",
            nodes: two_zones().into(),
            pods: create(vec![
                group(2, "n1")
                    .spread(zone(1))
                    .with(|p| p.node_selector("zone", "zoneA")),
                group(1, "n1").spread(zone(1)).with(|p| {
                    p.require_node_affinity(TestTerm::new().expr(
                        "foo",
                        SelectorOperator::In,
                        &["bar"],
                    ))
                }),
                group(1, "n1").spread(zone(1)),
            ]),
            node_fit: true,
            evicted: 1,
            names: Some(&["pod-3"]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [4,0], maxSkew=1, move 2 pods since selector matches multiple nodes",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "zoneA"), ("region", "boston")]),
                node("n2", 2000, 10, &[("zone", "zoneB"), ("region", "boston")]),
            ],
            pods: create(vec![
                group(1, "n1")
                    .spread(zone(1))
                    .with(|p| p.node_selector("region", "boston")),
                group(3, "n1").with(|p| p.node_selector("region", "boston")),
            ]),
            evicted: 2,
            ..Case::default()
        },
        Case {
            name: "2 domains size [2 6], maxSkew=2, should move 1 to get [3 5]",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1").spread(zone(2)),
                group(1, "n1"),
                group(6, "n2"),
            ]),
            evicted: 1,
            ..Case::default()
        },
        Case {
            name: "2 domains size [2 6], maxSkew=2, can't move any because of node taints",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "zoneA")]).taint("hardware", "gpu", NoSchedule),
                node("n2", 2000, 10, &[("zone", "zoneB")]),
            ],
            pods: create(vec![
                group(1, "n1").spread(zone(2)),
                group(1, "n1"),
                group(6, "n2"),
            ]),
            node_fit: true,
            ..Case::default()
        },
        Case {
            name: "2 domains size [2 6], maxSkew=2, can't move any because node1 does not have \
                   enough CPU",
            nodes: vec![
                node("n1", 200, 10, &[("zone", "zoneA")]),
                node("n2", 2000, 10, &[("zone", "zoneB")]),
            ],
            pods: create(vec![
                group(1, "n1").spread(zone(2)),
                group(1, "n1"),
                group(6, "n2"),
            ]),
            node_fit: true,
            ..Case::default()
        },
    ]);
}

#[test]
fn descheduler_many_domains() {
    let os_nodes = |extra: bool| {
        let mut nodes = vec![
            node("n1", 2000, 10, &[("node", "linNodeA"), ("os", "linux")]),
            node("n2", 2000, 10, &[("node", "linNodeB"), ("os", "linux")]),
            node("n3", 2000, 10, &[("node", "linNodeC"), ("os", "linux")]),
            node("n4", 2000, 10, &[("node", "winNodeA"), ("os", "windows")]),
            node("n5", 2000, 10, &[("node", "winNodeB"), ("os", "windows")]),
            node("n6", 2000, 10, &[("node", "winNodeC"), ("os", "windows")]),
        ];
        if extra {
            nodes.push(node(
                "n7",
                2000,
                10,
                &[("node", "winNodeD"), ("os", "windows")],
            ));
        }
        nodes
    };
    let windows = |p: TestPod| p.node_selector("os", "windows");
    let three_zones = || {
        vec![
            node("n1", 2000, 10, &[("zone", "zoneA")]),
            node("n2", 2000, 10, &[("zone", "zoneB")]),
            node("n3", 2000, 10, &[("zone", "zoneC")]),
        ]
    };
    check(vec![
        Case {
            name: "6 domains, sizes [0,0,0,3,3,2], maxSkew=1, balanced over the eligible nodes",
            nodes: os_nodes(false),
            pods: create(vec![
                group(3, "n4").spread(node_key(1)).with(windows),
                group(3, "n5").spread(node_key(1)).with(windows),
                group(2, "n6").spread(node_key(1)).with(windows),
            ]),
            ..Case::default()
        },
        Case {
            name: "7 domains, sizes [0,0,0,3,3,2], maxSkew=1, two pods move to the new node",
            nodes: os_nodes(true),
            pods: create(vec![
                group(3, "n4").spread(node_key(1)).with(windows),
                group(3, "n5").spread(node_key(1)).with(windows),
                group(2, "n6").spread(node_key(1)).with(windows),
            ]),
            evicted: 2,
            ..Case::default()
        },
        Case {
            name: "6 domains, sizes [0,0,0,4,3,1], maxSkew=1, 1 pod is evicted from node 4",
            nodes: os_nodes(false),
            pods: create(vec![
                group(4, "n4").spread(node_key(1)).with(windows),
                group(3, "n5").spread(node_key(1)).with(windows),
                group(1, "n6").spread(node_key(1)).with(windows),
            ]),
            evicted: 1,
            names: Some(&["pod-3"]),
            ..Case::default()
        },
        Case {
            name: "6 domains, sizes [0,0,0,4,3,1], maxSkew=1, pods of winNodeA only fit there",
            nodes: os_nodes(false),
            pods: create(vec![
                group(4, "n4")
                    .spread(node_key(1))
                    .with(|p| p.node_selector("node", "winNodeA")),
                group(3, "n5").spread(node_key(1)).with(windows),
                group(1, "n6").spread(node_key(1)).with(windows),
            ]),
            node_fit: true,
            ..Case::default()
        },
        Case {
            name: "3 domains, sizes [0, 1, 100], maxSkew=1, move 66 pods to get [34, 33, 34]",
            nodes: vec![
                node("n1", 20000, 110, &[("zone", "zoneA")]),
                node("n2", 20000, 110, &[("zone", "zoneB")]),
                node("n3", 20000, 110, &[("zone", "zoneC")]),
            ],
            pods: create(vec![group(1, "n2").spread(zone(1)), group(100, "n3")]),
            evicted: 66,
            ..Case::default()
        },
        Case {
            name: "4 domains, sizes [0, 1, 3, 5], should move 3 to get [2, 2, 3, 2]",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "zoneA")]),
                node("n2", 2000, 10, &[("zone", "zoneB")]),
                node("n3", 2000, 10, &[("zone", "zoneC")]),
                node("n4", 2000, 10, &[("zone", "zoneD")]),
            ],
            pods: create(vec![
                group(1, "n2").spread(zone(1)),
                group(3, "n3"),
                group(5, "n4"),
            ]),
            evicted: 3,
            ..Case::default()
        },
        Case {
            name: "3 domains size [8 7 0], maxSkew=1, should move 5 to get [5 5 5]",
            nodes: three_zones(),
            pods: create(vec![
                group(8, "n1").spread(zone(1)),
                group(7, "n2").spread(zone(1)),
            ]),
            evicted: 5,
            // descheduler's test, sorting each node's pods by name, expects pod-8 and pod-9 from n2.
            names: Some(&["pod-5", "pod-6", "pod-7", "pod-13", "pod-14"]),
            ..Case::default()
        },
        Case {
            name: "3 domains size [5 5 5], maxSkew=1, should move 0 to retain [5 5 5]",
            nodes: three_zones(),
            pods: create(vec![
                group(5, "n1").spread(zone(1)),
                group(5, "n2").spread(zone(1)),
                group(5, "n3").spread(zone(1)),
            ]),
            ..Case::default()
        },
        Case {
            name: "3 domains, sizes [2,3,4], maxSkew=1, NodeFit is enabled, and not enough cpu on \
                   zoneA; nothing should be moved",
            nodes: vec![
                node("n1", 250, 9, &[("zone", "zoneA")]),
                node("n2", 1000, 9, &[("zone", "zoneB")]),
                node("n3", 1000, 9, &[("zone", "zoneC")]),
            ],
            pods: create(vec![
                group(2, "n1").spread(zone(1)),
                group(3, "n2").spread(zone(1)),
                group(4, "n3").spread(zone(1)),
            ]),
            node_fit: true,
            ..Case::default()
        },
        Case {
            name: "3 domains, sizes [2,3,4], maxSkew=1, topologyBalanceNodeFit is false, and not \
                   enough cpu on zoneA; 1 should be moved to force scale-up",
            nodes: vec![
                node("n1", 250, 9, &[("zone", "zoneA")]),
                node("n2", 1000, 9, &[("zone", "zoneB")]),
                node("n3", 1000, 9, &[("zone", "zoneC")]),
            ],
            pods: create(vec![
                group(2, "n1").spread(zone(1)),
                group(3, "n2").spread(zone(1)),
                group(4, "n3").spread(zone(1)),
            ]),
            args: r#"{"topologyBalanceNodeFit":false}"#,
            node_fit: true,
            evicted: 1,
            ..Case::default()
        },
        Case {
            name: "3 domains, sizes [[1,0], [1,1], [2,1]], maxSkew=1, not enough cpu on zoneA",
            nodes: vec![
                node("A1", 150, 9, &[("zone", "zoneA")]),
                node("B1", 1000, 9, &[("zone", "zoneB")]),
                node("C1", 1000, 9, &[("zone", "zoneC")]),
                node("A2", 50, 9, &[("zone", "zoneA")]),
                node("B2", 1000, 9, &[("zone", "zoneB")]),
                node("C2", 1000, 9, &[("zone", "zoneC")]),
            ],
            pods: create(vec![
                group(1, "A1").spread(zone(1)),
                group(1, "B1").spread(zone(1)),
                group(1, "B2").spread(zone(1)),
                group(2, "C1").spread(zone(1)),
                group(1, "C2").spread(zone(1)),
            ]),
            node_fit: true,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [[1,4], [2,1]], maxSkew=1, NodeFit is enabled; should move 1",
            nodes: vec![
                node("A1", 1000, 9, &[("zone", "zoneA")]),
                node("A2", 1000, 9, &[("zone", "zoneA")]),
                node("B1", 1000, 9, &[("zone", "zoneB")]),
                node("B2", 1000, 9, &[("zone", "zoneB")]),
            ],
            pods: create(vec![
                group(1, "A1").spread(zone(1)),
                group(4, "A2").spread(zone(1)),
                group(2, "B1").spread(zone(1)),
                group(1, "B2").spread(zone(1)),
            ]),
            node_fit: true,
            evicted: 1,
            names: Some(&["pod-4"]),
            ..Case::default()
        },
        Case {
            // https://github.com/kubernetes-sigs/descheduler/issues/564
            name: "Multiple constraints (6 nodes/2 zones, 4 pods)",
            nodes: (1..=6)
                .map(|i| {
                    let name = format!("n{i}");
                    let zone = if i <= 3 { "zoneA" } else { "zoneB" };
                    node(&name, 2000, 10, &[("topology.kubernetes.io/zone", zone)])
                })
                .collect(),
            pods: create(
                ["n1", "n2", "n3", "n4"]
                    .into_iter()
                    .map(|n| {
                        group(1, n)
                            .labels(&[("app", "whoami")])
                            .spread(
                                TestSpread::new(1, "topology.kubernetes.io/zone")
                                    .match_label("app", "whoami")
                                    .schedule_anyway(),
                            )
                            .spread(
                                TestSpread::new(1, "kubernetes.io/hostname")
                                    .match_label("app", "whoami"),
                            )
                    })
                    .collect(),
            ),
            args: r#"{"constraints":["DoNotSchedule","ScheduleAnyway"]}"#,
            evicted: 1,
            ..Case::default()
        },
        Case {
            // https://github.com/kubernetes-sigs/descheduler/issues/839: the tainted control plane
            // and infra nodes do not match the pods' required affinity, so they are no domains.
            name: "hostname spread over nodes selected by affinity; tainted nodes are no domains",
            nodes: vec![
                node("controlplane1", 2000, 10, &[("zone", "zoneA")])
                    .taint("node-role.kubernetes.io/controlplane", "true", NoSchedule)
                    .taint("node-role.kubernetes.io/etcd", "true", NoSchedule),
                node(
                    "infraservices1",
                    2000,
                    10,
                    &[("zone", "zoneA"), ("infra_service", "true")],
                )
                .taint("infra_service", "", NoSchedule),
                node(
                    "app1",
                    2000,
                    10,
                    &[("zone", "zoneA"), ("app_service", "true")],
                ),
                node(
                    "app2",
                    2000,
                    10,
                    &[("zone", "zoneB"), ("app_service", "true")],
                ),
            ],
            pods: create(
                ["app1", "app2"]
                    .into_iter()
                    .map(|n| {
                        group(2, n)
                            .labels(&[("app.kubernetes.io/name", "service")])
                            .spread(
                                TestSpread::new(1, "kubernetes.io/hostname")
                                    .match_label("app.kubernetes.io/name", "service"),
                            )
                            .with(|p| {
                                p.require_node_affinity(TestTerm::new().expr(
                                    "app_service",
                                    SelectorOperator::Exists,
                                    &[],
                                ))
                            })
                    })
                    .collect(),
            ),
            node_fit: true,
            ..Case::default()
        },
    ]);
}

#[test]
fn descheduler_taints_selectors_and_terminating() {
    let tolerates = |p: TestPod| p.toleration("taint-test", "test", Some(NoSchedule));
    let pinned = |p: TestPod| p.node_selector("zone", "zoneA");
    let tainted = |effect: TaintEffect| {
        vec![
            node("n1", 2000, 10, &[("zone", "zoneA")]),
            node("n2", 2000, 10, &[("zone", "zoneB")]).taint("taint-test", "test", effect),
        ]
    };
    check(vec![
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 1 pod since pod tolerates the node with taint",
            nodes: tainted(NoSchedule),
            pods: create(vec![
                group(1, "n1").spread(zone(1)).with(tolerates),
                group(1, "n1").with(pinned),
            ]),
            evicted: 1,
            names: Some(&["pod-0"]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 0 pods since pod does not tolerate the \
                   tainted node",
            nodes: tainted(NoSchedule),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(1, "n1").with(pinned),
            ]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 0 pods since pod does not tolerate the \
                   tainted node, and NodeFit is enabled",
            nodes: tainted(NoSchedule),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(1, "n1").with(pinned),
            ]),
            node_fit: true,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with PreferNoSchedule Taint",
            nodes: tainted(PreferNoSchedule),
            pods: create(vec![
                group(1, "n1").spread(zone(1)),
                group(1, "n1").with(pinned),
            ]),
            evicted: 1,
            names: Some(&["pod-0"]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 0 pod for node with unmatched label filtering",
            nodes: two_zones().into(),
            pods: create(vec![group(1, "n1").spread(zone(1)), group(1, "n1")]),
            args: r#"{"labelSelector":{"matchExpressions":[{"key":"foo","operator":"In","values":["baz"]}]}}"#,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with matched label filtering",
            nodes: two_zones().into(),
            pods: create(vec![group(1, "n1").spread(zone(1)), group(1, "n1")]),
            args: r#"{"labelSelector":{"matchExpressions":[{"key":"foo","operator":"In","values":["bar"]}]}}"#,
            evicted: 1,
            names: Some(&["pod-1"]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with matched label \
                   filtering (NotIn op)",
            nodes: two_zones().into(),
            pods: create(vec![group(1, "n1").spread(zone(1)), group(1, "n1")]),
            args: r#"{"labelSelector":{"matchExpressions":[{"key":"foo","operator":"NotIn","values":["baz"]}]}}"#,
            evicted: 1,
            names: Some(&["pod-1"]),
            ..Case::default()
        },
        Case {
            name: "the labelSelector restricts counting: the unselected pods are not in the domains",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1")
                    .spread(zone(1))
                    .labels(&[("foo", "bar"), ("tier", "x")]),
                group(3, "n1"),
            ]),
            args: r#"{"labelSelector":{"matchLabels":{"tier":"x"}}}"#,
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 1 pods given matchLabelKeys on same replicaset",
            nodes: two_zones().into(),
            pods: create(vec![
                group(2, "n1")
                    .labels(&[("foo", "bar"), ("pod-template-hash", "foo")])
                    .spread(zone(1).match_label_keys(&["pod-template-hash"])),
            ]),
            evicted: 1,
            names: Some(&["pod-1"]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [2,0], maxSkew=1, move 0 pods given matchLabelKeys on two \
                   different replicasets",
            nodes: two_zones().into(),
            pods: create(vec![
                group(1, "n1")
                    .labels(&[("foo", "bar"), ("pod-template-hash", "foo")])
                    .spread(zone(1).match_label_keys(&["pod-template-hash"])),
                group(1, "n1")
                    .labels(&[("foo", "bar"), ("pod-template-hash", "bar")])
                    .spread(zone(1).match_label_keys(&["pod-template-hash"])),
            ]),
            ..Case::default()
        },
        Case {
            name: "2 domains, sizes [4,2], maxSkew=1, 2 pods in termination; nothing should be moved",
            nodes: two_zones().into(),
            pods: create(vec![
                group(2, "n1").spread(zone(1)),
                group(2, "n1").spread(zone(1)).with(|p| p.terminating()),
                group(2, "n2").spread(zone(1)),
            ]),
            args: r#"{"labelSelector":{"matchExpressions":[{"key":"foo","operator":"In","values":["bar"]}]}}"#,
            ..Case::default()
        },
        Case {
            name: "terminating pods with the evict annotation are not counted either",
            nodes: two_zones().into(),
            pods: create(vec![
                group(2, "n1").spread(zone(1)),
                group(2, "n1")
                    .spread(zone(1))
                    .with(|p| p.terminating().evict_annotation()),
                group(2, "n2").spread(zone(1)),
            ]),
            ..Case::default()
        },
    ]);
}

#[test]
fn inclusion_policies_and_domains() {
    let three = || {
        vec![
            node("n1", 2000, 10, &[("zone", "a"), ("pool", "web")]),
            node("n2", 2000, 10, &[("zone", "b"), ("pool", "web")]),
            node("n3", 2000, 10, &[("zone", "c"), ("pool", "db")]).taint(
                "dedicated",
                "db",
                NoSchedule,
            ),
        ]
    };
    let web = |p: TestPod| p.node_selector("pool", "web");
    check(vec![
        Case {
            // Domains a, b, c: [3, 0, 0], ideal 1 → one pod to b, then one to c (both fit n2,
            // a node of a below-average domain).
            name: "empty domains of eligible nodes count; nodeTaintsPolicy Ignore keeps c",
            nodes: three(),
            pods: create(vec![group(3, "n1").spread(zone(1))]),
            evicted: 2,
            names: Some(&["pod-2", "pod-1"]),
            ..Case::default()
        },
        Case {
            // Domains a, c: [3, 0] → one pod should move to c, where it does not fit.
            name: "a chosen pod that fits no below-average node stays",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "a")]),
                node("n3", 2000, 10, &[("zone", "c")]).taint("dedicated", "db", NoSchedule),
            ],
            pods: create(vec![group(3, "n1").spread(zone(1))]),
            ..Case::default()
        },
        Case {
            name: "topologyBalanceNodeFit off: the pod that fits nothing still goes",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "a")]),
                node("n3", 2000, 10, &[("zone", "c")]).taint("dedicated", "db", NoSchedule),
            ],
            pods: create(vec![group(3, "n1").spread(zone(1))]),
            args: r#"{"topologyBalanceNodeFit":false}"#,
            evicted: 1,
            names: Some(&["pod-2"]),
            ..Case::default()
        },
        Case {
            // Domains a, b: [3, 0], ideal 1.5 → 1 moves.
            name: "nodeTaintsPolicy Honor drops the tainted domain",
            nodes: three(),
            pods: create(vec![
                group(3, "n1").spread(zone(1).node_taints_policy(InclusionPolicy::Honor)),
            ]),
            evicted: 1,
            ..Case::default()
        },
        Case {
            // Domains a, b (c does not match the nodeSelector): [2, 1] is within maxSkew.
            name: "nodeAffinityPolicy Honor (default): only nodes the pod selects are domains",
            nodes: three(),
            pods: create(vec![
                group(2, "n1").spread(zone(1)).with(web),
                group(1, "n2").spread(zone(1)).with(web),
            ]),
            ..Case::default()
        },
        Case {
            // Domains a, b, c: [2, 1, 0] → one pod would move to c, but it fits no node there.
            name: "nodeAffinityPolicy Ignore: every node with the key is a domain",
            nodes: three(),
            pods: create(vec![
                group(2, "n1")
                    .spread(zone(1).node_affinity_policy(InclusionPolicy::Ignore))
                    .with(web),
                group(1, "n2")
                    .spread(zone(1).node_affinity_policy(InclusionPolicy::Ignore))
                    .with(web),
            ]),
            args: r#"{"topologyBalanceNodeFit":false}"#,
            evicted: 1,
            ..Case::default()
        },
        Case {
            name: "nodes without the topology key are no domains",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "a")]),
                node("n2", 2000, 10, &[]),
            ],
            pods: create(vec![group(3, "n1").spread(zone(1)), group(2, "n2")]),
            ..Case::default()
        },
        Case {
            // n3 is out of scope (not Ready): zone c is no domain, [2, 1] is balanced.
            name: "only nodes in scope make domains",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "a")]),
                node("n2", 2000, 10, &[("zone", "b")]),
                node("n3", 2000, 10, &[("zone", "c")]).not_ready(),
            ],
            pods: create(vec![group(2, "n1").spread(zone(1)), group(1, "n2")]),
            ..Case::default()
        },
        Case {
            // The constraint's owner (pinned to pool=web) makes only a and b eligible, but the
            // counted pods on n3 still add domain c: [3, 0, 3], ideal 2 → one pod leaves c, then
            // one leaves a (without domain c: [3, 0] → only one pod would leave a).
            name: "counted pods on an ineligible node still add their domain",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "a"), ("pool", "web")]),
                node("n2", 2000, 10, &[("zone", "b"), ("pool", "web")]),
                node("n3", 2000, 10, &[("zone", "c"), ("pool", "db")]),
            ],
            pods: create(vec![
                group(1, "n1").spread(zone(1)).with(web),
                group(2, "n1"),
                group(3, "n3"),
            ]),
            evicted: 2,
            names: Some(&["pod-5", "pod-2"]),
            ..Case::default()
        },
        Case {
            name: "a nil constraint selector selects nothing",
            nodes: two_zones().into(),
            pods: create(vec![group(3, "n1").spread(TestSpread::new(1, "zone"))]),
            ..Case::default()
        },
        Case {
            name: "an invalid constraint selector skips the constraint",
            nodes: two_zones().into(),
            pods: create(vec![group(3, "n1").spread(
                TestSpread::new(1, "zone").match_expression("foo", SelectorOperator::In, &[]),
            )]),
            ..Case::default()
        },
        Case {
            // ns1 is [2, 0]; the matching pod of ns2 on n2 does not make it [2, 1].
            name: "other namespaces are balanced on their own",
            nodes: two_zones().into(),
            pods: create(vec![group(2, "n1").spread(zone(1))])
                .into_iter()
                .chain([TestPod::new("ns2", "other")
                    .on_node("n2")
                    .owned_by("ReplicaSet", "rs2")
                    .cpu("100m")
                    .label("foo", "bar")])
                .collect(),
            evicted: 1,
            names: Some(&["pod-1"]),
            ..Case::default()
        },
    ]);
}

/// Four pods of one owner on n1 (zoneA, zoneB empty) with priorities 100, unset, 5 and 1000.
fn mixed_priorities() -> Vec<TestPod> {
    create(vec![group(4, "n1").spread(zone(1))])
        .into_iter()
        .zip([Some(100), None, Some(5), Some(1000)])
        .map(|(p, prio)| match prio {
            Some(v) => p.priority(v),
            None => p,
        })
        .collect()
}

#[test]
fn pod_order_inside_a_domain() {
    check(vec![
        Case {
            // descheduler v0.36 sorts by ascending priority (unset lowest) and takes from the
            // back: the two highest move, in list order.
            name: "higher priority goes first, as in descheduler",
            nodes: two_zones().into(),
            pods: mixed_priorities(),
            evicted: 2,
            names: Some(&["pod-0", "pod-3"]),
            ..Case::default()
        },
        Case {
            name: "evictLowestPriorityFirst: lower priority goes first, unset priority before any",
            nodes: two_zones().into(),
            pods: mixed_priorities(),
            args: r#"{"evictLowestPriorityFirst":true}"#,
            evicted: 2,
            names: Some(&["pod-2", "pod-1"]),
            ..Case::default()
        },
        Case {
            // A nodeSelector keeps a pod at the front, whatever its priority.
            name: "pods with a nodeSelector move last",
            nodes: two_zones().into(),
            pods: create(vec![
                group(2, "n1").spread(zone(1)),
                group(2, "n1")
                    .spread(zone(1))
                    .with(|p| p.priority(1).node_selector("zone", "zoneA")),
            ]),
            args: r#"{"evictLowestPriorityFirst":true}"#,
            evicted: 2,
            names: Some(&["pod-0", "pod-1"]),
            ..Case::default()
        },
        Case {
            name: "pods that fit a below-average node go before those that do not",
            nodes: vec![
                node("n1", 2000, 10, &[("zone", "zoneA")]),
                node("n2", 2000, 10, &[("zone", "zoneB")]).taint("dedicated", "x", NoSchedule),
            ],
            pods: create(vec![
                group(1, "n1")
                    .spread(zone(1))
                    .with(|p| p.toleration("dedicated", "x", Some(NoSchedule))),
                group(3, "n1").spread(zone(1)),
            ]),
            evicted: 1,
            names: Some(&["pod-0"]),
            ..Case::default()
        },
    ]);
}

#[test]
fn refusals() {
    // ns1 is [4, 0, 0] on three zones: pod-2 and pod-3 go to b, then pod-1 to c. ns2 is
    // [3, 0, 1]: other-2 goes to b. All of them sit on n1.
    let pods = || {
        create(vec![group(4, "n1").spread(zone(1))])
            .into_iter()
            .chain((0..4).map(|i| {
                TestPod::new("ns2", &format!("other-{i}"))
                    .on_node(if i < 3 { "n1" } else { "n3" })
                    .owned_by("ReplicaSet", "rs2")
                    .cpu("100m")
                    .label("foo", "bar")
                    .topology_spread(zone(1))
            }))
            .collect::<Vec<_>>()
    };
    let nodes = vec![
        node("n1", 4000, 20, &[("zone", "zoneA")]),
        node("n2", 4000, 20, &[("zone", "zoneB")]),
        node("n3", 4000, 20, &[("zone", "zoneC")]),
    ];
    let run = TestCluster::new()
        .nodes(nodes.clone())
        .pods(pods())
        .max_per_node(1)
        .run::<Plugin>(Balance, "{}");
    run.assert_ok();
    // The per-node limit allows one eviction on n1: the first one.
    assert_eq!(run.evicted_names(), ["pod-2"]);
    assert_eq!(run.refused_names(), ["pod-3"]);
    assert_eq!(run.refusals[0].refusal, Refusal::NodeLimit);

    let run = TestCluster::new()
        .nodes(nodes.clone())
        .pods(pods())
        .max_total(2)
        .run::<Plugin>(Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["pod-2", "pod-3"]);
    assert_eq!(run.refused_names(), ["pod-1"]);
    assert_eq!(run.refusals[0].refusal, Refusal::TotalLimit);

    // A PDB refusal moves on to the next chosen pod.
    let run = TestCluster::new()
        .nodes(nodes)
        .pods(pods().into_iter().map(|p| p.label("guarded", "yes")))
        .pdb(
            TestPdb::new("ns1", "guard")
                .match_label("guarded", "yes")
                .disruptions_allowed(0),
        )
        .run::<Plugin>(Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["other-2"]);
    assert_eq!(run.refused_names(), ["pod-2", "pod-3", "pod-1"]);
}

#[test]
fn reasons() {
    let run = TestCluster::new()
        .nodes(two_zones())
        .pods(create(vec![group(1, "n1").spread(zone(1)), group(3, "n1")]))
        .run::<Plugin>(Balance, "{}");
    run.assert_ok();
    assert_eq!(
        run.proposals[0].reason,
        "pods matching the topology spread constraint (topologyKey zone, maxSkew 1, \
         DoNotSchedule) of ns1/pod-0 are skewed: zone=zoneA has 4 of them and zone=zoneB has 0 \
         (2.00 per domain on average); 2 should move"
    );
}

/// Conformance scenarios 043 (ScheduleAnyway only: ignored by default), 046 (nothing fits the
/// below-average zones: nothing moves) and 049 (matchLabelKeys: only the skewed revision moves),
/// rebuilt with the builders.
#[test]
fn conformance_shapes() {
    let zone_key = "topology.kubernetes.io/zone";
    let workers = |cpus: [&str; 3]| {
        ["a", "b", "c"]
            .iter()
            .zip(cpus)
            .enumerate()
            .map(|(i, (z, cpu))| {
                TestNode::new(&format!("worker-0{}", i + 1))
                    .cpu(cpu)
                    .label(zone_key, &format!("eu-west-1{z}"))
            })
            .collect::<Vec<_>>()
    };
    let web = |name: &str, at: &str, spread: TestSpread| {
        TestPod::new("shop", name)
            .on_node(at)
            .owned_by("ReplicaSet", "web")
            .label("app", "web")
            .cpu("100m")
            .memory("128Mi")
            .topology_spread(spread)
    };
    // 043
    let soft = TestSpread::new(1, zone_key)
        .match_label("app", "web")
        .schedule_anyway();
    let cluster = TestCluster::new()
        .nodes(workers(["4", "4", "4"]))
        .pods((1..=5).map(|i| web(&format!("web-{i}"), "worker-01", soft.clone())))
        .pod(web("web-6", "worker-02", soft.clone()));
    let run = cluster.run::<Plugin>(Balance, "{}");
    run.assert_ok();
    assert!(run.proposals.is_empty());
    assert_eq!(
        cluster
            .run::<Plugin>(Balance, r#"{"constraints":["ScheduleAnyway"]}"#)
            .proposals
            .len(),
        3
    );

    // 046 (and the node-fit-off variant)
    let hard = TestSpread::new(1, zone_key).match_label("app", "heavy");
    let cluster = TestCluster::new()
        .nodes(workers(["8", "2", "2"]))
        .pods(["worker-02", "worker-03"].iter().enumerate().map(|(i, n)| {
            TestPod::new("x", &format!("fill-{i}"))
                .on_node(n)
                .owned_by("ReplicaSet", "fill")
                .cpu("1800m")
        }))
        .pods((1..=4).map(|i| {
            TestPod::new("shop", &format!("heavy-{i}"))
                .on_node("worker-01")
                .owned_by("ReplicaSet", "heavy")
                .label("app", "heavy")
                .cpu("1")
                .memory("1Gi")
                .topology_spread(hard.clone())
        }));
    let run = cluster.run::<Plugin>(Balance, "{}");
    run.assert_ok();
    assert!(run.proposals.is_empty(), "{:?}", run.evicted_names());
    let run = cluster.run::<Plugin>(Balance, r#"{"topologyBalanceNodeFit":false}"#);
    assert_eq!(run.evicted_names(), ["heavy-3", "heavy-4", "heavy-2"]);

    // 049
    let keyed = TestSpread::new(1, "kubernetes.io/hostname")
        .match_label("app", "api")
        .match_label_keys(&["pod-template-hash"]);
    let api = |name: &str, hash: &str, at: &str| {
        TestPod::new("shop", name)
            .on_node(at)
            .owned_by("ReplicaSet", &format!("api-{hash}"))
            .label("app", "api")
            .label("pod-template-hash", hash)
            .cpu("100m")
            .topology_spread(keyed.clone())
    };
    let cluster = TestCluster::new().nodes(workers(["4", "4", "4"])).pods([
        api("old-1", "6b7c8d9f5", "worker-01"),
        api("old-2", "6b7c8d9f5", "worker-02"),
        api("old-3", "6b7c8d9f5", "worker-03"),
        api("new-1", "84d5f6c7b", "worker-01"),
        api("new-2", "84d5f6c7b", "worker-01"),
        api("new-3", "84d5f6c7b", "worker-01"),
        api("new-4", "84d5f6c7b", "worker-01"),
        api("new-5", "84d5f6c7b", "worker-02"),
    ]);
    let run = cluster.run::<Plugin>(Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["new-3", "new-4"]);
}

#[test]
fn invalid_args_fail_the_run() {
    let cluster = TestCluster::new().nodes(two_zones());
    for (args, want) in [
        (
            r#"{"constraints":["Always"]}"#,
            "constraints[0]: constraint Always is not one of [DoNotSchedule ScheduleAnyway]",
        ),
        (
            r#"{"namespaces":{"include":["a"],"exclude":["b"]}}"#,
            "only one of Include/Exclude namespaces can be set",
        ),
        (
            r#"{"labelSelector":{"matchLabels":{"a":"-bad-"}}}"#,
            "failed to get label selectors from strategy's params",
        ),
        (r#"{"topologyBalanceNodeFit":1}"#, "invalid type"),
    ] {
        let run = cluster.run::<Plugin>(Balance, args);
        let err = run.result.expect_err(args);
        assert!(err.contains(want), "{args}: {err}");
    }
}
