//! Filter, PreEvictionFilter and nodeFit.

use super::*;

#[test]
fn filter_basic_rules() {
    let c = two_nodes()
        .pod(owned_pod("a", "plain"))
        .pod(owned_pod("a", "mirror").mirror())
        .pod(owned_pod("a", "static").static_pod())
        .pod(owned_pod("a", "from-api").annotation(SOURCE_ANNOTATION, "api"))
        .pod(owned_pod("a", "terminating").terminating())
        .pod(
            owned_pod("a", "evict-mirror")
                .mirror()
                .empty_dir("x")
                .evict_annotation(),
        )
        .pod(
            owned_pod("a", "evict-false")
                .terminating()
                .annotation(EVICT_ANNOTATION, "false"),
        )
        .pod(owned_pod("a", "prefer").prefer_no_eviction())
        .pod(owned_pod("a", "critical").priority(2_000_000_000))
        .pod(owned_pod("a", "almost-critical").priority(1_999_999_999))
        .pod(TestPod::new("a", "bare").on_node("n1"))
        .pod(
            TestPod::new("a", "bare-failed")
                .on_node("n1")
                .phase(PodPhase::Failed),
        )
        .pod(owned_pod("a", "empty-dir").empty_dir("cache"))
        .pod(owned_pod("a", "host-path").host_path("logs"))
        .pod(owned_pod("a", "ephemeral").ephemeral_volume("scratch"))
        .pod(
            TestPod::new("a", "ds")
                .on_node("n1")
                .owned_by("DaemonSet", "agent"),
        )
        .pod(owned_pod("a", "pvc").pvc("data", "data-0"))
        .pod(owned_pod("a", "claims").resource_claims());
    assert_filter(
        &c,
        &[
            ("plain", None),
            ("mirror", Some("pod is a mirror pod")),
            ("static", Some("pod is a static pod")),
            ("from-api", None),
            ("terminating", Some("pod is terminating")),
            ("evict-mirror", None),
            ("evict-false", None),
            ("prefer", None),
            ("critical", Some("system critical priority")),
            ("almost-critical", None),
            ("bare", Some("pod does not have any ownerRefs")),
            ("bare-failed", Some("pod does not have any ownerRefs")),
            ("empty-dir", Some("local storage")),
            ("host-path", Some("local storage")),
            ("ephemeral", None),
            ("ds", Some("daemonset pods are protected")),
            ("pvc", None),
            ("claims", None),
        ],
    );
    // Every failure is listed, in descheduler's order.
    let (_, failures) = filter_of(
        &two_nodes().pod(TestPod::new("a", "p").on_node("n1").mirror().host_path("h")),
        "a",
        "p",
    );
    assert_eq!(
        failures,
        [
            "pod is a mirror pod",
            "pod is a static pod",
            "pod does not have any ownerRefs",
            "pod has local storage and is protected against eviction",
        ]
    );
}

#[test]
fn filter_protection_switches() {
    let pods = || {
        two_nodes()
            .priority_class("standard", 1000)
            .pod(owned_pod("a", "critical").priority(2_000_000_000))
            .pod(owned_pod("a", "p1000").priority(1000))
            .pod(owned_pod("a", "p999").priority(999))
            .pod(owned_pod("a", "no-priority"))
            .pod(TestPod::new("a", "bare").on_node("n1"))
            .pod(
                TestPod::new("a", "bare-failed")
                    .on_node("n1")
                    .phase(PodPhase::Failed),
            )
            .pod(owned_pod("a", "empty-dir").empty_dir("cache"))
            .pod(
                TestPod::new("a", "ds")
                    .on_node("n1")
                    .owned_by("DaemonSet", "agent"),
            )
            .pod(owned_pod("a", "claims").resource_claims())
    };
    assert_filter(
        &pods().evictor_args(r#"{"priorityThreshold": {"name": "standard"}}"#),
        &[
            ("critical", Some("system critical priority")),
            (
                "p1000",
                Some("higher priority than specified priority class threshold"),
            ),
            ("p999", None),
            ("no-priority", None),
        ],
    );
    // evictSystemCriticalPods turns the threshold off too.
    assert_filter(
        &pods().evictor_args(
            r#"{"evictSystemCriticalPods": true, "priorityThreshold": {"value": 1}}"#,
        ),
        &[("critical", None), ("p1000", None)],
    );
    assert_filter(
        &pods().evictor_args(r#"{"evictFailedBarePods": true}"#),
        &[
            (
                "bare",
                Some("pod does not have any ownerRefs and is not in failed phase"),
            ),
            ("bare-failed", None),
        ],
    );
    assert_filter(
        &pods().evictor_args(
            r#"{"podProtections": {"defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods", "SystemCriticalPods", "FailedBarePods"]}}"#,
        ),
        &[
            ("critical", None),
            ("empty-dir", None),
            ("ds", None),
            ("bare", Some("not in failed phase")),
            ("bare-failed", None),
            ("claims", None),
        ],
    );
    assert_filter(
        &pods().evictor_args(r#"{"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}}"#),
        &[
            ("claims", Some("ResourceClaims")),
            ("empty-dir", Some("local storage")),
        ],
    );
}

#[test]
fn filter_pvc_protection() {
    let c = || {
        two_nodes()
            .pvc("a", "fast-0", Some("gp3"))
            .pvc("a", "local-0", Some("local-path"))
            .pvc("a", "classless-0", None)
            .pvc("a", "blank-0", Some(""))
            .pod(owned_pod("a", "fast").pvc("data", "fast-0"))
            .pod(owned_pod("a", "local").pvc("data", "local-0"))
            .pod(
                owned_pod("a", "both")
                    .pvc("d1", "fast-0")
                    .pvc("d2", "local-0"),
            )
            .pod(owned_pod("a", "missing").pvc("data", "nope"))
            .pod(owned_pod("a", "classless").pvc("data", "classless-0"))
            .pod(owned_pod("a", "blank").pvc("data", "blank-0"))
            .pod(owned_pod("a", "ephemeral").ephemeral_volume("scratch"))
            .pod(owned_pod("a", "none"))
    };
    assert_filter(
        &c().evictor_args(r#"{"ignorePvcPods": true}"#),
        &[
            ("fast", Some("pod with PVC is protected against eviction")),
            ("missing", Some("pod with PVC")),
            ("ephemeral", None),
            ("none", None),
        ],
    );
    assert_filter(
        &c().evictor_args(
            r#"{"podProtections": {"extraEnabled": ["PodsWithPVC"],
                "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local-path"}, {"name": "unused"}]}}}}"#,
        ),
        &[
            ("fast", None),
            ("local", Some("pod using protected storage class \"local-path\"")),
            ("both", Some("local-path")),
            ("missing", Some("failed to get persistent volume claim \"a\"/\"nope\"")),
            ("classless", Some("failed to resolve storage class")),
            ("blank", Some("failed to resolve storage class")),
            ("ephemeral", None),
            ("none", None),
        ],
    );
    // The config alone does not enable the protection.
    assert_filter(
        &c().evictor_args(
            r#"{"podProtections": {"config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local-path"}]}}}}"#,
        ),
        &[("local", None)],
    );
}

#[test]
fn filter_pods_without_pdb() {
    let c = two_nodes()
        .evictor_args(r#"{"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}}"#)
        .pod(owned_pod("a", "covered").label("app", "web"))
        .pod(owned_pod("a", "uncovered").label("app", "db"))
        .pod(owned_pod("b", "all-of-b"))
        .pod(owned_pod("c", "nil-selector"))
        .pod(owned_pod("d", "other-namespace").label("app", "web"))
        .pdb(TestPdb::new("a", "web").match_label("app", "web"))
        .pdb(TestPdb::new("b", "everything").select_all())
        .pdb(TestPdb::new("c", "nothing"));
    assert_filter(
        &c,
        &[
            ("covered", None),
            ("uncovered", Some("does not have a PodDisruptionBudget")),
            ("all-of-b", None),
            ("nil-selector", Some("PodDisruptionBudget")),
            ("other-namespace", Some("PodDisruptionBudget")),
        ],
    );
}

#[test]
fn filter_selector_replicas_age_and_no_eviction_policy() {
    let c = || {
        two_nodes()
            .pod(owned_pod("a", "web").label("tier", "web"))
            .pod(owned_pod("a", "db").label("tier", "db"))
            .pod(
                TestPod::new("a", "pair-1")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "pair"),
            )
            .pod(
                TestPod::new("a", "pair-2")
                    .on_node("n2")
                    .owned_by("ReplicaSet", "pair")
                    .phase(PodPhase::Succeeded),
            )
            .pod(
                TestPod::new("a", "trio-1")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "trio"),
            )
            .pod(
                TestPod::new("a", "trio-2")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "trio"),
            )
            .pod(
                TestPod::new("a", "trio-3")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "trio"),
            )
            .pod(
                TestPod::new("a", "two-owners")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "x")
                    .owned_by("Other", "y"),
            )
            .pod(owned_pod("a", "young").started_ago_secs(600))
            .pod(
                owned_pod("a", "old")
                    .started_ago_secs(7200)
                    .created_ago_secs(60),
            )
            .pod(owned_pod("a", "exactly").started_ago_secs(3600))
            .pod(owned_pod("a", "unstarted").not_started())
            .pod(owned_pod("a", "prefer").prefer_no_eviction())
            .pod(
                owned_pod("a", "prefer-evict")
                    .prefer_no_eviction()
                    .evict_annotation(),
            )
    };
    assert_filter(
        &c().evictor_args(r#"{"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}}"#),
        &[("web", None), ("db", Some("labelSelector")), ("pair-1", Some("labelSelector"))],
    );
    assert_filter(
        &c().evictor_args(r#"{"labelSelector": {}}"#),
        &[("web", None), ("db", None)],
    );
    assert_filter(
        &c().evictor_args(r#"{"minReplicas": 3}"#),
        &[
            (
                "pair-1",
                Some("owner has 2 replicas which is less than minReplicas of 3"),
            ),
            ("trio-1", None),
            ("two-owners", None),
        ],
    );
    assert_filter(
        &c().evictor_args(r#"{"minReplicas": 1}"#),
        &[("pair-1", None)],
    );
    assert_filter(
        &c().evictor_args(r#"{"minPodAge": "1h"}"#),
        &[
            (
                "young",
                Some("pod age is not older than MinPodAge: 1h0m0s seconds"),
            ),
            ("old", None),
            ("exactly", None),
            ("unstarted", Some("MinPodAge")),
        ],
    );
    assert_filter(
        &c().evictor_args(r#"{"noEvictionPolicy": "Mandatory"}"#),
        &[
            ("prefer", Some("noEvictionPolicy is Mandatory")),
            ("prefer-evict", None),
            ("web", None),
        ],
    );
    assert_filter(
        &c().evictor_args(r#"{"noEvictionPolicy": "Preferred"}"#),
        &[("prefer", None)],
    );
}

// ---------------------------------------------------------------- PreEvictionFilter, nodeFit

#[test]
fn pre_eviction_namespace_selector() {
    let c = two_nodes()
        .evictor_args(r#"{"namespaceLabelSelector": {"matchLabels": {"team": "shop"}}}"#)
        .namespace(TestNamespace::new("shop").label("team", "shop"))
        .namespace(TestNamespace::new("pay").label("team", "pay"))
        .pod(owned_pod("shop", "a"))
        .pod(owned_pod("pay", "b").evict_annotation())
        .pod(owned_pod("undeclared", "c"));
    let mut s = c.session();
    let ids = [
        s.pod_id("shop", "a"),
        s.pod_id("pay", "b"),
        s.pod_id("undeclared", "c"),
    ];
    let ev = s.evictor("test");
    assert!(ev.passes_pre_eviction_filter(ids[0]));
    assert!(
        ev.passes_filter(ids[1]),
        "the evict annotation bypasses Filter ..."
    );
    assert!(
        !ev.passes_pre_eviction_filter(ids[1]),
        "... but not PreEvictionFilter"
    );
    assert!(ev.pre_eviction_failures(ids[1])[0].contains("namespaceLabelSelector"));
    assert!(!ev.passes_pre_eviction_filter(ids[2]));

    let exprs = two_nodes()
        .evictor_args(r#"{"namespaceLabelSelector": {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["pay"]}]}}"#)
        .namespace(TestNamespace::new("pay").label("team", "pay"))
        .pod(owned_pod("pay", "b"))
        .pod(owned_pod("other", "c"));
    let mut s = exprs.session();
    let (b, c) = (s.pod_id("pay", "b"), s.pod_id("other", "c"));
    let ev = s.evictor("test");
    assert!(!ev.passes_pre_eviction_filter(b));
    assert!(ev.passes_pre_eviction_filter(c));
}

#[test]
fn node_fit_checks() {
    let c = TestCluster::new()
        .node(TestNode::new("src").cpu("8").label("pool", "a"))
        .node(
            TestNode::new("small")
                .cpu("1")
                .memory("1Gi")
                .label("pool", "a"),
        )
        .node(
            TestNode::new("tainted")
                .taint("dedicated", "gpu", NoSchedule)
                .label("pool", "a"),
        )
        .node(
            TestNode::new("soft-tainted")
                .taint("x", "y", PreferNoSchedule)
                .label("pool", "b"),
        )
        .node(TestNode::new("cordoned").unschedulable().label("pool", "a"))
        .node(TestNode::new("full").pods(2).label("pool", "a"))
        .node(
            TestNode::new("zone-a")
                .label("zone", "a")
                .label("pool", "a"),
        )
        .node(TestNode::new("down").not_ready().label("pool", "a"))
        .node(
            TestNode::new("gpu")
                .allocatable("nvidia.com/gpu", "1")
                .label("pool", "a"),
        )
        // Usage: "small" is half used by a running pod; a finished pod does not count, a
        // terminating one does.
        .pod(owned_pod("a", "small-user").on_node("small").cpu("500m"))
        .pod(
            owned_pod("a", "small-done")
                .on_node("small")
                .cpu("500m")
                .phase(PodPhase::Succeeded),
        )
        .pod(owned_pod("a", "full-1").on_node("full"))
        .pod(owned_pod("a", "full-2").on_node("full").terminating())
        .pod(
            owned_pod("a", "full-3")
                .on_node("full")
                .phase(PodPhase::Failed),
        )
        .pod(
            owned_pod("a", "web-zone-a")
                .on_node("zone-a")
                .label("app", "web"),
        )
        .pod(
            owned_pod("a", "mover")
                .on_node("src")
                .cpu("400m")
                .memory("100Mi")
                .label("app", "web"),
        )
        .pod(owned_pod("a", "big").on_node("src").cpu("600m"))
        .pod(
            owned_pod("a", "gpu-user")
                .on_node("src")
                .request("nvidia.com/gpu", "1"),
        )
        .pod(
            owned_pod("a", "picky")
                .on_node("src")
                .node_selector("pool", "b"),
        )
        .pod(
            owned_pod("a", "lonely")
                .on_node("src")
                .label("app", "web")
                .anti_affinity(TestAffinityTerm::new("zone").match_label("app", "web")),
        )
        .pod(owned_pod("a", "unbound").cpu("6"));
    let mut s = c.session();
    let node = |s: &TestSession, n: &str| s.node_id(n);
    let names = [
        "src",
        "small",
        "tainted",
        "soft-tainted",
        "cordoned",
        "full",
        "zone-a",
        "down",
        "gpu",
    ];
    let ids: Vec<u32> = names.iter().map(|n| node(&s, n)).collect();
    let pod = |s: &TestSession, n: &str| s.pod_id("a", n);
    let (mover, big, gpu_user, picky, lonely, unbound) = (
        pod(&s, "mover"),
        pod(&s, "big"),
        pod(&s, "gpu-user"),
        pod(&s, "picky"),
        pod(&s, "lonely"),
        pod(&s, "unbound"),
    );
    let ev = s.evictor("test");
    let err = |p: u32, n: usize| ev.node_fit_error(p, ids[n]).map(|e| e.to_string());
    assert_eq!(err(mover, 0), None, "own node: requests are not checked");
    assert_eq!(err(mover, 1), None, "400m fits the 500m left");
    assert_eq!(err(big, 1).as_deref(), Some("insufficient cpu"));
    assert_eq!(
        err(mover, 2).as_deref(),
        Some("pod does not tolerate taints on the node")
    );
    assert_eq!(err(mover, 3), None, "PreferNoSchedule taints are ignored");
    assert_eq!(err(mover, 4).as_deref(), Some("node is not schedulable"));
    assert_eq!(
        err(mover, 5).as_deref(),
        Some("insufficient pods"),
        "1 running + 1 terminating = 2 slots used"
    );
    assert_eq!(err(mover, 6), None, "mover has no anti-affinity");
    assert_eq!(
        err(lonely, 6).as_deref(),
        Some("pod matches inter-pod anti-affinity rule of other pod on node")
    );
    assert_eq!(err(lonely, 1), None, "no zone label on small");
    assert_eq!(
        err(gpu_user, 1).as_deref(),
        Some("insufficient nvidia.com/gpu")
    );
    assert_eq!(err(gpu_user, 8), None);
    assert_eq!(
        err(picky, 1).as_deref(),
        Some("pod node selector does not match the node label")
    );
    assert_eq!(err(picky, 3), None);
    assert_eq!(
        err(unbound, 0),
        None,
        "unbound pods are checked against every node's room"
    );
    assert_eq!(err(unbound, 1).as_deref(), Some("insufficient cpu"));
    assert_eq!(
        ev.config.fit_nodes().len(),
        8,
        "the not-ready node is no candidate"
    );
    assert!(!ev.config.fit_nodes().contains(&ids[7]));

    let mut ev = ev;
    let all: Vec<u32> = ids.clone();
    // Readiness is the caller's business: node_fit checks what it is given.
    assert_eq!(
        ev.node_fit(big, &all),
        vec![ids[0], ids[3], ids[6], ids[7], ids[8]]
    );
    assert_eq!(ev.node_fit(9999, &all), Vec::<u32>::new());
    assert_eq!(ev.node_fit(big, &[9999, ids[0]]), vec![ids[0]]);
}

#[test]
fn pre_eviction_node_fit() {
    let c = TestCluster::new()
        .evictor_args(r#"{"nodeFit": true, "nodeSelector": "pool=a"}"#)
        .node(TestNode::new("n1").label("pool", "a"))
        .node(TestNode::new("n2").label("pool", "a").cpu("1"))
        .node(TestNode::new("n3").label("pool", "b").cpu("64"))
        .pod(owned_pod("a", "fits").on_node("n1").cpu("500m"))
        .pod(owned_pod("a", "too-big").on_node("n1").cpu("2"))
        .pod(
            owned_pod("a", "pinned")
                .on_node("n1")
                .node_selector("kubernetes.io/hostname", "n1"),
        );
    let mut s = c.session();
    let (fits, too_big, pinned) = (
        s.pod_id("a", "fits"),
        s.pod_id("a", "too-big"),
        s.pod_id("a", "pinned"),
    );
    let ev = s.evictor("test");
    assert!(ev.passes_pre_eviction_filter(fits));
    assert!(
        !ev.passes_pre_eviction_filter(too_big),
        "n3 has room but is outside the evictor's nodeSelector"
    );
    assert!(
        !ev.passes_pre_eviction_filter(pinned),
        "its own node does not count"
    );
    assert!(ev.pre_eviction_failures(pinned)[0].contains("does not fit on any other node"));
    assert!(ev.passes_filter(too_big), "nodeFit is not part of Filter");
}
