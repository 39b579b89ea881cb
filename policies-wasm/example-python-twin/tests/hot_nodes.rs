//! Unit tests of PodAgeOnHotNodesRust, run natively with `cargo test -p example-python-twin`
//! against hand-built clusters and the server's evictor. The Python version is checked against
//! this one on a real server (server/tests/api/python_policy.rs).

use example_python_twin::{PodAgeOnHotNodesRust, percent};
use rebalancer_policy_sdk::Policy;
use rebalancer_policy_sdk::state::StateScope;
use rebalancer_policy_sdk::testing::*;

const DAY: i64 = 86_400;

fn pod(name: &str, node: &str, age_days: i64) -> TestPod {
    TestPod::new("shop", name)
        .on_node(node)
        .owned_by("ReplicaSet", "web-5d4f8")
        .created_ago_secs(age_days * DAY)
}

/// hot (4 cpu, 3.8 used: 95%), warm (90%), cool (50%), blind (no measurement).
fn cluster() -> TestCluster {
    TestCluster::new()
        .node(TestNode::new("hot").cpu("4").usage("cpu", "3800m"))
        .node(TestNode::new("warm").cpu("4").usage("cpu", "3600m"))
        .node(TestNode::new("cool").cpu("4").usage("cpu", "2"))
        .node(TestNode::new("blind").cpu("4"))
        .pod(pod("hot-new", "hot", 1))
        .pod(pod("hot-old", "hot", 10))
        .pod(pod("hot-older", "hot", 30))
        .pod(pod("warm-old", "warm", 20))
        .pod(pod("cool-old", "cool", 40))
        .pod(pod("blind-old", "blind", 40))
}

fn logs(run: &TestRun) -> Vec<&str> {
    run.logs.iter().map(|l| l.message.as_str()).collect()
}

fn state_of(state: &StateScope) -> Vec<(String, String)> {
    state
        .entries()
        .iter()
        .map(|(k, v)| (k.clone(), String::from_utf8(v.clone()).unwrap()))
        .collect()
}

#[test]
fn hot_nodes_wait_for_hot_runs_then_their_old_pods_go_hottest_node_first() {
    let mut state = StateScope::default();
    let args = r#"{"hotRuns": 2, "minAgeDays": 7}"#;
    let first = cluster().run_with_state::<PodAgeOnHotNodesRust>(Deschedule, args, &mut state);
    first.assert_ok();
    assert!(first.proposals.is_empty());
    assert_eq!(
        state_of(&state),
        [
            ("hot-runs/hot".to_string(), "1".to_string()),
            ("hot-runs/warm".to_string(), "1".to_string())
        ]
    );
    assert!(
        logs(&first)
            .contains(&"2 of 4 nodes above 80% cpu; 0 of them for at least 2 consecutive runs"),
        "{:?}",
        logs(&first)
    );

    let second = cluster().run_with_state::<PodAgeOnHotNodesRust>(Deschedule, args, &mut state);
    second.assert_ok();
    assert_eq!(second.evicted_names(), ["hot-older", "hot-old", "warm-old"]);
    assert_eq!(
        second.proposals[0].reason,
        "node hot uses 95.0% of its allocatable cpu, above 80% for 2 consecutive runs; the pod \
         is older than 7 days"
    );
    assert_eq!(
        logs(&second),
        [
            "1 of 4 nodes have no cpu usage or allocatable cpu: never hot",
            "2 of 4 nodes above 80% cpu; 2 of them for at least 2 consecutive runs",
            "node hot at 95.0% cpu for 2 runs: 2 of 2 pods older than 7 days evictable",
            "node warm at 90.0% cpu for 2 runs: 1 of 1 pods older than 7 days evictable",
            "proposed 3 pods from 2 nodes (maxEvictionsPerRun 10)",
        ]
    );
}

#[test]
fn the_cap_and_the_threshold_bound_what_is_proposed() {
    let mut state = StateScope::default();
    let args = r#"{"hotRuns": 1, "maxEvictionsPerRun": 2}"#;
    let run = cluster().run_with_state::<PodAgeOnHotNodesRust>(Deschedule, args, &mut state);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["hot-older", "hot-old"]);

    // 92 %: only `hot` is above it; 90 % exactly is not "above".
    let args = r#"{"hotRuns": 1, "cpuThresholdPercent": 90}"#;
    let run = cluster().run::<PodAgeOnHotNodesRust>(Deschedule, args);
    assert_eq!(run.evicted_names(), ["hot-older", "hot-old"]);
}

#[test]
fn a_node_that_cools_down_starts_counting_again() {
    let mut state = StateScope::default();
    let args = r#"{"hotRuns": 2}"#;
    cluster()
        .run_with_state::<PodAgeOnHotNodesRust>(Deschedule, args, &mut state)
        .assert_ok();
    // `warm` cools down to 25 %: its key goes; `hot` stays hot.
    let cooled = TestCluster::new()
        .node(TestNode::new("hot").cpu("4").usage("cpu", "3800m"))
        .node(TestNode::new("warm").cpu("4").usage("cpu", "1"))
        .pod(pod("hot-old", "hot", 10))
        .pod(pod("warm-old", "warm", 20));
    let run = cooled.run_with_state::<PodAgeOnHotNodesRust>(Deschedule, args, &mut state);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["hot-old"]);
    assert_eq!(
        state_of(&state),
        [("hot-runs/hot".to_string(), "2".to_string())]
    );
    // Hot again: one run is not enough.
    let run = cluster().run_with_state::<PodAgeOnHotNodesRust>(Deschedule, args, &mut state);
    assert_eq!(run.evicted_names(), ["hot-older", "hot-old"]);
    assert!(
        run.logs
            .iter()
            .any(|l| l.message == "node warm at 90.0% cpu, hot for 1 of 2 runs: waiting"),
        "{:?}",
        logs(&run)
    );
}

#[test]
fn the_evictor_decides_what_may_go() {
    let cluster = cluster().pod(
        TestPod::new("kube-system", "proxy-old")
            .on_node("hot")
            .owned_by("DaemonSet", "proxy")
            .created_ago_secs(90 * DAY),
    );
    let run = cluster.run::<PodAgeOnHotNodesRust>(Deschedule, r#"{"hotRuns": 1}"#);
    run.assert_ok();
    assert_eq!(run.evicted_names(), ["hot-older", "hot-old", "warm-old"]);
    assert!(
        logs(&run)
            .contains(&"node hot at 95.0% cpu for 1 runs: 2 of 3 pods older than 7 days evictable"),
        "{:?}",
        logs(&run)
    );
}

#[test]
fn args_are_validated_against_their_bounds() {
    let errors = rebalancer_policy_sdk::parse_args::<PodAgeOnHotNodesRust>(
        r#"{"cpuThresholdPercent": 0, "hotRuns": 1001}"#,
    )
    .unwrap_err();
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [
            "cpuThresholdPercent: must be between 1 and 100, got 0",
            "hotRuns: must be between 1 and 1000, got 1001"
        ]
    );
    let info = PodAgeOnHotNodesRust::info();
    assert_eq!(info.default_args["maxEvictionsPerRun"], 10);
    assert_eq!(
        info.args_schema["properties"]["minAgeDays"]["maximum"],
        3650
    );
}

#[test]
fn percent_has_one_decimal() {
    assert_eq!(percent(934), "93.4%");
    assert_eq!(percent(1000), "100.0%");
    assert_eq!(percent(5), "0.5%");
}
