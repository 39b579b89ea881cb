//! Unit tests of PodAgeExample, run natively with `cargo test -p example-pod-age` against
//! hand-built clusters and the same evictor the server uses.

use example_pod_age::{PodAgeArgs, PodAgeExample};
use rebalancer_policy_sdk::testing::*;
use rebalancer_policy_sdk::{Policy, Refusal};

const DAY: i64 = 86_400;

/// Two nodes; pods owned by a ReplicaSet (so the evictor lets them go), aged in days.
fn cluster() -> TestCluster {
    let pod = |namespace: &str, name: &str, node: &str, age_days: i64| {
        TestPod::new(namespace, name)
            .on_node(node)
            .owned_by("ReplicaSet", "web-5d4f8")
            .created_ago_secs(age_days * DAY)
    };
    TestCluster::new()
        .node(TestNode::new("n1"))
        .node(TestNode::new("n2"))
        .pod(pod("shop", "web-young", "n1", 1))
        .pod(pod("shop", "web-old", "n1", 10))
        .pod(pod("shop", "web-older", "n2", 30))
        .pod(pod("batch", "report-old", "n2", 20))
}

#[test]
fn proposes_pods_older_than_the_limit_oldest_first() {
    let run = cluster().run::<PodAgeExample>(Deschedule, r#"{"maxAgeSeconds": 604800}"#);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["web-older", "report-old", "web-old"]);
    assert!(
        run.proposals[0].reason.contains("30d0h0m old"),
        "{}",
        run.proposals[0].reason
    );
}

#[test]
fn default_args_mean_seven_days_everywhere() {
    let run = cluster().run::<PodAgeExample>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["web-older", "report-old", "web-old"]);
}

#[test]
fn include_namespaces_limits_the_candidates() {
    let args = r#"{"maxAgeSeconds": 604800, "includeNamespaces": ["batch"]}"#;
    let run = cluster().run::<PodAgeExample>(Deschedule, args);
    run.assert_ok();
    assert_eq!(run.evicted(), [("batch", "report-old")]);

    let run = cluster().run::<PodAgeExample>(Deschedule, r#"{"includeNamespaces": ["nowhere"]}"#);
    run.assert_ok();
    assert!(run.proposals.is_empty());
}

#[test]
fn the_evictor_decides_what_may_go() {
    let cluster = cluster()
        // DaemonSet pods, mirror pods and bare pods are protected by DefaultEvictor.
        .pod(
            TestPod::new("kube-system", "proxy-old")
                .on_node("n1")
                .owned_by("DaemonSet", "proxy")
                .created_ago_secs(90 * DAY),
        )
        .pod(
            TestPod::new("kube-system", "etcd-n1")
                .on_node("n1")
                .mirror()
                .created_ago_secs(90 * DAY),
        )
        .pod(
            TestPod::new("shop", "debug-old")
                .on_node("n1")
                .created_ago_secs(90 * DAY),
        )
        // A pod on a node that is not Ready is out of scope.
        .node(TestNode::new("n3").not_ready())
        .pod(
            TestPod::new("shop", "web-on-n3")
                .on_node("n3")
                .owned_by("ReplicaSet", "web-5d4f8")
                .created_ago_secs(90 * DAY),
        );
    let run = cluster.run::<PodAgeExample>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["web-older", "report-old", "web-old"]);
    // Filtered before proposing: the evictor never had to refuse anything.
    assert!(run.refusals.is_empty(), "{:?}", run.refusals);
}

#[test]
fn refusals_are_skipped_and_the_total_limit_stops_the_policy() {
    // The PDB of `shop` allows no disruption: both shop pods are refused, the batch pod goes.
    let with_pdb = cluster().pdb(
        TestPdb::new("shop", "web")
            .select_all()
            .disruptions_allowed(0),
    );
    let run = with_pdb.run::<PodAgeExample>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["report-old"]);
    assert_eq!(run.refused_names(), ["web-older", "web-old"]);
    assert!(matches!(
        run.refusals[0].refusal,
        Refusal::DisruptionBudget(_)
    ));

    // maxNoOfPodsToEvictTotal = 1: the first proposal is admitted, the next one ends the policy.
    let run = cluster()
        .max_total(1)
        .run::<PodAgeExample>(Deschedule, "{}");
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["web-older"]);
    assert_eq!(run.refusals.len(), 1);
    assert_eq!(run.refusals[0].refusal, Refusal::TotalLimit);
}

#[test]
fn bad_args_are_rejected_with_the_field_named() {
    let errors = PodAgeExample::validate(&PodAgeArgs {
        max_age_seconds: 0,
        include_namespaces: vec![String::new()],
    });
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["maxAgeSeconds", "includeNamespaces[0]"]);

    let run = cluster().run::<PodAgeExample>(Deschedule, r#"{"maxAge": 60}"#);
    let error = run.result.expect_err("unknown fields are refused");
    assert!(error.contains("unknown field `maxAge`"), "{error}");
}

#[test]
fn info_describes_the_plugin() {
    let info = PodAgeExample::info();
    assert_eq!(info.name, "PodAgeExample");
    assert_eq!(info.extension_points, [Deschedule]);
    assert_eq!(info.default_args["maxAgeSeconds"], 604_800);
    assert_eq!(info.args_schema["additionalProperties"], false);
}
