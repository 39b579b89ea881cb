//! Rebalancer's opt-in fixes of descheduler flaws work through the built-in wasm modules, not only
//! in the policy crates' native tests: a small cluster is ingested as Kubernetes JSON, a
//! DeschedulerPolicy imported as the profile and run with the embedded policies, as the
//! conformance test does (no HTTP).

use std::sync::Arc;

use rebalancer_cluster::{self as cluster, Format};
use rebalancer_engine::profile::parse_deschedule_policy;
use rebalancer_engine::run::{self, RunReport};
use rebalancer_engine::{Engine, EngineConfig, PolicyRegistry};
use serde_json::{Value, json};

fn registry(engine: &Engine) -> PolicyRegistry {
    let registry = PolicyRegistry::default();
    for (file, bytes) in rebalancer_builtins::modules() {
        let policy = engine
            .compile(bytes)
            .unwrap_or_else(|e| panic!("built-in {file}: {e}"));
        registry.insert(policy, true);
    }
    registry
}

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": format!("uid-{name}"),
            "labels": { "kubernetes.io/hostname": name },
            "creationTimestamp": "2024-01-01T00:00:00Z"
        },
        "spec": {},
        "status": {
            "allocatable": { "cpu": "4", "memory": "16Gi", "pods": "10" },
            "capacity": { "cpu": "4", "memory": "16Gi", "pods": "10" },
            "conditions": [{ "type": "Ready", "status": "True" }]
        }
    })
}

/// A running pod of ReplicaSet `owner` in `web` on `node`, requesting `cpu`.
fn pod(name: &str, owner: &str, node: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "web",
            "uid": format!("uid-{name}"),
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": owner,
                "uid": format!("uid-rs-{owner}"),
                "controller": true
            }]
        },
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "app",
                "image": format!("registry.example.com/{owner}:1"),
                "resources": { "requests": { "cpu": cpu, "memory": "64Mi" } }
            }]
        },
        "status": {
            "phase": "Running",
            "startTime": "2024-01-01T00:00:05Z",
            "conditions": [{ "type": "Ready", "status": "True" }]
        }
    })
}

/// n1 runs five 700m pods (87.5% cpu); n2 and n3 run two 400m pods each (20%). Below the 50%
/// target each of n2 and n3 has 1200m of room — one 700m pod each — while the pooled room
/// (2400m) is what descheduler checks, and it lets three pods go.
fn cluster() -> Value {
    let mut items = vec![
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": "web", "uid": "uid-ns-web" }
        }),
        node("n1"),
        node("n2"),
        node("n3"),
    ];
    items.extend((1..=5).map(|i| pod(&format!("big-{i}"), "big", "n1", "700m")));
    items.extend((1..=2).map(|i| pod(&format!("small-a{i}"), "small-a", "n2", "400m")));
    items.extend((1..=2).map(|i| pod(&format!("small-b{i}"), "small-b", "n3", "400m")));
    json!({ "apiVersion": "v1", "kind": "List", "items": items })
}

fn policy(lnu_args: Value) -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "default",
            "pluginConfig": [
                { "name": "DefaultEvictor", "args": {} },
                { "name": "LowNodeUtilization", "args": lnu_args }
            ],
            "plugins": {
                "filter": { "enabled": ["DefaultEvictor"] },
                "preevictionfilter": { "enabled": ["DefaultEvictor"] },
                "balance": { "enabled": ["LowNodeUtilization"] }
            }
        }]
    })
}

fn run_with(engine: &Engine, registry: &PolicyRegistry, lnu_args: Value) -> RunReport {
    let objects = serde_json::to_vec(&cluster()).expect("serialize");
    let set = cluster::parse_list(objects, Format::Json).expect("ingest");
    let now_ms = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    let snapshot = Arc::new(cluster::build_snapshot(&set, 1, now_ms).expect("snapshot"));
    let profile = parse_deschedule_policy(&policy(lnu_args)).unwrap_or_else(|errors| {
        let list: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        panic!("policy: {}", list.join("; "))
    });
    run::execute(
        engine,
        registry,
        &profile,
        &snapshot,
        run::PolicyStates::default(),
    )
    .expect("run")
}

fn assert_no_policy_errors(report: &RunReport) {
    for p in &report.policies {
        if let Some(e) = &p.error {
            panic!("{} ({}): {} {}", p.plugin, p.plugin_set, e.kind, e.message);
        }
    }
}

fn evicted(report: &RunReport) -> Vec<&str> {
    report.proposals.iter().map(|p| p.name.as_str()).collect()
}

#[test]
fn low_node_utilization_target_resource_fit_proposes_fewer_evictions() {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let registry = registry(&engine);
    let thresholds = json!({ "cpu": 20, "pods": 20 });
    let targets = json!({ "cpu": 50, "pods": 50 });

    // Default (descheduler's behaviour): the pooled room lets three pods go, though after two
    // moves neither destination could take a third 700m pod below its target.
    let off = run_with(
        &engine,
        &registry,
        json!({ "thresholds": thresholds, "targetThresholds": targets }),
    );
    assert_no_policy_errors(&off);
    assert_eq!(evicted(&off), ["big-1", "big-2", "big-3"]);

    // With targetResourceFit, each move needs one destination with room, and takes that room.
    let on = run_with(
        &engine,
        &registry,
        json!({ "thresholds": thresholds, "targetThresholds": targets, "targetResourceFit": true }),
    );
    assert_no_policy_errors(&on);
    assert_eq!(evicted(&on), ["big-1", "big-2"]);
    assert!(on.proposals.len() < off.proposals.len());
    let targets: Vec<&str> = on
        .proposals
        .iter()
        .map(|p| p.reason.rsplit("; ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        targets,
        ["node n2 has room for it", "node n3 has room for it"],
        "{:?}",
        on.proposals
    );
    assert!(
        on.proposals
            .iter()
            .all(|p| p.plugin == "LowNodeUtilization")
    );

    // The module validates the option's type like any other arg.
    let bad = run_with(
        &engine,
        &registry,
        json!({ "thresholds": thresholds, "targetThresholds": targets, "targetResourceFit": "yes" }),
    );
    let error = bad
        .policies
        .iter()
        .find_map(|p| p.error.as_ref())
        .expect("a policy error for a non-boolean targetResourceFit");
    assert!(
        error.message.contains("targetResourceFit") || error.message.contains("boolean"),
        "{error:?}"
    );
    assert!(bad.proposals.is_empty());
}

/// Every opt-in fix is in its module's args schema as a documented extension defaulting to
/// false, and left out of the module's default args (which stay a valid descheduler document).
#[test]
fn the_modules_publish_their_extensions_default_off() {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let registry = registry(&engine);
    for (plugin, option, issue) in [
        ("RemoveDuplicates", "targetResourceFit", "#1237"),
        ("LowNodeUtilization", "targetResourceFit", "#1237"),
        (
            "LowNodeUtilization",
            "perTaintTolerations",
            "PreferNoSchedule",
        ),
        (
            "HighNodeUtilization",
            "perTaintTolerations",
            "PreferNoSchedule",
        ),
        (
            "RemovePodsViolatingInterPodAntiAffinity",
            "includePreferredAntiAffinity",
            "#250/#1125",
        ),
    ] {
        let meta = &registry
            .get(plugin)
            .unwrap_or_else(|| panic!("{plugin} is built in"))
            .policy
            .meta;
        let schema = &meta.args_schema["properties"][option];
        assert_eq!(schema["default"], false, "{plugin}.{option}: {schema}");
        let description = schema["description"].as_str().unwrap_or_default();
        assert!(
            description.contains("Rebalancer extension") && description.contains(issue),
            "{plugin}.{option}: {description}"
        );
        assert!(
            meta.default_args.get(option).is_none(),
            "{plugin}: default args {}",
            meta.default_args
        );
    }
}
