//! The Python example policy (`policies-wasm/example-python`, `PodAgeOnHotNodes`, a component
//! built with componentize-py that reads the cluster through the `columns` interface of ABI 1.4)
//! on a real server: uploaded with the default limits, put in a profile with args, run twice on
//! a snapshot whose answer is known (the first run only counts hot nodes in the policy's state,
//! the second proposes), its logs read from the run report, its `validate-args` errors read
//! from the profile API — and its decisions, logs and state compared with those of its Rust
//! twin (`policies-wasm/example-python-twin`) on the same snapshot.
//!
//! The component: `REBALANCER_PYTHON_POLICY_WASM` (`.ci/run` builds it and sets it), else built
//! here with `policies-wasm/example-python/build.sh` when componentize-py is found
//! (`COMPONENTIZE_PY`, or on PATH). Without either, the test fails under CI (env `CI` set) and
//! is skipped, loudly, elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, list, node, pod, policy_module};

/// The snapshot's time: pods' ages are counted from it.
const OBSERVED_AT: &str = "2026-03-01T00:00:00Z";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("server/ is one level below the repository root")
        .to_path_buf()
}

/// The built component, or why there is none.
fn python_component() -> Result<Vec<u8>, String> {
    if let Some(path) = std::env::var_os("REBALANCER_PYTHON_POLICY_WASM") {
        let path = PathBuf::from(path);
        return std::fs::read(&path).map_err(|e| {
            format!(
                "REBALANCER_PYTHON_POLICY_WASM={}: {e} (build it with \
                 policies-wasm/example-python/build.sh)",
                path.display()
            )
        });
    }
    let componentize = std::env::var_os("COMPONENTIZE_PY").unwrap_or("componentize-py".into());
    let found = Command::new(&componentize)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        return Err(format!(
            "componentize-py ({}) is not installed and REBALANCER_PYTHON_POLICY_WASM is not set; \
             install it with `pip install -r .ci/python-policy-requirements.txt` and set \
             COMPONENTIZE_PY or put it on PATH",
            componentize.to_string_lossy()
        ));
    }
    let output = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("example_python.wasm");
    let built = Command::new(repo_root().join("policies-wasm/example-python/build.sh"))
        .arg(&output)
        .env("COMPONENTIZE_PY", &componentize)
        .output()
        .map_err(|e| format!("running build.sh: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "build.sh failed ({}):\n{}{}",
            built.status,
            String::from_utf8_lossy(&built.stdout),
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    std::fs::read(&output).map_err(|e| format!("{}: {e}", output.display()))
}

/// The component, or `None` after saying loudly why the test is skipped (a failure under CI).
fn component_or_skip() -> Option<Vec<u8>> {
    match python_component() {
        Ok(wasm) => Some(wasm),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!(
                "the Python policy test cannot run: {why}\n(.ci/run builds the component in its \"Python policy\" step)"
            )
        }
        Err(why) => {
            eprintln!(
                "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !! SKIPPED: the Python policy test (server/tests/api/python_policy.rs):\n\
                 !! {why}\n\
                 !! Set CI=1 to make this a failure.\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            );
            None
        }
    }
}

/// A pod owned by a ReplicaSet (so DefaultEvictor lets it go), created `age_days` before the
/// snapshot.
fn aged(name: &str, on: &str, age_days: i64, owner: &str) -> Value {
    let mut pod = pod("shop", name).on(on).owned_by(owner, "web").build();
    let created =
        time::OffsetDateTime::parse(OBSERVED_AT, &time::format_description::well_known::Rfc3339)
            .unwrap()
            - time::Duration::days(age_days);
    pod["metadata"]["creationTimestamp"] = json!(
        created
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    );
    pod
}

fn node_metric(node: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": node},
        "status": {
            "updateTime": OBSERVED_AT,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "1Gi"}}}
        }
    })
}

/// Four 4-cpu nodes: `hot` uses 95 % of its cpu, `warm` 90 %, `cool` 50 %, `blind` reports
/// nothing. Every node has old pods; `hot` also a young one and an old DaemonSet pod.
fn cluster() -> Value {
    list([
        node("hot").build(),
        node("warm").build(),
        node("cool").build(),
        node("blind").build(),
        node_metric("hot", "3800m"),
        node_metric("warm", "3600m"),
        node_metric("cool", "2"),
        aged("hot-30d", "hot", 30, "ReplicaSet"),
        aged("hot-10d", "hot", 10, "ReplicaSet"),
        aged("hot-1d", "hot", 1, "ReplicaSet"),
        aged("hot-proxy-90d", "hot", 90, "DaemonSet"),
        aged("warm-20d", "warm", 20, "ReplicaSet"),
        aged("warm-15d", "warm", 15, "ReplicaSet"),
        aged("cool-40d", "cool", 40, "ReplicaSet"),
        aged("blind-40d", "blind", 40, "ReplicaSet"),
    ])
}

fn profile(plugin: &str, args: Value) -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "hot-nodes",
            "pluginConfig": [
                {"name": plugin, "args": args},
                {"name": "DefaultEvictor", "args": {}}
            ],
            "plugins": {"deschedule": {"enabled": [plugin]}}
        }]
    })
}

/// One run's outcome of the profile's only policy, and its decisions in proposal order:
/// (pod name, node, reason).
async fn run(server: &TestServer, cluster: &str, profile: &str) -> (Value, Vec<[String; 3]>) {
    let (status, run) = server.run(cluster, profile).await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let outcome = run["report"]["policies"][0].clone();
    assert!(outcome["error"].is_null(), "{outcome:#}");
    let (status, page) = server
        .get(&format!(
            "/api/v1/decisions?run={}&limit=100",
            run["id"].as_i64().unwrap()
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{page:#}");
    let mut items = page["items"].as_array().unwrap().clone();
    items.sort_by_key(|d| d["id"].as_i64().unwrap());
    let decisions = items
        .iter()
        .map(|d| {
            [
                d["pod"]["name"].as_str().unwrap().to_string(),
                d["node"].as_str().unwrap().to_string(),
                d["reason"].as_str().unwrap().to_string(),
            ]
        })
        .collect();
    (outcome, decisions)
}

fn logs(outcome: &Value) -> Vec<(String, String)> {
    outcome["logs"]
        .as_array()
        .unwrap_or_else(|| panic!("no logs: {outcome:#}"))
        .iter()
        .map(|l| {
            (
                l["level"].as_str().unwrap().to_string(),
                l["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The policy's state scope after the runs, decoded: key → value as text.
async fn state(server: &TestServer, cluster: &str, policy: &str) -> Vec<(String, String)> {
    let scopes = server
        .state()
        .store
        .load_policy_state(cluster, "hot-nodes")
        .await
        .unwrap();
    let scope = scopes
        .iter()
        .find(|s| s.policy == policy)
        .unwrap_or_else(|| panic!("no state of {policy}"));
    rebalancer_policy_sdk::state::decode(&scope.data)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v).unwrap()))
        .collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_policy_uploads_runs_remembers_and_decides_as_its_rust_twin() {
    let Some(wasm) = component_or_skip() else {
        return;
    };
    // Default limits (module size, instances, memory, deadlines) but one: the compile deadline.
    // Tests compile with the debug build of the server's compiler process, which takes ~30 s
    // for this 18 MB component on a quiet machine (the release build: see
    // docs/writing-a-policy-python.md) and can take twice that while other tests run.
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.compile.timeout_ms = 600_000;
    })
    .await;
    assert!(
        wasm.len() > 8 << 20 && wasm.len() <= server.state().settings.sandbox.max_module_bytes,
        "the component is {} bytes",
        wasm.len()
    );

    let uploaded = server.upload(wasm).await;
    assert_eq!(uploaded["name"], "PodAgeOnHotNodes", "{uploaded:#}");
    assert_eq!(uploaded["abiVersion"], "1.4.0", "{uploaded:#}");
    assert_eq!(uploaded["extensionPoints"], json!(["deschedule"]));
    assert_eq!(
        uploaded["defaultArgs"],
        json!({"minAgeDays": 7, "cpuThresholdPercent": 80, "hotRuns": 3, "maxEvictionsPerRun": 10})
    );
    assert_eq!(
        uploaded["argsSchema"]["properties"]["cpuThresholdPercent"]["maximum"],
        100
    );
    let twin = server
        .upload(policy_module("example_python_twin.wasm"))
        .await;
    assert_eq!(twin["name"], "PodAgeOnHotNodesRust", "{twin:#}");

    // validate-args, through the profile API: every bad field at its path, nothing stored.
    let bad = json!({"minAgeDays": 0, "cpuThresholdPercent": "high", "hotRun": 2,
                     "maxEvictionsPerRun": 2.5});
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/hot-nodes",
            &profile("PodAgeOnHotNodes", bad),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert_error(&body, "invalid_profile");
    let at = "profiles[0].pluginConfig[0].args";
    let mut errors: Vec<(String, String)> = body["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // In the order of the args object's keys, which the server does not keep: compare sorted.
    errors.sort();
    assert_eq!(
        errors,
        [
            (
                format!("{at}.cpuThresholdPercent"),
                "must be an integer, got \"high\"".to_string()
            ),
            (
                format!("{at}.hotRun"),
                "unknown field; the args are minAgeDays, cpuThresholdPercent, hotRuns, \
                 maxEvictionsPerRun"
                    .to_string()
            ),
            (
                format!("{at}.maxEvictionsPerRun"),
                "must be an integer, got 2.5".to_string()
            ),
            (
                format!("{at}.minAgeDays"),
                "must be between 1 and 3650, got 0".to_string()
            ),
        ],
        "{body:#}"
    );
    let (status, _) = server.get("/api/v1/profiles/hot-nodes").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The same snapshot on two clusters, one per policy, so their proposals cannot interfere.
    // 7.0 is an integer to JSON Schema, and to the Python policy.
    let args = json!({"hotRuns": 2, "minAgeDays": 7.0, "maxEvictionsPerRun": 3});
    for cluster_name in ["python", "rust"] {
        let (status, body) = server
            .put_json(
                &format!("/api/v1/clusters/{cluster_name}/snapshot?observedAt={OBSERVED_AT}"),
                &cluster(),
            )
            .await;
        assert!(status.is_success(), "{status}: {body:#}");
    }
    server
        .put_profile("hot-nodes", &profile("PodAgeOnHotNodes", args.clone()))
        .await;

    // First run: `hot` and `warm` are hot for the first time; nothing is proposed yet.
    let (first, decisions) = run(&server, "python", "hot-nodes").await;
    assert_eq!(decisions, Vec::<[String; 3]>::new());
    assert_eq!(
        logs(&first),
        owned(&[
            (
                "debug",
                "1 of 4 nodes have no cpu usage or allocatable cpu: never hot"
            ),
            (
                "debug",
                "node hot at 95.0% cpu, hot for 1 of 2 runs: waiting"
            ),
            (
                "debug",
                "node warm at 90.0% cpu, hot for 1 of 2 runs: waiting"
            ),
            (
                "info",
                "2 of 4 nodes above 80% cpu; 0 of them for at least 2 consecutive runs"
            ),
        ])
    );
    assert_eq!(
        state(&server, "python", "PodAgeOnHotNodes").await,
        owned(&[("hot-runs/hot", "1"), ("hot-runs/warm", "1")])
    );

    // Second run: both have been hot for 2 runs. The hottest node first, each node's oldest
    // pods first, 3 at most; the DaemonSet pod is protected by the evictor, hot-1d is young.
    let (second, decisions) = run(&server, "python", "hot-nodes").await;
    let reason = |node: &str, percent: &str| {
        format!(
            "node {node} uses {percent} of its allocatable cpu, above 80% for 2 consecutive \
             runs; the pod is older than 7 days"
        )
    };
    let expected: Vec<[String; 3]> = vec![
        ["hot-30d".into(), "hot".into(), reason("hot", "95.0%")],
        ["hot-10d".into(), "hot".into(), reason("hot", "95.0%")],
        ["warm-20d".into(), "warm".into(), reason("warm", "90.0%")],
    ];
    assert_eq!(decisions, expected);
    assert_eq!(second["proposals"], 3, "{second:#}");
    assert_eq!(
        logs(&second),
        owned(&[
            (
                "debug",
                "1 of 4 nodes have no cpu usage or allocatable cpu: never hot"
            ),
            (
                "info",
                "2 of 4 nodes above 80% cpu; 2 of them for at least 2 consecutive runs"
            ),
            (
                "info",
                "node hot at 95.0% cpu for 2 runs: 2 of 3 pods older than 7 days evictable"
            ),
            (
                "info",
                "node warm at 90.0% cpu for 2 runs: 2 of 2 pods older than 7 days evictable"
            ),
            (
                "info",
                "proposed 3 pods from 2 nodes (maxEvictionsPerRun 3)"
            ),
        ])
    );
    assert_eq!(
        state(&server, "python", "PodAgeOnHotNodes").await,
        owned(&[("hot-runs/hot", "2"), ("hot-runs/warm", "2")])
    );

    // The Rust twin, same args (7 for 7.0: serde wants an integer), on the same snapshot:
    // the same decisions, logs and state, run for run.
    let mut twin_args = args.clone();
    twin_args["minAgeDays"] = json!(7);
    server
        .put_profile("hot-nodes", &profile("PodAgeOnHotNodesRust", twin_args))
        .await;
    let (twin_first, twin_decisions) = run(&server, "rust", "hot-nodes").await;
    assert!(twin_decisions.is_empty());
    assert_eq!(logs(&twin_first), logs(&first));
    let (twin_second, twin_decisions) = run(&server, "rust", "hot-nodes").await;
    assert_eq!(twin_decisions, decisions);
    assert_eq!(logs(&twin_second), logs(&second));
    assert_eq!(
        state(&server, "rust", "PodAgeOnHotNodesRust").await,
        state(&server, "python", "PodAgeOnHotNodes").await
    );
}
