//! What `rebalancer eval` prints: [`EvalJson`], the documented `--output json` shape (also the
//! data the table is drawn from), and the table.
//!
//! The JSON shape is a contract for scripts (docs/writing-a-policy.md lists it): fields are only
//! ever added. Must not: compute anything a run did not report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use rebalancer_cluster::IngestWarning;
use rebalancer_engine::profile::{ProfileError, ProfileSpec};
use rebalancer_engine::run::{PolicyOutcome, Proposal, RefusedProposal};

use super::Evaluated;
use super::input::ScopeEntries;

/// `rebalancer eval --output json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalJson {
    /// The process's exit code (0 nothing proposed, 1 proposed, 2 a policy failed).
    pub exit_code: u8,
    pub snapshot: SnapshotJson,
    /// The modules the run used, in the order they were loaded.
    pub modules: Vec<ModuleJson>,
    /// The profile evaluated, normalised as the server stores it (`spec` of a profile).
    pub profile: ProfileSpec,
    /// Fields of the profile accepted without effect.
    pub profile_warnings: Vec<ProfileError>,
    /// Ready nodes matching the profile's nodeSelector.
    pub nodes_in_scope: u32,
    /// Why the cycle did nothing (fewer than two nodes in scope), when it was skipped.
    pub skipped: Option<String>,
    /// Wall time of the whole cycle, in milliseconds.
    pub duration_ms: f64,
    /// One entry per plugin evaluation, as a run report's `policies[]` (docs/api.md).
    pub policies: Vec<PolicyOutcome>,
    /// Accepted proposals, in order.
    pub proposals: Vec<Proposal>,
    /// Refused proposals, in order (the first 10,000; `refusalCount` counts all).
    pub refusals: Vec<RefusedProposal>,
    pub refusal_count: u64,
    /// The state scopes the run commits (those that succeeding policies changed), with every
    /// key and value they now hold.
    pub state: Vec<ScopeEntries>,
    /// The state file written (`--write-state`), else null.
    pub state_written: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotJson {
    /// The file (`<stdin>` for `-`).
    pub source: String,
    /// `json` or `yaml`.
    pub format: String,
    /// The snapshot's time (RFC 3339): policies' now.
    pub time: String,
    pub nodes: u64,
    pub pods: u64,
    /// Objects per kind.
    pub counts: BTreeMap<String, u64>,
    pub warnings: Vec<IngestWarning>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleJson {
    pub name: String,
    pub version: String,
    pub abi_version: String,
    /// sha256 of the module, hex.
    pub digest: String,
    pub size_bytes: u64,
    /// `builtin` or `file`.
    pub source: String,
    /// The file, for `file`.
    pub path: Option<String>,
    /// Checking and compiling it (in a child process, as an upload) and reading its `info`.
    pub load_ms: f64,
    /// Loaded from `--cache-dir` instead of compiled.
    pub cached: bool,
}

impl EvalJson {
    pub fn from_evaluated(done: &Evaluated) -> EvalJson {
        let report = &done.report;
        let snapshot = &done.snapshot;
        EvalJson {
            exit_code: done.status.code(),
            snapshot: SnapshotJson {
                source: done.snapshot_source.clone(),
                format: snapshot.format.to_string().to_ascii_lowercase(),
                time: crate::http::timestamp(snapshot.snapshot.time_ms),
                nodes: snapshot.nodes,
                pods: snapshot.pods,
                counts: snapshot.snapshot.counts.clone(),
                warnings: snapshot.warnings.clone(),
            },
            modules: done
                .modules
                .iter()
                .map(|m| ModuleJson {
                    name: m.policy.meta.name.clone(),
                    version: m.policy.meta.version.clone(),
                    abi_version: m.policy.meta.abi_version.clone(),
                    digest: m.policy.meta.digest.clone(),
                    size_bytes: m.policy.meta.size_bytes,
                    source: if m.path.is_some() { "file" } else { "builtin" }.to_string(),
                    path: m.path.clone(),
                    load_ms: m.load_ms,
                    cached: m.cached,
                })
                .collect(),
            profile: done.spec.clone(),
            profile_warnings: done.profile_warnings.clone(),
            nodes_in_scope: report.nodes_in_scope,
            skipped: report.skipped.clone(),
            duration_ms: report.duration_ms,
            policies: report.policies.clone(),
            proposals: report.proposals.clone(),
            refusals: report.refusals.clone(),
            refusal_count: report.policies.iter().map(|p| u64::from(p.refusals)).sum(),
            state: done.committed.clone(),
            state_written: done.state_written.clone(),
        }
    }
}

/// `--output json`: one pretty-printed object and a newline.
pub fn json(done: &Evaluated) -> String {
    let mut text = serde_json::to_string_pretty(&EvalJson::from_evaluated(done))
        .expect("the eval output serialises");
    text.push('\n');
    text
}

/// `--output table`.
pub fn table(done: &Evaluated) -> String {
    render_table(&EvalJson::from_evaluated(done))
}

/// Longest state value shown in the table (the JSON has them whole).
const MAX_VALUE_CHARS: usize = 120;

/// The table, from the JSON shape.
pub fn render_table(out: &EvalJson) -> String {
    let mut text = String::new();
    let s = &out.snapshot;
    text.push_str(&format!(
        "snapshot {} ({}): {} nodes, {} pods at {}; {} ready nodes in scope\n",
        s.source,
        s.format.to_ascii_uppercase(),
        s.nodes,
        s.pods,
        s.time,
        out.nodes_in_scope
    ));
    for w in &s.warnings {
        text.push_str(&format!("warning: snapshot: {}\n", one_line(&w.message)));
    }
    for w in &out.profile_warnings {
        text.push_str(&format!("warning: profile: {w}\n"));
    }
    if let Some(why) = &out.skipped {
        text.push_str(&format!("skipped: {why}\n"));
    }

    text.push('\n');
    let mut rows = vec![row(["MODULE", "SOURCE", "VERSION", "SIZE", "LOAD"])];
    for m in &out.modules {
        rows.push(vec![
            m.name.clone(),
            m.path.clone().unwrap_or_else(|| "built-in".into()),
            m.version.clone(),
            bytes(m.size_bytes),
            if m.cached {
                format!("{} (cached)", millis(m.load_ms))
            } else {
                millis(m.load_ms)
            },
        ]);
    }
    text.push_str(&columns(&rows));

    if !out.policies.is_empty() {
        text.push('\n');
        let mut rows = vec![row([
            "POLICY",
            "PLUGIN SET",
            "POINT",
            "EVAL",
            "CPU",
            "MEMORY",
            "PROPOSED",
            "REFUSED",
            "RESULT",
        ])];
        for p in &out.policies {
            rows.push(vec![
                p.plugin.clone(),
                p.plugin_set.clone(),
                p.extension_point.clone(),
                millis(p.duration_ms),
                p.cpu_ms.map_or("-".into(), millis),
                bytes(p.peak_memory_bytes),
                p.proposals.to_string(),
                p.refusals.to_string(),
                p.error
                    .as_ref()
                    .map_or("ok".into(), |e| format!("failed: {}", e.kind)),
            ]);
        }
        text.push_str(&columns(&rows));
        for p in &out.policies {
            if let Some(e) = &p.error {
                text.push_str(&format!(
                    "{} ({}, {}) failed ({}): {}\n",
                    p.plugin,
                    p.plugin_set,
                    p.extension_point,
                    e.kind,
                    one_line(&e.message)
                ));
            }
        }
    }

    text.push_str(&format!("\nPROPOSALS ({})\n", out.proposals.len()));
    if !out.proposals.is_empty() {
        let mut rows = vec![row(["POD", "NODE", "PLUGIN", "REASON"])];
        for p in &out.proposals {
            rows.push(vec![
                format!("{}/{}", p.namespace, p.name),
                p.node.clone(),
                plugin_in_set(&p.plugin, &p.plugin_set, &out.profile),
                one_line(&p.reason),
            ]);
        }
        text.push_str(&columns(&rows));
    }

    if out.refusal_count > 0 {
        let listed = out.refusals.len() as u64;
        text.push_str(&format!("\nREFUSALS ({})\n", out.refusal_count));
        let mut rows = vec![row(["POD", "NODE", "PLUGIN", "REASON", "REFUSED"])];
        for r in &out.refusals {
            rows.push(vec![
                if r.name.is_empty() {
                    "(unknown pod)".into()
                } else {
                    format!("{}/{}", r.namespace, r.name)
                },
                r.node.clone(),
                plugin_in_set(&r.plugin, &r.plugin_set, &out.profile),
                one_line(&r.reason),
                one_line(&r.refusal),
            ]);
        }
        text.push_str(&columns(&rows));
        if listed < out.refusal_count {
            text.push_str(&format!(
                "… and {} more refusals, counted but not recorded\n",
                out.refusal_count - listed
            ));
        }
    }

    if out
        .policies
        .iter()
        .any(|p| !p.logs.is_empty() || p.logs_dropped > 0)
    {
        text.push_str("\nLOGS\n");
        for p in &out.policies {
            for line in &p.logs {
                text.push_str(&format!(
                    "{} {:<5} {}\n",
                    plugin_in_set(&p.plugin, &p.plugin_set, &out.profile),
                    line.level,
                    one_line(&line.message)
                ));
            }
            if p.logs_dropped > 0 {
                text.push_str(&format!(
                    "{} … {} more lines not kept\n",
                    plugin_in_set(&p.plugin, &p.plugin_set, &out.profile),
                    p.logs_dropped
                ));
            }
        }
    }

    if !out.state.is_empty() {
        text.push_str("\nSTATE TO COMMIT\n");
        for scope in &out.state {
            text.push_str(&format!(
                "{} in plugin set {}: {} keys\n",
                scope.plugin,
                scope.plugin_set,
                scope.entries.len()
            ));
            for entry in &scope.entries {
                let value = match (&entry.text, &entry.base64) {
                    (Some(t), _) => one_line(t),
                    (None, Some(b)) => format!("base64:{b}"),
                    (None, None) => String::new(),
                };
                text.push_str(&format!(
                    "  {} = {}\n",
                    one_line(&entry.key),
                    shorten(&value, MAX_VALUE_CHARS)
                ));
            }
        }
    }
    if let Some(path) = &out.state_written {
        text.push_str(&format!("state written to {path}\n"));
    }

    let failed = out.policies.iter().filter(|p| p.error.is_some()).count();
    text.push_str(&format!(
        "\n{} proposed, {} refused, {} of {} policy evaluations failed in {}; exit code {}\n",
        out.proposals.len(),
        out.refusal_count,
        failed,
        out.policies.len(),
        millis(out.duration_ms),
        out.exit_code
    ));
    text
}

/// The plugin, with its plugin set when the profile has several.
fn plugin_in_set(plugin: &str, plugin_set: &str, profile: &ProfileSpec) -> String {
    if profile.plugin_sets.len() > 1 {
        format!("{plugin_set}/{plugin}")
    } else {
        plugin.to_string()
    }
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Rows as left-aligned columns two spaces apart; the last column is not padded.
fn columns(rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter()
            .filter_map(|r| r.get(i))
            .map(|c| c.chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..rows.iter().map(Vec::len).max().unwrap_or(0))
        .map(width)
        .collect();
    let mut text = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// Control characters (a newline in a reason) would break the table: shown as spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn shorten(text: &str, max_chars: usize) -> String {
    let count = text.chars().count();
    if count <= max_chars {
        return text.to_string();
    }
    let kept: String = text.chars().take(max_chars).collect();
    format!("{kept}… ({count} characters; --output json has them all)")
}

fn millis(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let n = n as f64;
    if n >= KIB * KIB {
        format!("{:.1} MiB", n / KIB / KIB)
    } else if n >= KIB {
        format!("{:.0} KiB", n / KIB)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An eval output with two plugin sets, a failure, a proposal, a refusal, logs and state.
    fn sample() -> EvalJson {
        serde_json::from_value(json!({
            "exitCode": 2,
            "snapshot": {
                "source": "cluster.yaml", "format": "yaml", "time": "2026-11-20T12:00:00Z",
                "nodes": 3, "pods": 5, "counts": {"Node": 3, "Pod": 5},
                "warnings": [{"code": "unknown-kind", "count": 1, "message": "1 Service kept\nraw"}]
            },
            "modules": [
                {"name": "PodLifeTime", "version": "0.36.0", "abiVersion": "1.3.0", "digest": "ab",
                 "sizeBytes": 204800, "source": "builtin", "path": null, "loadMs": 151.25, "cached": true},
                {"name": "TestMisbehaving", "version": "1", "abiVersion": "1.3.0", "digest": "cd",
                 "sizeBytes": 3_500_000, "source": "file", "path": "bad.wasm", "loadMs": 1520.0, "cached": false}
            ],
            "profile": {
                "nodeSelector": null, "maxPerNode": null, "maxPerNamespace": null, "maxTotal": null,
                "pluginSets": [
                    {"name": "a", "evictorArgs": {}, "deschedule": [{"name": "PodLifeTime", "args": {}}], "balance": []},
                    {"name": "b", "evictorArgs": {}, "deschedule": [{"name": "TestMisbehaving", "args": {}}], "balance": []}
                ]
            },
            "profileWarnings": [{"field": "gracePeriodSeconds", "message": "has no effect"}],
            "nodesInScope": 3,
            "skipped": null,
            "durationMs": 12.5,
            "policies": [
                {"plugin": "PodLifeTime", "pluginSet": "a", "extensionPoint": "deschedule",
                 "durationMs": 2.25, "cpuMs": 2.0, "proposals": 1, "refusals": 1, "error": null,
                 "logs": [{"level": "info", "message": "checked 5 pods"}], "logsDropped": 0,
                 "peakMemoryBytes": 2_097_152, "snapshotSections": [], "snapshotBytes": 0},
                {"plugin": "TestMisbehaving", "pluginSet": "b", "extensionPoint": "deschedule",
                 "durationMs": 10.0, "proposals": 0, "refusals": 0,
                 "error": {"kind": "trap", "message": "wasm trap:\nunreachable"},
                 "logs": [], "logsDropped": 3, "peakMemoryBytes": 0,
                 "snapshotSections": [], "snapshotBytes": 0}
            ],
            "proposals": [
                {"podUid": "u1", "namespace": "shop", "name": "web-1", "node": "node-a",
                 "plugin": "PodLifeTime", "pluginSet": "a", "reason": "pod is 3d old"}
            ],
            "refusals": [
                {"podUid": "u2", "namespace": "shop", "name": "db-0", "node": "node-b",
                 "plugin": "PodLifeTime", "pluginSet": "a", "reason": "pod is 4d old",
                 "refusal": "disruption budget: shop/db allows 0"}
            ],
            "refusalCount": 1,
            "state": [
                {"pluginSet": "a", "plugin": "PodLifeTime",
                 "entries": [{"key": "runs", "text": "2"}, {"key": "raw", "base64": "/wAB"},
                             {"key": "long", "text": "x".repeat(200)}]}
            ],
            "stateWritten": "st/state.json"
        }))
        .expect("the documented shape reads")
    }

    #[test]
    fn the_table_shows_every_section_aligned() {
        let text = render_table(&sample());
        let expected_start = "\
snapshot cluster.yaml (YAML): 3 nodes, 5 pods at 2026-11-20T12:00:00Z; 3 ready nodes in scope
warning: snapshot: 1 Service kept raw
warning: profile: gracePeriodSeconds: has no effect

MODULE           SOURCE    VERSION  SIZE     LOAD
PodLifeTime      built-in  0.36.0   200 KiB  151.2 ms (cached)
TestMisbehaving  bad.wasm  1        3.3 MiB  1.52 s

POLICY           PLUGIN SET  POINT       EVAL     CPU     MEMORY   PROPOSED  REFUSED  RESULT
PodLifeTime      a           deschedule  2.2 ms   2.0 ms  2.0 MiB  1         1        ok
TestMisbehaving  b           deschedule  10.0 ms  -       0 B      0         0        failed: trap
TestMisbehaving (b, deschedule) failed (trap): wasm trap: unreachable

PROPOSALS (1)
POD         NODE    PLUGIN         REASON
shop/web-1  node-a  a/PodLifeTime  pod is 3d old

REFUSALS (1)
POD        NODE    PLUGIN         REASON         REFUSED
shop/db-0  node-b  a/PodLifeTime  pod is 4d old  disruption budget: shop/db allows 0

LOGS
a/PodLifeTime info  checked 5 pods
b/TestMisbehaving … 3 more lines not kept

STATE TO COMMIT
PodLifeTime in plugin set a: 3 keys
  runs = 2
  raw = base64:/wAB
";
        assert!(
            text.starts_with(expected_start),
            "got:\n{text}\nexpected to start with:\n{expected_start}"
        );
        let long = format!(
            "  long = {}… (200 characters; --output json has them all)\n",
            "x".repeat(MAX_VALUE_CHARS)
        );
        assert!(text.contains(&long), "{text}");
        assert!(
            text.ends_with(
                "state written to st/state.json\n\n\
             1 proposed, 1 refused, 1 of 2 policy evaluations failed in 12.5 ms; exit code 2\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_empty_run_says_so_without_empty_sections() {
        let mut out = sample();
        out.policies.truncate(1);
        out.policies[0].logs.clear();
        out.policies[0].refusals = 0;
        out.proposals.clear();
        out.refusals.clear();
        out.refusal_count = 0;
        out.state.clear();
        out.state_written = None;
        out.exit_code = 0;
        out.skipped = Some("1 ready node(s) in scope".into());
        let text = render_table(&out);
        assert!(
            text.contains("skipped: 1 ready node(s) in scope\n"),
            "{text}"
        );
        assert!(
            text.contains("\nPROPOSALS (0)\n\n0 proposed, 0 refused"),
            "{text}"
        );
        for absent in ["REFUSALS", "LOGS", "STATE TO COMMIT", "state written"] {
            assert!(!text.contains(absent), "{absent}: {text}");
        }
    }

    #[test]
    fn the_json_shape_round_trips_with_its_documented_fields() {
        let value = serde_json::to_value(sample()).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = vec![
            "exitCode",
            "snapshot",
            "modules",
            "profile",
            "profileWarnings",
            "nodesInScope",
            "skipped",
            "durationMs",
            "policies",
            "proposals",
            "refusals",
            "refusalCount",
            "state",
            "stateWritten",
        ];
        expected.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(
            value["state"][0]["entries"][1],
            json!({"key": "raw", "base64": "/wAB"})
        );
        assert_eq!(
            value["refusals"][0]["refusal"],
            "disruption budget: shop/db allows 0"
        );
    }

    #[test]
    fn numbers_and_text_are_formatted_for_reading() {
        assert_eq!(millis(0.04), "0.0 ms");
        assert_eq!(millis(999.94), "999.9 ms");
        assert_eq!(millis(2500.0), "2.50 s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "2 KiB");
        assert_eq!(bytes(5 << 20), "5.0 MiB");
        assert_eq!(one_line("a\nb\tc"), "a b c");
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(
            columns(&[row(["A", "BB", "C"]), row(["aaa", "b", ""])]),
            "A    BB  C\naaa  b\n"
        );
    }
}
