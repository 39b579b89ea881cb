//! Tests of LowNodeLoad against the SDK's native host (the same evictor the server runs), after
//! Koordinator's `low_node_load_test.go` and the implementation notes in
//! `shared/reference/koordinator.md` §5.2: args, classification, gates, detectors across runs,
//! metrics, thresholds, pools, budgets, pod order, nodeFit, the four fixes, ties and reasons.
//!
//! Nodes have 10 cpu and 100Gi memory and a fresh NodeMetric; workload pods request 100m cpu and
//! use what each case says (1 cpu by default, so a node with 9 of them is at 90% cpu).

use rebalancer_policy_sdk::state::StateScope;
use rebalancer_policy_sdk::testing::*;

use crate::LowNodeLoad;
use crate::detector::{Detector, NODE_KEY};

/// cpu 20/70, detector off.
const ARGS: &str = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70},
    "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;

fn node(name: &str) -> TestNode {
    TestNode::new(name)
        .cpu("10")
        .memory("100Gi")
        .pods(110)
        .usage_source(UsageSource::NodeMetric)
}

fn pod(name: &str, node: &str) -> TestPod {
    TestPod::new("web", name)
        .on_node(node)
        .owned_by("ReplicaSet", "rs")
        .cpu("100m")
        .usage("cpu", "1")
        .usage("memory", "1Gi")
}

/// `n` pods `{prefix}1..` on `node`, each using `cpu`, created 1..n hours ago (the first is the
/// newest).
fn fill(node: &str, prefix: &str, n: usize, cpu: &str) -> Vec<TestPod> {
    (1..=n)
        .map(|i| {
            pod(&format!("{prefix}{i}"), node)
                .usage("cpu", cpu)
                .created_ago_secs(3600 * i as i64)
        })
        .collect()
}

/// n1 at 90% cpu, n2 idle (low), n3 at 50% (neither).
fn base() -> TestCluster {
    TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n1", "a", 9, "1"))
        .pods(fill("n3", "c", 5, "1"))
}

/// [`ARGS`] with more fields (`"dryRun":true`).
fn with(fields: &str) -> String {
    ARGS.replacen('{', &format!("{{{fields},"), 1)
}

fn go(cluster: &TestCluster, args: &str) -> TestRun {
    let run = run::<LowNodeLoad>(cluster, Balance, args);
    run.assert_ok();
    run
}

fn summary(run: &TestRun) -> String {
    run.log_messages()
        .into_iter()
        .find(|m| m.starts_with("LowNodeLoad:"))
        .unwrap_or_else(|| panic!("no summary in {:?}", run.log_messages()))
        .to_owned()
}

fn check(json: &str) -> Result<crate::LowNodeLoadArgs, Vec<String>> {
    check_args::<LowNodeLoad>(json)
}

// ---------------------------------------------------------------------------------------------
// Args
// ---------------------------------------------------------------------------------------------

#[test]
fn defaults_follow_koordinator() {
    let info = <LowNodeLoad as rebalancer_policy_sdk::Policy>::info();
    assert_eq!(info.name, "LowNodeLoad");
    assert_eq!(
        info.extension_points,
        [rebalancer_policy_sdk::ExtensionPoint::Balance]
    );
    let d = &info.default_args;
    assert_eq!(d["nodeFit"], true);
    assert_eq!(d["nodeMetricExpirationSeconds"], 180);
    assert_eq!(d["detectorCacheTimeout"], "5m");
    assert_eq!(
        d["anomalyCondition"],
        serde_json::json!({"timeout":"1m","consecutiveAbnormalities":5,"consecutiveNormalities":3})
    );
    assert_eq!(
        d["resourceWeights"],
        serde_json::json!({"cpu":1,"memory":1})
    );
    for fix in [
        "countMetricUpdates",
        "reserveOnlyEvicted",
        "defaultEachAnomalyField",
        "keepHighWithoutLow",
    ] {
        assert!(d.get(fix).is_none(), "{fix} serialized while off");
        assert_eq!(info.args_schema["properties"][fix]["default"], false);
    }

    let args = check("").expect("empty args are valid");
    let r = crate::args::resolve(&args).unwrap();
    assert!(r.node_fit);
    assert_eq!(r.node_metric_expiration_seconds, 180);
    assert_eq!(r.detector_cache_timeout_ms, Some(300_000));
    assert_eq!(r.pools.len(), 1);
    assert_eq!(r.pools[0].name, "__default_node_pool__");
    assert_eq!(r.pools[0].condition.consecutive_abnormalities, 5);
    assert_eq!(r.pools[0].condition.consecutive_normalities, 3);
    assert_eq!(r.pools[0].condition.detector_timeout_ms(), 60_000);

    // Weights: 1 for every resource of the top-level low/high thresholds; ≤ 0 is defaulted.
    let args = check(
        r#"{"lowThresholds":{"cpu":20,"pods":10},"highThresholds":{"cpu":70,"pods":50},
            "resourceWeights":{"cpu":0,"memory":3,"nvidia.com/gpu":-2}}"#,
    )
    .unwrap();
    let r = crate::args::resolve(&args).unwrap();
    let w: Vec<(&str, i64)> = r.pools[0]
        .weights
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        w,
        [
            ("cpu", 1),
            ("memory", 3),
            ("nvidia.com/gpu", -2),
            ("pods", 1)
        ]
    );
}

#[test]
fn anomaly_condition_defaulting_bug_and_its_fix() {
    // Koordinator's else-if chain: {timeout} fills consecutiveAbnormalities only.
    let errors = check(r#"{"anomalyCondition":{"timeout":"2m"}}"#).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "anomalyCondition.consecutiveNormalities: consecutiveNormalities must be greater than 0"
        ) && errors[0].contains("defaultEachAnomalyField"),
        "{errors:?}"
    );
    // Normalities alone: abnormalities get their default, fine.
    let args = check(r#"{"anomalyCondition":{"consecutiveNormalities":2}}"#).unwrap();
    let c = crate::args::resolve(&args).unwrap().pools[0].condition;
    assert_eq!(
        (c.consecutive_abnormalities, c.consecutive_normalities),
        (5, 2)
    );
    assert_eq!(c.timeout_ms, None, "an omitted timeout stays unset…");
    assert_eq!(
        c.detector_timeout_ms(),
        60_000,
        "…and the detector uses 60s"
    );

    let args = check(r#"{"anomalyCondition":{"timeout":"2m"},"defaultEachAnomalyField":true}"#)
        .expect("the fix fills every field");
    let c = crate::args::resolve(&args).unwrap().pools[0].condition;
    assert_eq!(
        (
            c.timeout_ms,
            c.consecutive_abnormalities,
            c.consecutive_normalities
        ),
        (Some(120_000), 5, 3)
    );
    let args = check(r#"{"anomalyCondition":{},"defaultEachAnomalyField":true}"#).unwrap();
    let c = crate::args::resolve(&args).unwrap().pools[0].condition;
    assert_eq!(c.timeout_ms, Some(60_000));
    // A pool inherits the counts but (without the fix) not the timeout.
    let json = r#"{"anomalyCondition":{"timeout":"3m","consecutiveAbnormalities":4,"consecutiveNormalities":2},
                   "nodePools":[{"name":"p","anomalyCondition":{"consecutiveAbnormalities":7}}]FIX}"#;
    let args = check(&json.replace("FIX", "")).unwrap();
    let c = crate::args::resolve(&args).unwrap().pools[1].condition;
    assert_eq!(
        (
            c.timeout_ms,
            c.consecutive_abnormalities,
            c.consecutive_normalities
        ),
        (None, 7, 2)
    );
    let args = check(&json.replace("FIX", r#","defaultEachAnomalyField":true"#)).unwrap();
    let c = crate::args::resolve(&args).unwrap().pools[1].condition;
    assert_eq!(c.timeout_ms, Some(180_000));
}

#[test]
fn validation_errors_are_located() {
    let bad = |json: &str, want: &[&str]| match check(json) {
        Ok(_) => panic!("{json}: accepted"),
        Err(errors) => {
            for w in want {
                assert!(
                    errors.iter().any(|e| e.starts_with(w)),
                    "{json}: no error starting with {w:?} in {errors:?}"
                );
            }
            assert_eq!(errors.len(), want.len(), "{json}: {errors:?}");
        }
    };
    bad(
        r#"{"numberOfNodes":-1}"#,
        &["numberOfNodes: must be greater than or equal to 0"],
    );
    bad(
        r#"{"nodeMetricExpirationSeconds":0}"#,
        &["nodeMetricExpirationSeconds: should be a positive value"],
    );
    bad(
        r#"{"evictableNamespaces":{"include":["a"],"exclude":["b"]}}"#,
        &["evictableNamespaces: only one of Include/Exclude"],
    );
    bad(
        r#"{"podSelectors":[{"name":"x","selector":{"matchExpressions":[{"key":"a","operator":"In"}]}}]}"#,
        &["podSelectors[0].selector.matchExpressions[0].values"],
    );
    bad(
        r#"{"lowThresholds":{"cpu":80,"memory":-1},"highThresholds":{"cpu":70}}"#,
        &[
            "lowThresholds.memory: percentage must be greater than or equal to 0",
            "lowThresholds.cpu: lowThresholds cpu (80) must be less than or equal to highThresholds cpu (70)",
        ],
    );
    bad(
        r#"{"highThresholds":{"cpu":70},"prodHighThresholds":{"cpu":80},"prodLowThresholds":{"cpu":90}}"#,
        &[
            "prodHighThresholds.cpu: prodHighThresholds cpu (80) must be less than or equal to highThresholds",
            "prodLowThresholds.cpu: prodLowThresholds cpu (90) must be less than or equal to prodHighThresholds",
        ],
    );
    bad(
        r#"{"nodePools":[{"name":"a","nodeSelector":{"matchLabels":{"bad key!":"x"}},
            "lowThresholds":{"cpu":90}}],"highThresholds":{"cpu":70}}"#,
        &[
            "nodePools[0].nodeSelector.matchLabels: invalid label key",
            "nodePools[0].lowThresholds.cpu: lowThresholds cpu (90) must be less than or equal to highThresholds cpu (70)",
        ],
    );
    bad(
        r#"{"anomalyCondition":{"timeout":"soon","consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#,
        &["anomalyCondition.timeout: invalid duration"],
    );
    bad(
        r#"{"detectorCacheTimeout":"-1m"}"#,
        &["detectorCacheTimeout: must not be negative"],
    );
    bad(
        r#"{"lowThreshold":{}}"#,
        &["lowThreshold: unknown field `lowThreshold`"],
    );
    // serde's own errors are at the field they are about, inside nested args too.
    bad(
        r#"{"highThresholds":{"cpu":"lots"}}"#,
        &["highThresholds.cpu: invalid type: string \"lots\""],
    );
    bad(
        r#"{"nodePools":[{"name":"p"},{"name":"q","useDeviationThresholds":"yes"}]}"#,
        &["nodePools[1].useDeviationThresholds: invalid type: string \"yes\", expected a boolean"],
    );
    // An inherited mistake is reported once, where it is written.
    bad(
        r#"{"lowThresholds":{"cpu":80},"highThresholds":{"cpu":70},"nodePools":[{"name":"a"}]}"#,
        &["lowThresholds.cpu: lowThresholds cpu (80)"],
    );
    check(
        r#"{"paused":false,"dryRun":true,"numberOfNodes":2,"nodeMetricExpirationSeconds":60,
            "evictableNamespaces":{"exclude":["kube-system"]},"nodeSelector":{"matchLabels":{"a":"b"}},
            "podSelectors":[{"name":"web","selector":{"matchLabels":{"app":"web"}}}],
            "nodeFit":false,"useDeviationThresholds":true,"highThresholds":{"cpu":10},
            "lowThresholds":{"cpu":10},"prodHighThresholds":{"cpu":5},"prodLowThresholds":{"cpu":5},
            "resourceWeights":{"cpu":2},"detectorCacheTimeout":"10m",
            "nodePools":[{"name":"p","useDeviationThresholds":false,"highThresholds":{"cpu":60}}],
            "countMetricUpdates":true,"reserveOnlyEvicted":true,"keepHighWithoutLow":true}"#,
    )
    .expect("every field");
}

// ---------------------------------------------------------------------------------------------
// Classification, gates, budget
// ---------------------------------------------------------------------------------------------

#[test]
fn evicts_from_the_source_until_it_is_at_its_high_threshold() {
    let run = go(&base(), ARGS);
    // 9 cpu on 10: two pods of 1 cpu bring it to 7000m, not above 70%.
    assert_eq!(run.evicted_names(), ["a1", "a2"]);
    // Without prod thresholds they are 100%: the idle n2 is low for both node and prod usage
    // (both-low), and n3, between the node thresholds, is prod-low.
    let s = summary(&run);
    assert!(
        s.contains(
            "3 nodes (0 without a fresh metric), 1 pools: 0 low, 1 high, 1 prod-low, \
             0 prod-high, 1 both-low, 1 anomalous"
        ),
        "{s}"
    );
    assert!(s.contains("2 proposals"), "{s}");
}

#[test]
fn unschedulable_nodes_are_never_low() {
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2").unschedulable(), node("n3")])
        .pods(fill("n1", "a", 9, "1"))
        .pods(fill("n3", "c", 5, "1"));
    let run = go(&cluster, ARGS);
    assert!(run.evicted_names().is_empty());
    // n3 is still prod-low, so the gate passes, but the node pass has no target.
    assert!(
        summary(&run).contains("0 low, 1 high, 1 prod-low, 0 prod-high, 0 both-low"),
        "{}",
        summary(&run)
    );
    // Koordinator's prodLowThresholdFilter refuses unschedulable nodes too.
    let only = TestCluster::new()
        .nodes([node("n1"), node("n2").unschedulable()])
        .pods(fill("n1", "a", 9, "1"));
    let run = go(&only, ARGS);
    assert!(
        summary(&run).contains("no node is under its low thresholds"),
        "{}",
        summary(&run)
    );
}

#[test]
fn gates_in_koordinators_order() {
    let cases: Vec<(&str, TestCluster, String, &str)> = vec![
        (
            "no source",
            base(),
            ARGS.replace("\"cpu\":70", "\"cpu\":95"),
            "no node is above its high thresholds",
        ),
        (
            "not anomalous yet",
            base(),
            ARGS.replace(
                "\"consecutiveAbnormalities\":1",
                "\"consecutiveAbnormalities\":2",
            ),
            "no source is anomalous yet: none of the 1 nodes above their high thresholds has \
             been above them for more than 2 rounds",
        ),
        (
            // n2 at 55% is neither low nor prod-low (10%).
            "no low node",
            TestCluster::new()
                .nodes([node("n1"), node("n2")])
                .pods(fill("n1", "a", 9, "1"))
                .pods(
                    fill("n2", "b", 5, "1")
                        .into_iter()
                        .map(|p| p.usage("cpu", "1100m")),
                ),
            with(r#""prodLowThresholds":{"cpu":10},"prodHighThresholds":{"cpu":70}"#),
            "no node is under its low thresholds",
        ),
        (
            // n2 (both-low) and n3 (prod-low) count.
            "numberOfNodes",
            base(),
            with(r#""numberOfNodes":2"#),
            "2 nodes are under their low thresholds, not more than numberOfNodes (2)",
        ),
    ];
    for (name, cluster, args, why) in cases {
        let run = go(&cluster, &args);
        assert!(run.evicted_names().is_empty(), "{name}");
        let s = summary(&run);
        assert!(
            s.contains(&format!("pool __default_node_pool__: {why}")),
            "{name}: {s}"
        );
    }
    // numberOfNodes counts low + prodLow + both-low nodes: three are more than 2.
    let run = go(&base().node(node("n4")), &with(r#""numberOfNodes":2"#));
    assert_eq!(run.evicted_names(), ["a1", "a2"]);
}

#[test]
fn paused_and_dry_run() {
    let run = go(&base(), &with(r#""paused":true"#));
    assert!(run.evicted_names().is_empty());
    assert_eq!(
        run.log_messages(),
        ["LowNodeLoad is paused and will do nothing"]
    );
    let run = go(&base(), &with(r#""dryRun":true"#));
    assert!(run.evicted_names().is_empty());
    let logs = run.log_messages();
    let dry: Vec<&&str> = logs.iter().filter(|m| m.starts_with("dry run")).collect();
    // The usage is still taken off: the same two pods as a real run.
    assert_eq!(dry.len(), 2, "{logs:?}");
    assert!(dry[0].starts_with("dry run: would evict web/a1 from n1: node is overutilized"));
    assert!(summary(&run).contains("2 dry-run evictions"));
}

#[test]
fn budget_stops_the_run() {
    // Sources n1 (96%) and n3 (50%) above 20%; the only target n2 (10%, low under 15%) has
    // 2000 − 1000 = 1000m of room. n1's first pod (2.4 cpu) uses it up: nothing more moves,
    // from n1 or n3, although both are still above 20%.
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n1", "a", 4, "2.4"))
        .pods(fill("n2", "b", 1, "1"))
        .pods(fill("n3", "c", 5, "1"));
    let args = r#"{"lowThresholds":{"cpu":15},"highThresholds":{"cpu":20},"nodeFit":false,
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;
    assert_eq!(go(&cluster, args).evicted_names(), ["a1"]);
    // With a 40% high threshold n2 has 3000m: a1 and a2 go from n1 (4.8 cpu > 3000m).
    let wider = args.replace(r#""cpu":20"#, r#""cpu":40"#);
    assert_eq!(go(&cluster, &wider).evicted_names(), ["a1", "a2"]);
}

// ---------------------------------------------------------------------------------------------
// Usage sources and thresholds
// ---------------------------------------------------------------------------------------------

#[test]
fn expired_and_missing_metrics_are_skipped() {
    let old = |age: Option<i64>| {
        TestCluster::new()
            .nodes([node("n1").usage_age_ms(age), node("n2"), node("n3")])
            .pods(fill("n1", "a", 9, "1"))
            .pods(fill("n3", "c", 5, "1"))
    };
    assert_eq!(go(&old(Some(179_999)), ARGS).evicted_names(), ["a1", "a2"]);
    let run = go(&old(Some(180_000)), ARGS);
    assert!(run.evicted_names().is_empty(), "180s old is expired");
    assert!(summary(&run).contains("(1 without a fresh metric)"));
    let run = go(
        &old(Some(300_000)),
        &with(r#""nodeMetricExpirationSeconds":600"#),
    );
    assert_eq!(run.evicted_names(), ["a1", "a2"]);
    // No update time, or no metric at all.
    let run = go(&old(None), ARGS);
    assert!(run.evicted_names().is_empty());
    let none = TestCluster::new()
        .nodes([
            node("n1").usage_source(UsageSource::None),
            node("n2"),
            node("n3"),
        ])
        .pods(fill("n1", "a", 9, "1"));
    assert!(go(&none, ARGS).evicted_names().is_empty());
}

#[test]
fn usage_is_system_plus_every_pod_metric_including_gone_pods() {
    // n1: 5 pods × 1 cpu = 50%; system 1.5 cpu and 1 cpu of gone pods bring it to 75%.
    let cluster = |system: &str, gone: &str| {
        TestCluster::new()
            .nodes([
                node("n1")
                    .system_usage("cpu", system)
                    .gone_pods_usage("cpu", gone),
                node("n2"),
                node("n3"),
            ])
            .pods(fill("n1", "a", 5, "1"))
            .pods(fill("n3", "c", 5, "1"))
    };
    assert!(go(&cluster("0", "0"), ARGS).evicted_names().is_empty());
    assert_eq!(go(&cluster("1500m", "1"), ARGS).evicted_names(), ["a1"]);
    // The node's own nodeUsage is not what Koordinator reads.
    let node_usage = TestCluster::new()
        .nodes([node("n1").usage("cpu", "9"), node("n2"), node("n3")])
        .pods(fill("n1", "a", 5, "1"))
        .pods(fill("n3", "c", 5, "1"));
    assert!(go(&node_usage, ARGS).evicted_names().is_empty());
}

#[test]
fn metrics_k8s_io_is_the_fallback() {
    let api = |n: TestNode| n.usage_source(UsageSource::MetricsApi);
    let cluster = TestCluster::new()
        .nodes([
            api(node("n1")).usage("cpu", "9").usage("memory", "9Gi"),
            api(node("n2")).usage("cpu", "0").usage("memory", "1Gi"),
            api(node("n3")).usage("cpu", "5").usage("memory", "5Gi"),
        ])
        .pods(
            fill("n1", "a", 9, "1")
                .into_iter()
                .map(|p| p.usage_source(UsageSource::MetricsApi)),
        );
    assert_eq!(go(&cluster, ARGS).evicted_names(), ["a1", "a2"]);
}

#[test]
fn thresholds_are_of_raw_allocatable() {
    // Allocatable amplified to 20 cpu: 9 cpu is 45%; raw allocatable 10 cpu makes it 90%.
    let cluster = |raw: bool| {
        let n1 = node("n1").cpu("20");
        let n1 = if raw {
            n1.raw_allocatable("cpu", "10")
                .raw_allocatable("memory", "100Gi")
        } else {
            n1
        };
        TestCluster::new()
            .nodes([n1, node("n2"), node("n3")])
            .pods(fill("n1", "a", 9, "1"))
            .pods(fill("n3", "c", 5, "1"))
    };
    assert!(go(&cluster(false), ARGS).evicted_names().is_empty());
    let run = go(&cluster(true), ARGS);
    assert_eq!(run.evicted_names(), ["a1", "a2"]);
    assert!(
        run.proposals[0]
            .reason
            .contains("node cpu usage(90.00%)>threshold(70.00%)"),
        "{}",
        run.proposals[0].reason
    );
}

#[test]
fn deviation_thresholds_are_around_the_pool_mean() {
    // cpu 90%, 0%, 50%, 40%: mean 45%. Deviations 20/20: low ≤ 25%, high > 65%.
    let cluster = base().node(node("n4")).pods(fill("n4", "d", 4, "1"));
    let args = r#"{"useDeviationThresholds":true,"lowThresholds":{"cpu":20},
        "highThresholds":{"cpu":20},
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;
    let run = go(&cluster, args);
    // 9000 → 6500m: three pods (6000m is the first at or under 6500m).
    assert_eq!(run.evicted_names(), ["a1", "a2", "a3"]);
    assert!(
        run.proposals[0]
            .reason
            .contains("node cpu usage(90.00%)>threshold(65.00%)"),
        "{}",
        run.proposals[0].reason
    );
    // A deviation of 0 for low means "no threshold" for the resource.
    let off = args.replace(
        r#""lowThresholds":{"cpu":20}"#,
        r#""lowThresholds":{"cpu":0}"#,
    );
    assert!(go(&cluster, &off).evicted_names().is_empty());
}

#[test]
fn memory_missing_from_low_overrides_its_high_threshold_unless_fixed() {
    // n1: cpu 30%, memory 90Gi of 100Gi; low {cpu}, high {cpu: 70, memory: 80}.
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(
            fill("n1", "a", 3, "1")
                .into_iter()
                .map(|p| p.usage("memory", "30Gi")),
        )
        .pods(fill("n3", "c", 5, "1"));
    let args = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70,"memory":80},
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}KEEP}"#;
    let koordinator = go(&cluster, &args.replace("KEEP", ""));
    assert!(
        koordinator.evicted_names().is_empty(),
        "memory high silently 100%"
    );
    let fixed = go(
        &cluster,
        &args.replace("KEEP", r#","keepHighWithoutLow":true"#),
    );
    assert_eq!(fixed.evicted_names(), ["a1"]);
    assert!(
        fixed.proposals[0]
            .reason
            .ends_with("node memory usage(90.00%)>threshold(80.00%)"),
        "{}",
        fixed.proposals[0].reason
    );
}

// ---------------------------------------------------------------------------------------------
// Prod pass, pools
// ---------------------------------------------------------------------------------------------

#[test]
fn prod_pass_moves_prod_pods_against_the_prod_budget() {
    // n1: node usage 60% (not high) but prod usage 60% > 50% prod high; batch pods (BestEffort)
    // do not count as prod. n2 is prod-low (and low): a both-low node.
    let batch = |name: &str| {
        TestPod::new("web", name)
            .on_node("n1")
            .owned_by("ReplicaSet", "rs")
            .usage("cpu", "1")
    };
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n1", "p", 5, "1"))
        .pod(batch("b1"))
        .pods(fill("n3", "c", 4, "1"));
    let args = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70},
        "prodLowThresholds":{"cpu":10},"prodHighThresholds":{"cpu":45},
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;
    let run = go(&cluster, args);
    // Prod usage 5000m > 4500m: one prod pod goes; the batch pod stays.
    assert_eq!(run.evicted_names(), ["p1"]);
    assert!(
        run.proposals[0]
            .reason
            .contains("prod cpu usage(50.00%)>threshold(45.00%)"),
        "{}",
        run.proposals[0].reason
    );
    let s = summary(&run);
    assert!(
        s.contains("0 low, 0 high, 0 prod-low, 1 prod-high, 1 both-low"),
        "{s}"
    );

    // The prod budget of a both-low node is capped by what the node pass left of it: n4 (both
    // low) has prod room but the node pass used its node room up.
    let capped = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n1", "p", 5, "1"))
        .pods(fill("n2", "x", 2, "1"))
        .pods(fill("n3", "h", 8, "1"));
    let args = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70},
        "prodLowThresholds":{"cpu":20},"prodHighThresholds":{"cpu":45},"nodeFit":false,
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;
    // n3 (80%) is a node source, n1 a prod source, n2 both-low with node room 5000m and prod
    // room 2500m. The node pass takes 2 pods (2000m) off n3: node room left 3000m, so the prod
    // room stays min(2500, 3000) = 2500m and one prod pod of n1 goes.
    let run = go(&capped, args);
    assert_eq!(run.evicted_names(), ["h1", "p1"]);
}

#[test]
fn node_pools_inherit_and_skip_processed_nodes() {
    let labelled = |name: &str| node(name).label("pool", "gpu");
    let cluster = TestCluster::new()
        .nodes([labelled("g1"), labelled("g2"), labelled("g3")])
        .pods(fill("g1", "a", 9, "1"))
        .pods(fill("g3", "c", 5, "1"));
    // The default pool (all nodes) with high 95: nothing; the gpu pool inherits low 20 and the
    // detector from the top level and sets high 70.
    let args = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":95},
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1},
        "nodePools":[{"name":"gpu","nodeSelector":{"matchLabels":{"pool":"gpu"}},
                      "highThresholds":{"cpu":70}}]}"#;
    let run = go(&cluster, args);
    assert_eq!(run.evicted_names(), ["a1", "a2"]);
    let s = summary(&run);
    assert!(s.contains("2 pools"), "{s}");
    assert!(
        s.contains("pool __default_node_pool__: no node is above its high thresholds"),
        "{s}"
    );
    // A node the default pool already processed as a source is not in a selecting pool.
    let args = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70},"numberOfNodes":0,
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1},
        "nodePools":[{"name":"gpu","nodeSelector":{"matchLabels":{"pool":"gpu"}},
                      "highThresholds":{"cpu":60}}]}"#;
    let run = go(&cluster, args);
    assert_eq!(run.evicted_names(), ["a1", "a2"], "g1 is processed once");
    // A pool without a selector takes every node again (processed ones included).
    let args = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70},
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1},
        "nodePools":[{"name":"all","highThresholds":{"cpu":60}}]}"#;
    let run = go(&cluster, args);
    // The second pool measures g1 afresh at 90% > 60%: a1 and a2 are already proposed (the
    // evictor's Filter skips them), so a3, a4, a5 go to bring the fresh 9 cpu to 6.
    assert_eq!(run.evicted_names(), ["a1", "a2", "a3", "a4", "a5"]);
}

// ---------------------------------------------------------------------------------------------
// Pod order, nodeFit, ties, reasons
// ---------------------------------------------------------------------------------------------

#[test]
fn pod_order_follows_koordinators_pod_sorter() {
    // One source with all its pods removable; high 10% so the node never gets back under it
    // and the budget (n2 at 0, high 10% of 10 cpu = 1000m per target, 9 targets) is the limit.
    let p = |name: &str| pod(name, "n1").usage("cpu", "100m").created_ago_secs(100);
    let pods = vec![
        // An unknown class is resolved from the QoS class: LS, so prod.
        p("z-unknown-class").label("koordinator.sh/priority-class", "platinum"),
        p("prod").label("koordinator.sh/priority-class", "koord-prod"),
        p("mid").label("koordinator.sh/priority-class", "koord-mid"),
        p("free-prio-5")
            .label("koordinator.sh/priority-class", "koord-free")
            .priority(5),
        p("free-prio-1")
            .label("koordinator.sh/priority-class", "koord-free")
            .priority(1),
        p("batch-guaranteed")
            .label("koordinator.sh/priority-class", "koord-batch")
            .memory("64Mi")
            .guaranteed(),
        p("batch-be-label")
            .label("koordinator.sh/priority-class", "koord-batch")
            .label("koordinator.sh/qosClass", "BE"),
        p("batch-ls")
            .label("koordinator.sh/priority-class", "koord-batch")
            .label("koordinator.sh/qosClass", "LS"),
        p("batch-be-cost")
            .label("koordinator.sh/priority-class", "koord-batch")
            .label("koordinator.sh/qosClass", "BE")
            .annotation("controller.kubernetes.io/pod-deletion-cost", "10"),
        p("batch-be-evict-cost")
            .label("koordinator.sh/priority-class", "koord-batch")
            .label("koordinator.sh/qosClass", "BE")
            .annotation("scheduling.koordinator.sh/eviction-cost", "5"),
        p("batch-be-bad-cost")
            .label("koordinator.sh/priority-class", "koord-batch")
            .label("koordinator.sh/qosClass", "BE")
            .annotation("controller.kubernetes.io/pod-deletion-cost", "+7"),
    ];
    // 5 cpu of system usage keep n1 above its threshold: the budget is what stops.
    let mut cluster =
        TestCluster::new().nodes([node("n1").system_usage("cpu", "5"), node("n2"), node("n3")]);
    for pod in pods {
        cluster = cluster.pod(pod);
    }
    let args = r#"{"lowThresholds":{"cpu":5},"highThresholds":{"cpu":5},"nodeFit":false,
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1},
        "numberOfNodes":0}"#;
    // n2, n3 are low with 500m room each: 1000m, ten pods of 100m; "z-unknown-class" (prod,
    // like "prod", later by uid) stays.
    let run = go(&cluster, args);
    assert_eq!(
        run.evicted_names(),
        [
            "free-prio-1",
            "free-prio-5",
            // batch: Burstable before Guaranteed (k8s QoS), BE before LS (koord QoS),
            // deletion cost, eviction cost; an invalid cost counts 0 (uid breaks the tie).
            "batch-be-bad-cost",
            "batch-be-label",
            "batch-be-evict-cost",
            "batch-be-cost",
            "batch-ls",
            "batch-guaranteed",
            "mid",
            "prod",
        ]
    );
}

#[test]
fn usage_match_then_newest_then_pods_without_metric_last() {
    let cluster = |system: &str, targets: usize| {
        TestCluster::new()
            .nodes([
                node("n1").system_usage("cpu", system),
                node("n2"),
                node("n3"),
            ])
            .nodes((1..=targets).map(|i| node(&format!("t{i}"))))
            .pods([
                pod("half", "n1").usage("cpu", "500m").created_ago_secs(10),
                pod("two", "n1").usage("cpu", "2").created_ago_secs(50),
                pod("one-and-half-old", "n1")
                    .usage("cpu", "1500m")
                    .created_ago_secs(40),
                pod("one-and-half-new", "n1")
                    .usage("cpu", "1500m")
                    .created_ago_secs(20),
                pod("four", "n1").usage("cpu", "4").created_ago_secs(30),
                TestPod::new("web", "no-metric")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "rs")
                    .cpu("100m")
                    .created_ago_secs(1),
            ])
            .pods(fill("n3", "c", 5, "1"))
    };
    // n1 at 95%: excess 2500m over 70%. r = usage / excess: four 1.6 → 1/1.6 + 1 = 1.625,
    // two 0.8, one-and-half 0.6, half 0.2. After "four" the node is at 55%: done.
    let args = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70},"nodeFit":false,
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;
    assert_eq!(go(&cluster("0", 0), args).evicted_names(), ["four"]);

    // 5 cpu of system usage keep n1 above 5%, and 30 low targets give the budget: every pod
    // goes, in the full order (equal scores: newest first; no metric last).
    let args = r#"{"lowThresholds":{"cpu":5},"highThresholds":{"cpu":5},"nodeFit":false,
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;
    let run = go(&cluster("5", 30), args);
    assert_eq!(
        run.evicted_from("n1"),
        [
            "four",
            "two",
            "one-and-half-new",
            "one-and-half-old",
            "half",
            "no-metric"
        ]
    );
}

#[test]
fn node_fit_checks_predicates_and_the_targets_usage() {
    // n2 is the only low node and is tainted: nothing fits with nodeFit on.
    let tainted = TestCluster::new()
        .nodes([
            node("n1"),
            node("n2").taint("dedicated", "x", NoSchedule),
            node("n3"),
        ])
        .pods(fill("n1", "a", 9, "1"))
        .pods(fill("n3", "c", 5, "1"));
    assert!(go(&tainted, ARGS).evicted_names().is_empty());
    let off = with(r#""nodeFit":false"#);
    assert_eq!(go(&tainted, &off).evicted_names(), ["a1", "a2"]);

    // Usage check: a pod using 8 cpu does not fit n2 (high 70% = 7 cpu); the 1-cpu pods do.
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods([
            pod("huge", "n1").usage("cpu", "8").created_ago_secs(1),
            pod("small", "n1").usage("cpu", "1").created_ago_secs(2),
        ])
        .pods(fill("n3", "c", 5, "1"));
    let run = go(&cluster, ARGS);
    assert_eq!(run.evicted_names(), ["small"]);
    assert_eq!(go(&cluster, &off).evicted_names(), ["huge"]);

    // Pods without a metric are never candidates under nodeFit.
    let unmeasured = TestCluster::new()
        .nodes([node("n1").system_usage("cpu", "9"), node("n2"), node("n3")])
        .pods((1..=3).map(|i| {
            TestPod::new("web", &format!("m{i}"))
                .on_node("n1")
                .owned_by("ReplicaSet", "rs")
                .cpu("100m")
        }))
        .pods(fill("n3", "c", 5, "1"));
    assert!(go(&unmeasured, ARGS).evicted_names().is_empty());
    assert_eq!(go(&unmeasured, &off).evicted_names(), ["m1", "m2", "m3"]);
}

#[test]
fn phantom_usage_and_reserve_only_evicted() {
    // Source n1 at 95% with pods of 1 cpu (excess 2500m: three pods); target n2 at 0 with room
    // for 7 cpu. A PDB blocks a1..a7, the first seven in eviction order.
    // They fit (phantom usage fills n2) but are never evicted.
    let mut cluster = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n3", "c", 5, "1"))
        .pod(
            pod("z", "n1")
                .usage("cpu", "500m")
                .created_ago_secs(999_999),
        )
        .pdb(
            TestPdb::new("web", "block")
                .match_label("blocked", "yes")
                .disruptions_allowed(0),
        );
    for (i, p) in fill("n1", "a", 9, "1").into_iter().enumerate() {
        cluster = cluster.pod(if i < 7 { p.label("blocked", "yes") } else { p });
    }
    // Koordinator: a1..a7 each reserve 1 cpu on n2 while being checked, so a8, a9 and z find no
    // room: nothing moves at all.
    let koordinator = go(&cluster, ARGS);
    assert!(koordinator.evicted_names().is_empty());
    assert_eq!(koordinator.refused_names().len(), 7);
    // Fixed: only admitted evictions take room, so a8, a9 and z go (9.5 → 7.0 cpu).
    let fixed = go(&cluster, &with(r#""reserveOnlyEvicted":true"#));
    assert_eq!(fixed.evicted_names(), ["a8", "a9", "z"]);
    assert_eq!(fixed.refused_names().len(), 7);
}

#[test]
fn ties_are_broken_by_uid_and_node_name() {
    // Two identical sources and identical pods: node name orders the sources, uid the pods.
    let cluster = TestCluster::new()
        .nodes([node("nb"), node("na"), node("t1"), node("t2"), node("m")])
        .pods((1..=9).rev().map(|i| {
            pod(&format!("b{i}"), "nb")
                .uid(&format!("u-b{i}"))
                .created_ago_secs(60)
        }))
        .pods((1..=9).map(|i| {
            pod(&format!("a{i}"), "na")
                .uid(&format!("u-a{}", 10 - i))
                .created_ago_secs(60)
        }))
        .pods(fill("m", "c", 5, "1"));
    let run = go(&cluster, ARGS);
    assert_eq!(run.evicted_names(), ["a9", "a8", "b1", "b2"]);
    for _ in 0..3 {
        assert_eq!(go(&cluster, ARGS).evicted_names(), run.evicted_names());
    }
}

#[test]
fn reasons_name_each_overutilized_resource_in_order() {
    let cluster = TestCluster::new()
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(
            fill("n1", "a", 9, "1")
                .into_iter()
                .map(|p| p.usage("memory", "9Gi")),
        )
        .pods(fill("n3", "c", 5, "1"));
    let args = r#"{"lowThresholds":{"cpu":20,"memory":20},"highThresholds":{"cpu":70,"memory":75},
        "anomalyCondition":{"consecutiveAbnormalities":1,"consecutiveNormalities":1}}"#;
    let run = go(&cluster, args);
    assert_eq!(
        run.proposals[0].reason,
        "node is overutilized, node cpu usage(90.00%)>threshold(70.00%), node memory \
         usage(81.00%)>threshold(75.00%)"
    );
    // The reason is written with the usage at the time of each proposal.
    // After a1 (1 cpu, 9Gi) memory is at 72%, no longer above 75%.
    assert_eq!(
        run.proposals[1].reason,
        "node is overutilized, node cpu usage(80.00%)>threshold(70.00%)"
    );
}

// ---------------------------------------------------------------------------------------------
// Anomaly detectors across runs
// ---------------------------------------------------------------------------------------------

/// `base()` at `now`, n1's metric updated at `updated`.
fn at(now: i64, updated: i64) -> TestCluster {
    TestCluster::new()
        .now_ms(now)
        .nodes([
            node("n1").usage_age_ms(Some(now - updated)),
            node("n2"),
            node("n3"),
        ])
        .pods(fill("n1", "a", 9, "1"))
        .pods(fill("n3", "c", 5, "1"))
}

const T0: i64 = DEFAULT_NOW_MS;
/// Detector: anomalous after more than 2 rounds, for 60s.
const DETECT: &str = r#"{"lowThresholds":{"cpu":20},"highThresholds":{"cpu":70},
    "anomalyCondition":{"timeout":"1m","consecutiveAbnormalities":2,"consecutiveNormalities":3}EXTRA}"#;

fn detect(extra: &str) -> String {
    DETECT.replace("EXTRA", extra)
}

fn detector(state: &StateScope, node: &str) -> Option<Detector> {
    let map: std::collections::BTreeMap<String, Detector> =
        serde_json::from_slice(state.get(NODE_KEY)?).unwrap();
    map.get(node).copied()
}

/// n1 (busy: 90%) and n3 (80%) above 70%, n2 idle; every pod of n1 and n3 blocked by a PDB,
/// so nothing changes from round to round.
fn blocked_at(now: i64, n1_busy: bool) -> TestCluster {
    let blocked = |p: TestPod| p.label("blocked", "yes");
    let cluster = TestCluster::new()
        .now_ms(now)
        .nodes([node("n1"), node("n2"), node("n3")])
        .pods(fill("n3", "c", 8, "1").into_iter().map(blocked))
        .pdb(
            TestPdb::new("web", "block")
                .match_label("blocked", "yes")
                .disruptions_allowed(0),
        );
    if n1_busy {
        cluster.pods(fill("n1", "a", 9, "1").into_iter().map(blocked))
    } else {
        cluster
    }
}

fn anomalous(run: &TestRun) -> usize {
    let s = summary(run);
    let end = s.find(" anomalous").expect("anomalous count");
    s[..end].rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_source_is_anomalous_on_the_round_after_n_and_until_the_timeout() {
    let mut state = StateScope::default();
    let args = detect("");
    let mut round = |t: i64| {
        let run =
            blocked_at(T0 + t, true).run_with_state::<LowNodeLoad>(Balance, &args, &mut state);
        run.assert_ok();
        (anomalous(&run), run.refusals.len())
    };
    assert_eq!(round(0), (0, 0));
    assert_eq!(round(10_000), (0, 0));
    // Third round: more than 2. n1 (90%) goes first: 7 of its pods fit n2 (phantom usage
    // fills n2's 7 cpu of room) and are refused by the PDB; none of n3's fits any more.
    assert_eq!(round(20_000), (2, 7));
    // Still over: anomalous until 20s + 1m (the expiry is not extended), then counting restarts.
    assert_eq!(round(50_000).0, 2);
    assert_eq!(round(80_000).0, 2);
    assert_eq!(round(80_001).0, 0);
    assert_eq!(detector(&state, "n1").unwrap().abnormalities, 1);
}

#[test]
fn a_low_round_resets_an_anomalous_detector() {
    let mut state = StateScope::default();
    let args = detect("");
    for t in [0, 10_000, 20_000] {
        blocked_at(T0 + t, true)
            .run_with_state::<LowNodeLoad>(Balance, &args, &mut state)
            .assert_ok();
    }
    assert!(detector(&state, "n1").unwrap().anomalous);
    // n1 idle (both-low) while n3 is still an anomalous source: the gates reach the reset.
    let run =
        blocked_at(T0 + 30_000, false).run_with_state::<LowNodeLoad>(Balance, &args, &mut state);
    assert_eq!(anomalous(&run), 1);
    assert_eq!(
        detector(&state, "n1").unwrap(),
        Detector {
            forget_ms: detector(&state, "n1").unwrap().forget_ms,
            ..Detector::default()
        }
    );
    // n1 busy again: it counts from 1, only n3 is anomalous.
    let run =
        blocked_at(T0 + 40_000, true).run_with_state::<LowNodeLoad>(Balance, &args, &mut state);
    assert_eq!(anomalous(&run), 1);
    assert_eq!(detector(&state, "n1").unwrap().abnormalities, 1);
    // A source that got back under its high threshold while evicting is reset too.
    let mut state = StateScope::default();
    for t in [0, 10_000, 20_000] {
        at(T0 + t, T0 + t)
            .run_with_state::<LowNodeLoad>(Balance, &args, &mut state)
            .assert_ok();
    }
    let d = detector(&state, "n1").unwrap();
    assert!(!d.anomalous && d.abnormalities == 0, "{d:?}");
}

#[test]
fn detectors_are_forgotten_after_the_cache_timeout() {
    let mut state = StateScope::default();
    let args = detect(r#","detectorCacheTimeout":"30s""#);
    for t in [0, 10_000] {
        at(T0 + t, T0 + t)
            .run_with_state::<LowNodeLoad>(Balance, &args, &mut state)
            .assert_ok();
    }
    assert_eq!(detector(&state, "n1").unwrap().abnormalities, 2);
    // A round where n1 is not a source (nothing anywhere) leaves the detector alone…
    let quiet = TestCluster::new()
        .now_ms(T0 + 20_000)
        .nodes([node("n1"), node("n2"), node("n3")]);
    quiet
        .run_with_state::<LowNodeLoad>(Balance, &args, &mut state)
        .assert_ok();
    assert_eq!(detector(&state, "n1").unwrap().abnormalities, 2);
    // …until 30s after it was last a source (10s): at 41s it is gone, and counting restarts.
    let run =
        at(T0 + 41_000, T0 + 41_000).run_with_state::<LowNodeLoad>(Balance, &args, &mut state);
    assert!(run.evicted_names().is_empty());
    assert_eq!(detector(&state, "n1").unwrap().abnormalities, 1);
    // Without the timeout (5m) the third round would have moved pods.
    let mut state = StateScope::default();
    let args = detect("");
    for t in [0, 10_000] {
        at(T0 + t, T0 + t)
            .run_with_state::<LowNodeLoad>(Balance, &args, &mut state)
            .assert_ok();
    }
    let run =
        at(T0 + 41_000, T0 + 41_000).run_with_state::<LowNodeLoad>(Balance, &args, &mut state);
    assert_eq!(run.evicted_names().len(), 2);
}

#[test]
fn count_metric_updates_counts_a_metric_once() {
    // Rounds every 10s, the metric updated once (at T0): Koordinator counts three rounds.
    let rounds = |extra: &str| {
        let mut state = StateScope::default();
        let args = detect(extra);
        (0..3)
            .map(|i| {
                let run = at(T0 + i * 10_000, T0)
                    .run_with_state::<LowNodeLoad>(Balance, &args, &mut state);
                run.assert_ok();
                run.evicted_names().len()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(rounds(""), [0, 0, 2]);
    assert_eq!(rounds(r#","countMetricUpdates":true"#), [0, 0, 0]);
    // With a new metric each round the fix counts like Koordinator.
    let mut state = StateScope::default();
    let args = detect(r#","countMetricUpdates":true"#);
    let moved: Vec<usize> = (0..3)
        .map(|i| {
            at(T0 + i * 10_000, T0 + i * 10_000)
                .run_with_state::<LowNodeLoad>(Balance, &args, &mut state)
                .evicted_names()
                .len()
        })
        .collect();
    assert_eq!(moved, [0, 0, 2]);
}
