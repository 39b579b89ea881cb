//! What the `columns` import (ABI 1.4) costs a guest on the reference cluster (5,000 nodes,
//! 150,000 pods, with the Koordinator layer so that nodes have measured usage): the columns
//! the contract names pulled one by one and together, a text column, and a whole policy
//! (PodLifeTime's age criterion) written against `columns` beside the built-in PodLifeTime,
//! which reads the rkyv archive. Each figure is the median of several evaluations of
//! `test_columns.wasm` in the real sandbox (a fresh instance each, as in a run), minus the median
//! of an evaluation that pulls nothing (instantiation and the call itself).
//!
//! `cargo bench -p rebalancer-engine --bench columns` (a release build; `RUNS=n` sets the
//! evaluations per case, 7 by default). Not a timed test: it prints figures and checks only that
//! every evaluation succeeds and that both PodLifeTimes propose the same pods.

#![allow(
    clippy::print_stdout,
    reason = "the benchmark's figures are its output"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rebalancer_cluster::{ClusterSnapshot, Format, build_snapshot, parse_list};
use rebalancer_engine::wasm::{CompiledPolicy, Engine, EngineConfig, EvalSession, Evaluation};
use rebalancer_policy_sdk::ExtensionPoint;
use rebalancer_policy_sdk::evictor::{DefaultEvictorArgs, EvictorConfig, Limits, RunState};
use rebalancer_sim::reference::{Size, write_koordinator_scenario};
use serde_json::{Value, json};

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7)
        .max(1);
    let t = Instant::now();
    let snapshot = reference_snapshot();
    let c = snapshot.cluster();
    eprintln!(
        "reference cluster: {} nodes, {} pods, {} strings, built in {:.1} s",
        c.node_count(),
        c.pod_count(),
        c.archive().strings.len(),
        t.elapsed().as_secs_f64()
    );

    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let module = |file: &str| {
        let path = std::path::Path::new(rebalancer_builtins::WASM_DIR).join(file);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        engine.compile(&bytes).expect("the module compiles")
    };
    let columns_guest = module("test_columns.wasm");
    let pod_life_time = module("pod_life_time.wasm");

    let run = |policy: &CompiledPolicy, args: &Value| -> Vec<Evaluation> {
        (0..runs + 1)
            .map(|_| {
                let e =
                    engine.evaluate(policy, ExtensionPoint::Deschedule, args, session(&snapshot));
                if let Err(f) = &e.outcome {
                    panic!("{args}: {f:?}");
                }
                e
            })
            .skip(1) // warm-up
            .collect()
    };
    let median = |evaluations: &[Evaluation]| -> Duration {
        let mut d: Vec<Duration> = evaluations.iter().map(|e| e.duration).collect();
        d.sort();
        d[d.len() / 2]
    };
    let pull = |columns: &[(&str, &str)]| {
        let columns: Vec<[&str; 2]> = columns.iter().map(|&(t, n)| [t, n]).collect();
        median(&run(
            &columns_guest,
            &json!({"maxPodLifeTimeSeconds": 0, "pullOnly": columns}),
        ))
    };

    let baseline = pull(&[]);
    println!(
        "median of {runs} evaluations each, minus an evaluation that pulls nothing ({:.2} ms)",
        ms(baseline)
    );
    println!("| pulled | values | ms |");
    println!("|---|---|---|");
    let contract: [(&str, &str); 5] = [
        ("pods", "creation-ms"),
        ("pods", "node"),
        ("pods", "namespace"),
        ("pods", "request:cpu"),
        ("nodes", "usage:cpu"),
    ];
    let extra: [(&str, &str); 4] = [
        ("pods", "label:app"),
        ("pods", "restarts"),
        ("pods", "name"),
        ("strings", "*"),
    ];
    for (table, name) in contract.iter().chain(&extra) {
        let rows = match *table {
            "pods" => c.pod_count(),
            "nodes" => c.node_count(),
            _ => c.archive().strings.len(),
        };
        let cost = pull(&[(table, name)]).saturating_sub(baseline);
        let what = match *table {
            "strings" => "the string table, `strings()`".to_string(),
            _ => format!("{table} `{name}`"),
        };
        println!("| {what} | {rows} | {:.2} |", ms(cost));
    }
    let all = pull(&contract).saturating_sub(baseline);
    println!(
        "| the five above together | {} | {:.2} |",
        4 * c.pod_count() + c.node_count(),
        ms(all)
    );

    // A whole policy: PodLifeTime's age criterion, columns against the archive.
    let args = json!({"maxPodLifeTimeSeconds": 7 * 86_400});
    let by_columns = run(&columns_guest, &args);
    let by_archive = run(&pod_life_time, &args);
    let proposed = |e: &Evaluation| {
        e.state
            .proposals()
            .iter()
            .map(|p| p.pod)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        proposed(&by_columns[0]),
        proposed(&by_archive[0]),
        "both PodLifeTimes propose the same pods, in the same order"
    );
    println!(
        "\nPodLifeTime (maxPodLifeTimeSeconds 7 days, {} proposals): columns {:.1} ms, rkyv archive (built-in) {:.1} ms",
        by_columns[0].state.proposals().len(),
        ms(median(&by_columns)),
        ms(median(&by_archive))
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The large reference scenario with the Koordinator layer, parsed and built as the server does.
fn reference_snapshot() -> Arc<ClusterSnapshot> {
    let mut doc = Vec::new();
    write_koordinator_scenario(Size::Large, &mut doc).expect("generate the reference cluster");
    #[derive(serde::Deserialize)]
    struct Scenario<'a> {
        #[serde(borrow)]
        objects: &'a serde_json::value::RawValue,
    }
    let objects = {
        let scenario: Scenario<'_> = serde_json::from_slice(&doc).expect("a scenario document");
        scenario.objects.get().as_bytes().to_vec()
    };
    drop(doc);
    let set = parse_list(objects, Format::Json).expect("the reference cluster parses");
    Arc::new(build_snapshot(&set, 1, 1_700_000_000_000).expect("the reference snapshot builds"))
}

fn session(snapshot: &Arc<ClusterSnapshot>) -> EvalSession {
    let cluster = snapshot.cluster();
    let config =
        EvictorConfig::resolve(&DefaultEvictorArgs::default(), cluster).expect("default evictor");
    let index = snapshot.index();
    EvalSession {
        snapshot: snapshot.clone(),
        config: Arc::new(config),
        nodes: Arc::new(index.ready_nodes().to_vec()),
        index,
        state: RunState::new(cluster, Limits::default()),
        plugin: "bench".into(),
        plugin_set: "default".into(),
        scope: Default::default(),
    }
}
