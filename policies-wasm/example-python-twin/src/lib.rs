//! # PodAgeOnHotNodesRust
//!
//! The Rust twin of the Python example policy (`policies-wasm/example-python/app.py`,
//! `PodAgeOnHotNodes`): the same logic, written with the Rust SDK's usual rkyv read path, so
//! that the two can be measured side by side (`docs/writing-a-policy-python.md`) and checked to
//! decide identically — the same proposals with the same reasons, the same logs and the same
//! state (`server/tests/api/python_policy.rs`). It has its own plugin name so both can be
//! registered on one server.
//!
//! Propose evicting pods older than `minAgeDays` from nodes whose measured cpu usage has been
//! above `cpuThresholdPercent` % of their allocatable cpu for `hotRuns` consecutive runs, the
//! hottest node first and each node's oldest pods first, at most `maxEvictionsPerRun` per run.
//! State: `hot-runs/<node name>` → consecutive hot runs as ASCII digits.
//!
//! One difference, in validating args only: serde stops at the first problem and refuses `7.0`
//! for an integer, where the Python version lists every problem and accepts `7.0` as JSON
//! Schema does.
//!
//! Not a built-in: built (not embedded) by the server's build script for the tests, or with
//! `cargo build -p example-python-twin --target wasm32-wasip2 --profile policy`.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use rebalancer_policy_sdk::model::StrId;
use rebalancer_policy_sdk::{
    ArgError, Context, Details, ExtensionPoint, Next, NodeRef, Policy, PolicyInfo,
};
use serde::{Deserialize, Serialize};

const DAY_MS: i64 = 86_400_000;
/// State key prefix: `hot-runs/<node name>`.
pub const STATE_PREFIX: &str = "hot-runs/";

/// The plugin's args (all integers; the bounds are in [`BOUNDS`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HotNodeArgs {
    pub min_age_days: u32,
    pub cpu_threshold_percent: u32,
    pub hot_runs: u32,
    pub max_evictions_per_run: u32,
}

impl Default for HotNodeArgs {
    fn default() -> Self {
        HotNodeArgs {
            min_age_days: 7,
            cpu_threshold_percent: 80,
            hot_runs: 3,
            max_evictions_per_run: 10,
        }
    }
}

/// (field, minimum, maximum, description), as the Python version's `ARGS`.
const BOUNDS: [(&str, u32, u32, &str); 4] = [
    (
        "minAgeDays",
        1,
        3650,
        "Only pods created more than this many days ago are proposed.",
    ),
    (
        "cpuThresholdPercent",
        1,
        100,
        "A node is hot when its measured cpu usage is above this percentage of its allocatable cpu.",
    ),
    (
        "hotRuns",
        1,
        1000,
        "A node's pods are proposed once it has been hot for this many consecutive runs.",
    ),
    (
        "maxEvictionsPerRun",
        1,
        100_000,
        "At most this many pods are proposed per run.",
    ),
];

impl HotNodeArgs {
    fn values(&self) -> [u32; 4] {
        [
            self.min_age_days,
            self.cpu_threshold_percent,
            self.hot_runs,
            self.max_evictions_per_run,
        ]
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct PodAgeOnHotNodesRust;

impl Policy for PodAgeOnHotNodesRust {
    type Args = HotNodeArgs;

    fn info() -> PolicyInfo {
        let defaults = HotNodeArgs::default().values();
        let properties: serde_json::Map<String, serde_json::Value> = BOUNDS
            .iter()
            .zip(defaults)
            .map(|(&(name, minimum, maximum, description), default)| {
                (
                    name.to_string(),
                    serde_json::json!({
                        "type": "integer",
                        "minimum": minimum,
                        "maximum": maximum,
                        "default": default,
                        "description": description,
                    }),
                )
            })
            .collect();
        PolicyInfo {
            name: "PodAgeOnHotNodesRust".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "The Rust twin of the Python example PodAgeOnHotNodes: evicts pods older \
                          than minAgeDays from nodes whose measured cpu usage has been above \
                          cpuThresholdPercent of allocatable for hotRuns consecutive runs, hottest \
                          node and oldest pods first, at most maxEvictionsPerRun per run."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: serde_json::json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": false,
                "properties": properties,
            }),
            default_args: serde_json::to_value(HotNodeArgs::default())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &HotNodeArgs) -> Vec<ArgError> {
        BOUNDS
            .iter()
            .zip(args.values())
            .filter(|&(&(_, minimum, maximum, _), value)| !(minimum..=maximum).contains(&value))
            .map(|(&(name, minimum, maximum, _), value)| {
                ArgError::new(
                    name,
                    format!("must be between {minimum} and {maximum}, got {value}"),
                )
            })
            .collect()
    }

    fn deschedule(ctx: &mut Context<'_>, args: &HotNodeArgs) -> Result<(), String> {
        let cluster = ctx.cluster;
        let now_ms = ctx.now_ms();
        let threshold = i128::from(args.cpu_threshold_percent);
        let min_age_ms = i64::from(args.min_age_days) * DAY_MS;

        let in_scope = ctx.nodes();
        let cpu = cluster.lookup("cpu");
        let mut unmeasured = 0;
        // (node id, usage in permille of allocatable)
        let mut hot: Vec<(u32, i64)> = Vec::new();
        for &node in &in_scope {
            let measured = cpu.and_then(|cpu| cpu_usage(cluster.node(node), cpu));
            let allocatable = cpu.map_or(0, |cpu| cluster.node(node).allocatable(cpu));
            match measured {
                Some(used) if allocatable > 0 => {
                    let (used, allocatable) = (i128::from(used), i128::from(allocatable));
                    if used * 100 > threshold * allocatable {
                        let permille = (used * 1000).div_euclid(allocatable);
                        hot.push((node, i64::try_from(permille).unwrap_or(i64::MAX)));
                    }
                }
                _ => unmeasured += 1,
            }
        }
        if unmeasured > 0 {
            ctx.debug(&format!(
                "{unmeasured} of {} nodes have no cpu usage or allocatable cpu: never hot",
                in_scope.len()
            ));
        }

        let names: Vec<&str> = hot
            .iter()
            .map(|&(node, _)| cluster.node(node).name())
            .collect();
        let counts = update_hot_runs(ctx, &names)?;
        let runs_of = |node: u32| counts[cluster.node(node).name()];

        hot.sort_by_key(|&(node, permille)| (Reverse(permille), node));
        let mut details = Details::default();
        // (node id, permille, consecutive hot runs)
        let mut acting: Vec<(u32, i64, u64)> = Vec::new();
        for &(node, permille) in &hot {
            let runs = runs_of(node);
            if runs >= u64::from(args.hot_runs) {
                acting.push((node, permille, runs));
            } else {
                details.log(ctx, || {
                    format!(
                        "node {} at {} cpu, hot for {runs} of {} runs: waiting",
                        cluster.node(node).name(),
                        percent(permille),
                        args.hot_runs
                    )
                });
            }
        }
        ctx.info(&format!(
            "{} of {} nodes above {}% cpu; {} of them for at least {} consecutive runs",
            hot.len(),
            in_scope.len(),
            args.cpu_threshold_percent,
            acting.len(),
            args.hot_runs
        ));
        if acting.is_empty() {
            details.finish(ctx);
            return Ok(());
        }

        // Old pods of the acting nodes, each node's oldest first (the pod id breaks ties).
        let mut slot = vec![usize::MAX; cluster.node_count()];
        for (k, &(node, _, _)) in acting.iter().enumerate() {
            slot[node as usize] = k;
        }
        let mut old: Vec<Vec<u32>> = vec![Vec::new(); acting.len()];
        for pod in cluster.pods() {
            let Some(node) = pod.node() else { continue };
            let k = slot[node as usize];
            if k != usize::MAX && now_ms.saturating_sub(pod.creation_ms()) > min_age_ms {
                old[k].push(pod.id);
            }
        }
        let mut ordered = Vec::new();
        for pods in &mut old {
            pods.sort_by_key(|&id| (cluster.pod(id).creation_ms(), id));
            ordered.extend_from_slice(pods);
        }

        // The evictor's Filter, then PreEvictionFilter; both keep the order.
        let evictable = ctx.filter_for_eviction(&ordered);
        let mut by_node: Vec<Vec<u32>> = vec![Vec::new(); acting.len()];
        for id in evictable {
            let node = cluster.pod(id).node().expect("candidates are scheduled");
            by_node[slot[node as usize]].push(id);
        }

        let mut budget = args.max_evictions_per_run as usize;
        let mut proposed = 0;
        'nodes: for (k, &(node, permille, runs)) in acting.iter().enumerate() {
            if budget == 0 {
                break;
            }
            let pods = &by_node[k];
            let name = cluster.node(node).name();
            ctx.info(&format!(
                "node {name} at {} cpu for {runs} runs: {} of {} pods older than {} days evictable",
                percent(permille),
                pods.len(),
                old[k].len(),
                args.min_age_days
            ));
            let reason = format!(
                "node {name} uses {} of its allocatable cpu, above {}% for {runs} consecutive \
                 runs; the pod is older than {} days",
                percent(permille),
                args.cpu_threshold_percent,
                args.min_age_days
            );
            let mut start = 0;
            while start < pods.len() && budget > 0 {
                let batch = &pods[start..(start + budget).min(pods.len())];
                let outcome = ctx.propose_evictions(batch, &reason);
                proposed += outcome.admitted;
                budget -= outcome.admitted;
                let Some(refusal) = outcome.refusal else {
                    start += batch.len();
                    continue;
                };
                let refused = batch[outcome.admitted];
                match details.refused(ctx, refused, &refusal) {
                    Next::Stop => break 'nodes,
                    Next::Node => continue 'nodes,
                    Next::Pod => start += outcome.admitted + 1,
                }
            }
        }
        details.finish(ctx);
        ctx.info(&format!(
            "proposed {proposed} pods from {} nodes (maxEvictionsPerRun {})",
            acting.len(),
            args.max_evictions_per_run
        ));
        Ok(())
    }
}

/// The node's measured cpu usage in millicores; `None` without a measurement of cpu (exactly
/// what the `usage:cpu` column of ABI 1.4 reports as absent: a node with no usage source has
/// no quantities either).
fn cpu_usage(node: NodeRef<'_>, cpu: StrId) -> Option<i64> {
    node.usage()
        .node
        .iter()
        .find(|q| q.resource.to_native() == cpu)
        .map(|q| q.milli.to_native())
}

/// Count this run in the state: +1 for each hot node, drop every other node's key. Returns
/// node name → consecutive hot runs for the hot nodes, this run included.
fn update_hot_runs<'a>(
    ctx: &mut Context<'_>,
    hot: &[&'a str],
) -> Result<BTreeMap<&'a str, u64>, String> {
    let mut previous: BTreeMap<String, u64> = BTreeMap::new();
    for key in ctx.state_keys() {
        let Some(name) = key.strip_prefix(STATE_PREFIX) else {
            continue;
        };
        let value = ctx.state_get(&key).unwrap_or_default();
        let count = std::str::from_utf8(&value)
            .ok()
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        previous.insert(name.to_string(), count);
    }
    let counts: BTreeMap<&str, u64> = hot
        .iter()
        .map(|&name| (name, previous.get(name).copied().unwrap_or(0) + 1))
        .collect();
    for name in previous.keys() {
        if !counts.contains_key(name.as_str()) {
            ctx.state_remove(&format!("{STATE_PREFIX}{name}"));
        }
    }
    for &name in hot {
        ctx.state_put(
            &format!("{STATE_PREFIX}{name}"),
            counts[name].to_string().as_bytes(),
        )?;
    }
    Ok(counts)
}

/// `934` → `93.4%`.
pub fn percent(permille: i64) -> String {
    format!("{}.{}%", permille.div_euclid(10), permille.rem_euclid(10))
}

rebalancer_policy_sdk::export_policy!(PodAgeOnHotNodesRust);
