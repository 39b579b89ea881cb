//! The Koordinator-style built-ins on the demo cluster, end to end: LowNodeLoad moves pods off
//! a node hot on measured usage, CpuOrchestration flags the demo's drifted cpusets, and the
//! simulated backend's koordlet reports the moved load on its new node.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestServer;

fn load_aware_profile() -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "koordinator",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"podProtections": {
                    "defaultDisabled": ["PodsWithLocalStorage"], "extraEnabled": ["PodsWithPVC"]}}},
                {"name": "LowNodeLoad", "args": {
                    "highThresholds": {"cpu": 65, "memory": 80},
                    "lowThresholds": {"cpu": 35, "memory": 45},
                    "anomalyCondition": {"consecutiveAbnormalities": 1}
                }},
                {"name": "CpuOrchestration"}
            ],
            "plugins": {
                "deschedule": {"enabled": ["CpuOrchestration"]},
                "balance": {"enabled": ["LowNodeLoad"]}
            }
        }]
    })
}

async fn nodes(server: &TestServer) -> Vec<Value> {
    let (status, nodes) = server.get("/api/v1/clusters/demo/nodes").await;
    assert_eq!(status, StatusCode::OK, "{nodes:#}");
    nodes["items"].as_array().unwrap().clone()
}

fn node<'a>(nodes: &'a [Value], name: &str) -> &'a Value {
    nodes
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

#[tokio::test]
async fn load_aware_and_cpu_checks_propose_moves_on_the_demo_and_koordlet_follows_them() {
    let server = TestServer::start_with_demo().await;
    let before = nodes(&server).await;
    for n in &before {
        assert_eq!(n["usage"]["source"], "nodeMetric", "{n:#}");
    }
    server
        .put_profile("load-aware", &load_aware_profile())
        .await;
    let (status, run) = server.run("demo", "load-aware").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    assert_eq!(run["status"], "succeeded", "{run:#}");
    for outcome in run["report"]["policies"].as_array().unwrap() {
        assert!(outcome["error"].is_null(), "{outcome:#}");
    }
    let id = run["id"].as_i64().unwrap();
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={id}&limit=1000"))
        .await;
    let decisions = decisions["items"].as_array().unwrap().clone();

    // LowNodeLoad: only from nodes above 65 % measured cpu, saying so.
    let load: Vec<&Value> = decisions
        .iter()
        .filter(|d| d["plugin"] == "LowNodeLoad")
        .collect();
    assert!(!load.is_empty(), "{decisions:#?}");
    for d in &load {
        let source = node(&before, d["node"].as_str().unwrap());
        assert!(
            source["usage"]["percent"]["cpu"].as_f64().unwrap() > 65.0,
            "{d:#} from {source:#}"
        );
        let reason = d["reason"].as_str().unwrap();
        assert!(
            reason.contains("node is overutilized") && reason.contains("cpu usage("),
            "{reason}"
        );
    }

    // CpuOrchestration: the demo's two drifted cpusets, each with its invariant.
    let cpu: Vec<(&str, &str)> = decisions
        .iter()
        .filter(|d| d["plugin"] == "CpuOrchestration")
        .map(|d| {
            (
                d["pod"]["name"].as_str().unwrap(),
                d["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(cpu.len(), 2, "{cpu:#?}");
    assert!(
        cpu.iter().all(|(name, _)| name.starts_with("worker-")),
        "{cpu:#?}"
    );
    assert!(
        cpu.iter().any(|(_, why)| why.starts_with("H1:")),
        "a CPU the node does not have: {cpu:#?}"
    );
    assert!(
        cpu.iter()
            .any(|(_, why)| why.starts_with("H8:") || why.starts_with("H2:")),
        "a doubly pinned or oversized cpuset: {cpu:#?}"
    );

    // Execute one LowNodeLoad move: koordlet reports the pod's load on its new node.
    let moved = load[0];
    let source = moved["node"].as_str().unwrap().to_string();
    let (status, body) = server
        .post_json(
            &format!("/api/v1/decisions/{}/approve", moved["id"]),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let migration = body["podMigration"].as_i64().unwrap();
    let mut last = Value::Null;
    for _ in 0..200 {
        let (_, m) = server
            .get(&format!("/api/v1/pod-migrations/{migration}"))
            .await;
        if matches!(
            m["phase"].as_str(),
            Some("Succeeded" | "Failed" | "Aborted")
        ) {
            last = m;
            break;
        }
        last = m;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["phase"], "Succeeded", "{last:#}");
    let target = last["status"]["targetNode"]
        .as_str()
        .or(last["targetNode"].as_str())
        .unwrap_or_else(|| panic!("{last:#}"))
        .to_string();
    let after = nodes(&server).await;
    let cpu_used = |nodes: &[Value], name: &str| {
        node(nodes, name)["usage"]["used"]["cpuMilli"]
            .as_i64()
            .unwrap_or_else(|| panic!("{:#}", node(nodes, name)))
    };
    assert!(
        cpu_used(&after, &source) < cpu_used(&before, &source),
        "the source's measured cpu went down"
    );
    assert!(
        cpu_used(&after, &target) > cpu_used(&before, &target),
        "the target's measured cpu went up"
    );
    let fresh = node(&after, &source)["usage"]["updateMs"].as_i64().unwrap();
    assert!(
        fresh
            > node(&before, &source)["usage"]["updateMs"]
                .as_i64()
                .unwrap(),
        "koordlet reported again"
    );
}
