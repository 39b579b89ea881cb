//! Table-driven tests of RemoveDuplicates against the SDK's native host (the same evictor the
//! server runs), after descheduler's `removeduplicates_test.go` plus the reactions to refusals.

use rebalancer_policy_sdk::Refusal;
use rebalancer_policy_sdk::testing::*;

use crate::RemoveDuplicates;

/// A pod of ReplicaSet `rs` (image `image`) on `node`.
fn rs_pod(namespace: &str, name: &str, node: &str) -> TestPod {
    TestPod::new(namespace, name)
        .on_node(node)
        .owned_by("ReplicaSet", "rs")
        .cpu("100m")
}

/// `n` pods named `{prefix}{i}` of ReplicaSet `rs` in `dev` on `node`.
fn replicas(prefix: &str, node: &str, n: usize) -> Vec<TestPod> {
    (1..=n)
        .map(|i| rs_pod("dev", &format!("{prefix}{i}"), node))
        .collect()
}

fn nodes(names: &[&str]) -> Vec<TestNode> {
    names.iter().map(|n| TestNode::new(n)).collect()
}

struct Case {
    name: &'static str,
    cluster: TestCluster,
    args: &'static str,
    /// Number of accepted proposals.
    evicted: usize,
}

fn check(cases: Vec<Case>) {
    for case in cases {
        let run = run::<RemoveDuplicates>(&case.cluster, Balance, case.args);
        run.assert_ok();
        assert_eq!(
            run.proposals.len(),
            case.evicted,
            "{}: proposed {:?}, refused {:?}",
            case.name,
            run.evicted_names(),
            run.refused_names()
        );
        for p in &run.proposals {
            assert_eq!(p.plugin, "RemoveDuplicates", "{}", case.name);
        }
    }
}

#[test]
fn descheduler_find_duplicate_pods() {
    let p = |name: &str, ns: &str| rs_pod(ns, name, "n1");
    check(vec![
        Case {
            name: "three pods of one ReplicaSet on two nodes: one goes",
            cluster: TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
                p("p1", "dev"),
                p("p2", "dev"),
                p("p3", "dev"),
            ]),
            args: "{}",
            evicted: 1,
        },
        Case {
            name: "ReplicaSet kind excluded",
            cluster: TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
                p("p1", "dev"),
                p("p2", "dev"),
                p("p3", "dev"),
            ]),
            args: r#"{"excludeOwnerKinds":["ReplicaSet"]}"#,
            evicted: 0,
        },
        Case {
            name: "same ReplicaSet name in two namespaces are two owners",
            cluster: TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
                p("p1", "dev"),
                p("p2", "dev"),
                p("p3", "dev"),
                p("p8", "test"),
                p("p9", "test"),
                p("p10", "test"),
            ]),
            args: "{}",
            evicted: 2,
        },
        Case {
            name: "DaemonSet, local storage, mirror and critical pods are not evictable",
            cluster: TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
                TestPod::new("dev", "ds1")
                    .on_node("n1")
                    .owned_by("DaemonSet", "ds"),
                TestPod::new("dev", "ds2")
                    .on_node("n1")
                    .owned_by("DaemonSet", "ds"),
                p("local1", "dev").host_path("data"),
                p("local2", "dev").host_path("data"),
                TestPod::new("dev", "m1")
                    .on_node("n1")
                    .owned_by("Node", "n1")
                    .mirror(),
                TestPod::new("dev", "m2")
                    .on_node("n1")
                    .owned_by("Node", "n1")
                    .mirror(),
                p("crit1", "kube-system").priority(2_000_000_000),
                p("crit2", "kube-system").priority(2_000_000_000),
            ]),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "same owner, different images",
            cluster: TestCluster::new()
                .nodes(nodes(&["n1", "n2"]))
                .pods([p("p11", "dev").image("foo"), p("p12", "dev").image("bar")]),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "a pod with several containers does not match itself",
            cluster: TestCluster::new()
                .nodes(nodes(&["n1", "n2"]))
                .pod(p("p13", "dev").container(TestContainer::new("foo", "foo"))),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "matching owners but not all images",
            cluster: TestCluster::new().nodes(nodes(&["n1", "n2"])).pods([
                p("p11", "dev").image("foo"),
                p("p13", "dev").container(TestContainer::new("foo", "foo")),
            ]),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "the only other node is tainted: fewer than two feasible nodes",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n3").taint("hardware", "gpu", NoSchedule))
                .pods([p("p1", "dev"), p("p2", "dev"), p("p3", "dev")]),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "nodeSelector matched by no node",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n4").label("datacenter", "east"))
                .pods(
                    ["p15", "p16", "p17"]
                        .map(|n| p(n, "node-fit").node_selector("datacenter", "west")),
                ),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "a cordoned node still counts as feasible (descheduler does not check it)",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n5").unschedulable())
                .pods([p("p1", "dev"), p("p2", "dev"), p("p3", "dev")]),
            args: "{}",
            evicted: 1,
        },
        Case {
            name: "... but nodeFit (PreEvictionFilter) rejects a pod with nowhere to go",
            cluster: TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n5").unschedulable())
                .pods([p("p1", "dev"), p("p2", "dev"), p("p3", "dev")])
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "nodeFit: the other node lacks cpu",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").cpu("2"))
                .node(TestNode::new("n6").cpu("200m"))
                .pods([p("p1", "dev"), p("p2", "dev"), p("p3", "dev")])
                .pod(TestPod::new("test", "cpu-eater").on_node("n6").cpu("150m"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "nodeFit: the other node has room",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").cpu("2"))
                .node(TestNode::new("n6").cpu("200m"))
                .pods([p("p1", "dev"), p("p2", "dev"), p("p3", "dev")])
                .pod(TestPod::new("test", "cpu-saver").on_node("n6").cpu("100m"))
                .evictor_args(r#"{"nodeFit":true}"#),
            args: "{}",
            evicted: 1,
        },
    ]);
}

#[test]
fn descheduler_remove_duplicates_uniformly() {
    let three = || nodes(&["n1", "n2", "n3"]);
    let spread = |n1: usize, n2: usize, n3: usize| {
        let mut pods = replicas("a", "n1", n1);
        pods.extend(replicas("b", "n2", n2));
        pods.extend(replicas("c", "n3", n3));
        pods
    };
    let control_plane = |name: &str| {
        TestNode::new(name).taint("node-role.kubernetes.io/control-plane", "", NoSchedule)
    };
    let k_pod = |name: &str, node: &str, k: &str| {
        rs_pod("dev", name, node).toleration(k, &k.replace('k', "v"), Some(NoSchedule))
    };
    let not_master = |name: &str, node: &str, k: &str| {
        rs_pod("dev", name, node).require_node_affinity(
            TestTerm::new()
                .expr(
                    "node-role.kubernetes.io/control-plane",
                    SelectorOperator::DoesNotExist,
                    &[],
                )
                .expr(k, SelectorOperator::DoesNotExist, &[]),
        )
    };
    let worker_sel = |name: &str, node: &str, k: &str| {
        rs_pod("dev", name, node).node_selector("node-role.kubernetes.io/worker", k)
    };
    let workers_and_masters = |f: &dyn Fn(&str, &str, &str) -> TestPod| {
        let ks = ["k1", "k2", "k1", "k2", "k1", "k2", "k1", "k2", "k1"];
        let on = ["w1", "w1", "w1", "w1", "w1", "w2", "w2", "w2", "w3"];
        (0..9)
            .map(|i| f(&format!("p{}", i + 1), on[i], ks[i]))
            .collect::<Vec<_>>()
    };

    check(vec![
        Case {
            name: "(5,3,1) -> (3,3,3)",
            cluster: TestCluster::new().nodes(three()).pods(spread(5, 3, 1)),
            args: "{}",
            evicted: 2,
        },
        Case {
            name: "(5,3,1) with the third node out of scope -> (4,4)",
            cluster: TestCluster::new()
                .nodes(nodes(&["n1", "n2"]))
                .node(TestNode::new("n3").not_ready())
                .pods(spread(5, 3, 1)),
            args: "{}",
            evicted: 1,
        },
        Case {
            name: "(2,0,0) -> (1,1,0)",
            cluster: TestCluster::new().nodes(three()).pods(spread(2, 0, 0)),
            args: "{}",
            evicted: 1,
        },
        Case {
            name: "a single pod is never a duplicate",
            cluster: TestCluster::new().nodes(three()).pods(spread(1, 0, 0)),
            args: "{}",
            evicted: 0,
        },
        Case {
            name: "two owners, (5,3,1) and (1,3,5)",
            cluster: TestCluster::new()
                .nodes(three())
                .pods(spread(5, 3, 1))
                .pods(
                    [
                        ("q1", "n1"),
                        ("q2", "n2"),
                        ("q3", "n2"),
                        ("q4", "n2"),
                        ("q5", "n3"),
                        ("q6", "n3"),
                        ("q7", "n3"),
                        ("q8", "n3"),
                        ("q9", "n3"),
                    ]
                    .map(|(name, node)| {
                        TestPod::new("dev", name)
                            .on_node(node)
                            .owned_by("ReplicaSet", "rs-2")
                    }),
                ),
            args: "{}",
            evicted: 4,
        },
        Case {
            name: "only the pods with the same images are duplicates",
            cluster: TestCluster::new().nodes(three()).pods([
                rs_pod("dev", "p1", "n1").container(TestContainer::new("foo", "foo")),
                rs_pod("dev", "p2", "n1").container(TestContainer::new("bar", "bar")),
                rs_pod("dev", "p3", "n1").container(TestContainer::new("baz", "baz")),
                rs_pod("dev", "p4", "n1").container(TestContainer::new("foo", "foo")),
            ]),
            args: "{}",
            evicted: 1,
        },
        Case {
            name: "taints: the control-plane nodes are not feasible",
            cluster: TestCluster::new()
                .nodes(nodes(&["w1", "w2", "w3"]))
                .nodes(["m1", "m2", "m3"].map(control_plane))
                .pods(workers_and_masters(&k_pod)),
            args: "{}",
            evicted: 2,
        },
        Case {
            name: "required node affinity excludes the control-plane nodes",
            cluster: TestCluster::new()
                .nodes(nodes(&["w1", "w2", "w3"]))
                .nodes(
                    ["m1", "m2", "m3"].map(|n| {
                        TestNode::new(n).label("node-role.kubernetes.io/control-plane", "")
                    }),
                )
                .pods(workers_and_masters(&not_master)),
            args: "{}",
            evicted: 2,
        },
        Case {
            name: "nodeSelector selects the workers",
            cluster: TestCluster::new()
                .nodes(
                    ["w1", "w2", "w3"]
                        .map(|n| TestNode::new(n).label("node-role.kubernetes.io/worker", "k2")),
                )
                .nodes(nodes(&["m1", "m2", "m3"]))
                .pods(workers_and_masters(&|name: &str, node: &str, _k: &str| {
                    worker_sel(name, node, "k2")
                })),
            args: "{}",
            evicted: 2,
        },
        Case {
            name: "nodeSelector selects no node",
            cluster: TestCluster::new()
                .nodes(nodes(&["w1", "w2", "w3", "m1", "m2", "m3"]))
                .pods(workers_and_masters(&worker_sel)),
            args: "{}",
            evicted: 0,
        },
    ]);
}

#[test]
fn upper_average_math() {
    check(vec![
        Case {
            // ceil(7 / 3) = 3: four of the seven go.
            name: "seven on one node of three",
            cluster: TestCluster::new()
                .nodes(nodes(&["n1", "n2", "n3"]))
                .pods(replicas("a", "n1", 7)),
            args: "{}",
            evicted: 4,
        },
        Case {
            // ceil(6 / 2) = 3: n1 keeps three.
            name: "occurrences on other nodes count",
            cluster: TestCluster::new()
                .nodes(nodes(&["n1", "n2"]))
                .pods(replicas("a", "n1", 4))
                .pods(replicas("b", "n2", 2)),
            args: "{}",
            evicted: 1,
        },
        Case {
            // ceil(6 / 3) = 2 → (4,2,0) -> (2,2,0).
            name: "an empty feasible node lowers the average",
            cluster: TestCluster::new()
                .nodes(nodes(&["n1", "n2", "n3"]))
                .pods(replicas("a", "n1", 4))
                .pods(replicas("b", "n2", 2)),
            args: "{}",
            evicted: 2,
        },
        Case {
            // Only pods passing the evictor count: a terminal pod and a non-evictable one don't.
            name: "terminal and non-evictable pods are not occurrences",
            cluster: TestCluster::new()
                .nodes(nodes(&["n1", "n2"]))
                .pods(replicas("a", "n1", 2))
                .pod(rs_pod("dev", "done", "n1").phase(PodPhase::Succeeded))
                .pod(rs_pod("dev", "local", "n1").empty_dir("scratch")),
            args: "{}",
            evicted: 1,
        },
        Case {
            name: "pods on nodes outside the profile's nodeSelector are ignored",
            cluster: TestCluster::new()
                .node(TestNode::new("n1").label("pool", "a"))
                .node(TestNode::new("n2").label("pool", "a"))
                .node(TestNode::new("n3").label("pool", "b"))
                .pods(replicas("a", "n3", 4))
                .node_selector("pool=a"),
            args: "{}",
            evicted: 0,
        },
    ]);
}

#[test]
fn namespaces_filter() {
    let cluster = || {
        TestCluster::new()
            .nodes(nodes(&["n1", "n2"]))
            .pods(["a1", "a2", "a3"].map(|n| rs_pod("alpha", n, "n1")))
            .pods(["b1", "b2", "b3"].map(|n| rs_pod("beta", n, "n1")))
    };
    let run_with = |args: &str| {
        let run = run::<RemoveDuplicates>(&cluster(), Balance, args);
        run.assert_ok();
        let mut namespaces: Vec<String> =
            run.proposals.iter().map(|p| p.namespace.clone()).collect();
        namespaces.sort();
        namespaces
    };
    assert_eq!(run_with("{}"), ["alpha", "beta"]);
    assert_eq!(
        run_with(r#"{"namespaces":{"include":["alpha"]}}"#),
        ["alpha"]
    );
    assert_eq!(
        run_with(r#"{"namespaces":{"exclude":["alpha"]}}"#),
        ["beta"]
    );
    assert_eq!(
        run_with(r#"{"namespaces":{"include":["gamma"]}}"#),
        Vec::<String>::new()
    );
    assert_eq!(
        run_with(r#"{"namespaces":{"exclude":["gamma"]}}"#),
        ["alpha", "beta"]
    );

    let both = run::<RemoveDuplicates>(
        &cluster(),
        Balance,
        r#"{"namespaces":{"include":["alpha"],"exclude":["beta"]}}"#,
    );
    let err = both
        .result
        .expect_err("include and exclude together are invalid");
    assert!(
        err.contains("only one of Include/Exclude namespaces can be set"),
        "{err}"
    );
    assert!(both.proposals.is_empty());
}

#[test]
fn exclude_owner_kinds_matches_any_owner_reference() {
    let cluster = TestCluster::new()
        .nodes(nodes(&["n1", "n2"]))
        .pods(["j1", "j2", "j3"].map(|n| {
            TestPod::new("batch", n)
                .on_node("n1")
                .owned_by("Job", "nightly")
        }))
        .pods(["s1", "s2", "s3"].map(|n| {
            TestPod::new("batch", n)
                .on_node("n1")
                .owned_by("ReplicaSet", "web")
                .owned_by("CustomOwner", "web-owner")
        }));
    let run = run::<RemoveDuplicates>(
        &cluster,
        Balance,
        r#"{"excludeOwnerKinds":["CustomOwner"]}"#,
    );
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["j3"]);
}

#[test]
fn keeps_the_first_pods_and_explains_why() {
    let cluster = TestCluster::new().nodes(nodes(&["n1", "n2", "n3"])).pods(
        ["w1", "w2", "w3", "w4", "w5"].map(|n| {
            TestPod::new("shop", n)
                .on_node("n1")
                .owned_by("ReplicaSet", "web")
        }),
    );
    let run = run::<RemoveDuplicates>(&cluster, Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["w3", "w4", "w5"]);
    assert_eq!(
        run.proposals[0].reason,
        "5 pods of ReplicaSet shop/web on node n1; at most 2 per node across 3 feasible nodes"
    );
}

#[test]
fn node_limit_moves_on_to_the_next_node() {
    // 8 pods over 4 feasible nodes: at most 2 per node, so 2 go from n1 and 2 from n2 — but only
    // one per node is allowed.
    let cluster = TestCluster::new()
        .nodes(nodes(&["n1", "n2", "n3", "n4"]))
        .pods(replicas("a", "n1", 4))
        .pods(replicas("b", "n2", 4))
        .max_per_node(1);
    let run = run::<RemoveDuplicates>(&cluster, Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a3", "b3"]);
    // One refusal per node, then the plugin moved on instead of trying the node's next pod.
    assert_eq!(run.refused_names(), ["a4", "b4"]);
    assert!(run.refusals.iter().all(|r| r.refusal == Refusal::NodeLimit));
}

#[test]
fn total_limit_stops_the_plugin() {
    let cluster = TestCluster::new()
        .nodes(nodes(&["n1", "n2", "n3", "n4"]))
        .pods(replicas("a", "n1", 4))
        .pods(replicas("b", "n2", 4))
        .pods(["x1", "x2", "x3"].map(|n| {
            TestPod::new("other", n)
                .on_node("n3")
                .owned_by("ReplicaSet", "x")
        }))
        .max_total(1);
    let run = run::<RemoveDuplicates>(&cluster, Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a3"]);
    assert_eq!(run.refused_names(), ["a4"]);
    assert_eq!(run.refusals[0].refusal, Refusal::TotalLimit);
}

#[test]
fn other_refusals_move_on_to_the_next_pod() {
    // a3 is protected by a PDB without disruptions left; a4 goes instead.
    let cluster = TestCluster::new()
        .nodes(nodes(&["n1", "n2"]))
        .pods(replicas("a", "n1", 2))
        .pod(rs_pod("dev", "a3", "n1").label("guarded", "yes"))
        .pod(rs_pod("dev", "a4", "n1"))
        .pdb(
            TestPdb::new("dev", "guard")
                .match_label("guarded", "yes")
                .disruptions_allowed(0),
        );
    let run = run::<RemoveDuplicates>(&cluster, Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["a4"]);
    assert_eq!(run.refused_names(), ["a3"]);
    assert!(matches!(
        run.refusals[0].refusal,
        Refusal::DisruptionBudget(_)
    ));
}

#[test]
fn a_pod_with_two_owners_is_proposed_once() {
    // descheduler's "two replica sets" case: every pod belongs to two owner keys, so it is
    // evicted once per owner there (4 calls). Here the second proposal of the same pod is refused
    // by the evictor, so the outcome is two pods.
    let two_owners = |name: &str, node: &str| {
        TestPod::new("dev", name)
            .on_node(node)
            .owned_by("ReplicaSet", "replicaset-1")
            .owned_by("ReplicaSet", "replicaset-2")
    };
    let mut pods = Vec::new();
    for (i, node) in ["n1", "n1", "n1", "n1", "n1", "n2", "n2", "n2", "n3"]
        .iter()
        .enumerate()
    {
        pods.push(two_owners(&format!("p{}", i + 1), node));
    }
    let cluster = TestCluster::new()
        .nodes(nodes(&["n1", "n2", "n3"]))
        .pods(pods);
    let run = run::<RemoveDuplicates>(&cluster, Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["p4", "p5"]);
    assert_eq!(run.refused_names(), ["p4", "p5"]);
}

#[test]
fn different_constraints_union_their_feasible_nodes() {
    // Half the duplicates tolerate the gpu taint (feasible: n1, n2, gpu1), the other half do not
    // (n1, n2): 3 distinct feasible nodes, 6 pods → at most 2 per node.
    let gpu = |name: &str| rs_pod("dev", name, "n1").toleration("hardware", "gpu", None);
    let cluster = TestCluster::new()
        .nodes(nodes(&["n1", "n2"]))
        .node(TestNode::new("gpu1").taint("hardware", "gpu", NoExecute))
        .pods([
            rs_pod("dev", "p1", "n1"),
            gpu("p2"),
            rs_pod("dev", "p3", "n1"),
        ])
        .pods([gpu("p4"), rs_pod("dev", "p5", "n1"), gpu("p6")]);
    let run = run::<RemoveDuplicates>(&cluster, Balance, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["p3", "p4", "p5", "p6"]);
    assert!(run.proposals[0].reason.ends_with("across 3 feasible nodes"));

    // A combination matching a single node adds nothing: PreferNoSchedule taints are ignored
    // but the NoSchedule one on n2 is not tolerated by anyone.
    let cluster = TestCluster::new()
        .node(TestNode::new("n1").taint("soft", "x", PreferNoSchedule))
        .node(TestNode::new("n2").taint("hard", "x", NoSchedule))
        .pods(replicas("a", "n1", 3));
    let single = cluster.run::<RemoveDuplicates>(Balance, "{}");
    single.assert_ok();
    assert!(single.proposals.is_empty());
}

#[test]
fn invalid_args_are_reported() {
    let cluster = TestCluster::new().nodes(nodes(&["n1", "n2"]));
    let run = run::<RemoveDuplicates>(&cluster, Balance, r#"{"excludeOwnerKind":["Job"]}"#);
    let err = run.result.expect_err("unknown field");
    assert!(err.contains("unknown field `excludeOwnerKind`"), "{err}");
}

#[test]
fn detail_logging_is_bounded() {
    // 80 owners with duplicates and a single feasible node each: one skip line per owner would
    // grow with the cluster, so only the first 50 are written.
    let mut cluster = TestCluster::new()
        .node(TestNode::new("n1"))
        .node(TestNode::new("n2").taint("hard", "x", NoSchedule));
    for o in 0..80 {
        cluster = cluster.pods((0..2).map(|i| {
            TestPod::new("dev", &format!("rs{o}-{i}"))
                .on_node("n1")
                .owned_by("ReplicaSet", &format!("rs{o}"))
        }));
    }
    let run = run::<RemoveDuplicates>(&cluster, Balance, "{}");
    run.assert_ok();
    assert!(run.proposals.is_empty());
    let messages = run.log_messages();
    let skips = messages
        .iter()
        .filter(|m| m.contains("fewer than two feasible nodes"))
        .count();
    assert_eq!(skips, 50, "{messages:?}");
    assert!(
        messages.contains(&"30 more detail lines not logged"),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("RemoveDuplicates: 160 candidate pods, 80 owners")),
        "{messages:?}"
    );
}

/// `targetResourceFit` (Rebalancer extension, descheduler #1237): each scenario runs with the
/// option off (descheduler's behaviour: resources are not looked at) and on.
#[test]
fn target_resource_fit_option() {
    const ON: &str = r#"{"targetResourceFit":true}"#;
    // A pod of ReplicaSet `owner` in `dev`.
    let of = |owner: &str, name: &str, node: &str| {
        TestPod::new("dev", name)
            .on_node(node)
            .owned_by("ReplicaSet", owner)
            .cpu("100m")
    };
    let filler = |name: &str, node: &str, cpu: &str| {
        TestPod::new("other", name)
            .on_node(node)
            .owned_by("ReplicaSet", name)
            .cpu(cpu)
    };
    // (name, cluster, evicted with the option off, evicted with it on)
    let cases: Vec<(&str, TestCluster, usize, usize)> = vec![
        (
            "the only other node is full: descheduler evicts anyway, the option keeps the pod",
            TestCluster::new()
                .node(TestNode::new("n1").cpu("2"))
                .node(TestNode::new("n2").cpu("200m"))
                .pods(replicas("p", "n1", 3))
                .pod(filler("cpu-eater", "n2", "150m")),
            1,
            0,
        ),
        (
            "the other node has room",
            TestCluster::new()
                .node(TestNode::new("n1").cpu("2"))
                .node(TestNode::new("n2").cpu("200m"))
                .pods(replicas("p", "n1", 3))
                .pod(filler("cpu-saver", "n2", "100m")),
            1,
            1,
        ),
        (
            "memory counts too",
            TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").memory("1Gi"))
                .pods(
                    replicas("p", "n1", 3)
                        .into_iter()
                        .map(|p| p.memory("512Mi")),
                )
                .pod(filler("mem-eater", "n2", "10m").memory("768Mi")),
            1,
            0,
        ),
        (
            "no free pod slot on the other node",
            TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").pods(1))
                .pods(replicas("p", "n1", 3))
                .pod(filler("slot-taker", "n2", "10m")),
            1,
            0,
        ),
        (
            "a terminal pod on the other node frees its requests",
            TestCluster::new()
                .node(TestNode::new("n1").cpu("2"))
                .node(TestNode::new("n2").cpu("200m"))
                .pods(replicas("p", "n1", 3))
                .pod(filler("done", "n2", "200m").phase(PodPhase::Succeeded)),
            1,
            1,
        ),
        (
            // (5,0,0) on three nodes: three go. n2 has room for one pod and n3 for none, but
            // like nodeFit the check reserves nothing, so all three see n2's room.
            "room is checked, not reserved",
            TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").cpu("150m"))
                .node(TestNode::new("n3").cpu("100m"))
                .pods(replicas("p", "n1", 5))
                .pod(filler("half", "n3", "50m")),
            3,
            3,
        ),
        (
            // rs-a: three pods fill n2 and one of them goes to n1. rs-b: three pods on n1, one
            // should go to n2 — but the proposed rs-a pod is still running there, so n2 is full.
            "pods proposed earlier in the run still take room",
            TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").cpu("300m"))
                .pods(["a1", "a2", "a3"].map(|n| of("rs-a", n, "n2")))
                .pods(["b1", "b2", "b3"].map(|n| of("rs-b", n, "n1"))),
            2,
            1,
        ),
        (
            // The target must be feasible for the pod: n3 has room but a taint the pods do not
            // tolerate, so it is not part of their target set.
            "room on an infeasible node does not count",
            TestCluster::new()
                .node(TestNode::new("n1"))
                .node(TestNode::new("n2").cpu("100m"))
                .node(TestNode::new("n3").taint("dedicated", "db", NoSchedule))
                .pods(replicas("p", "n1", 3))
                .pod(filler("full", "n2", "100m")),
            1,
            0,
        ),
    ];
    for (name, cluster, off, on) in cases {
        for (args, want) in [
            ("{}", off),
            (r#"{"targetResourceFit":false}"#, off),
            (ON, on),
        ] {
            let run = run::<RemoveDuplicates>(&cluster, Balance, args);
            run.assert_ok();
            assert_eq!(
                run.proposals.len(),
                want,
                "{name} with {args}: proposed {:?}, logs {:?}",
                run.evicted_names(),
                run.log_messages()
            );
        }
    }

    // The reason names a node with room; the summary counts the pods kept.
    let cluster = TestCluster::new()
        .node(TestNode::new("n1").cpu("2"))
        .node(TestNode::new("n2").cpu("200m"))
        .pods(replicas("p", "n1", 3));
    let first = run::<RemoveDuplicates>(&cluster, Balance, ON);
    assert_eq!(
        first.proposals[0].reason,
        "3 pods of ReplicaSet dev/rs on node n1; at most 2 per node across 2 feasible nodes; node \
         n2 has room for it"
    );
    let cluster = cluster.pod(filler("cpu-eater", "n2", "150m"));
    let kept = run::<RemoveDuplicates>(&cluster, Balance, ON);
    let logs = kept.log_messages();
    assert!(
        logs.iter()
            .any(|m| m.contains("1 kept for lack of room elsewhere")),
        "{logs:?}"
    );
    assert!(
        logs.iter().any(|m| m.contains(
            "dev/p3 kept (targetResourceFit): no other feasible node has room for its requests"
        )),
        "{logs:?}"
    );
}
