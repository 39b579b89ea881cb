//! Prometheus metrics: the counters and histograms the server keeps in memory, and their text
//! exposition (format 0.0.4) for `GET /metrics`.
//!
//! Owns: metric names, label sets, buckets, and rendering. Names follow descheduler
//! (`descheduler_pods_evicted_total` → `rebalancer_pods_evicted_total`) and Kubewarden
//! (`kubewarden_policy_evaluations_total` → `rebalancer_policy_evaluations_total`).
//! Must not: read the database — gauges that are really database state (decisions by status,
//! the file's size) are read by the `/metrics` handler at scrape time and passed to
//! [`Metrics::render`] as [`DatabaseGauges`].
//!
//! Hand-written rather than a client library: a handful of label sets, no network, and the
//! exposition format is small and stable.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Upper bounds (seconds) of the policy evaluation histogram: from a sub-millisecond policy on
/// a small cluster to one near the default deadline on a 150,000-pod cluster.
pub const EVALUATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The server's metrics. Held once (`Arc<Metrics>`), shared by the stages that count; every
/// method takes `&self`.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    runs: Counter,
    proposals: Counter,
    policy_evaluations: Counter,
    policy_duration: BTreeMap<Vec<String>, Histogram>,
    pods_evicted: Counter,
    pod_migrations: Counter,
    pruned: Counter,
}

/// Gauges that are database state, read by the caller at scrape time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatabaseGauges {
    /// Decisions per status (statuses with none left out).
    pub decisions: Vec<(String, i64)>,
    /// The database file's size (its pages, used or free).
    pub file_bytes: u64,
    /// Free pages in it: room later writes reuse.
    pub free_bytes: u64,
    /// The write-ahead log's size (`<database>-wal`).
    pub wal_bytes: u64,
}

/// Counts per label values (in the metric's label order).
type Counter = BTreeMap<Vec<String>, u64>;

#[derive(Debug, Clone)]
struct Histogram {
    /// Per bucket of [`EVALUATION_BUCKETS`], not cumulative.
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            buckets: vec![0; EVALUATION_BUCKETS.len()],
            count: 0,
            sum: 0.0,
        }
    }

    fn observe(&mut self, value: f64) {
        if let Some(i) = EVALUATION_BUCKETS.iter().position(|&b| value <= b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += value;
    }
}

fn labels(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_string()).collect()
}

/// One policy evaluation of a run, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyEvaluation<'a> {
    pub policy: &'a str,
    pub plugin_set: &'a str,
    pub profile: &'a str,
    /// `ok`, or the failure kind (`timeout`, `trap`, `memory`, …).
    pub outcome: &'a str,
    pub seconds: f64,
    /// Proposals the policy made that the evictor accepted.
    pub proposals: u64,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A run ended. `status`: `succeeded` | `failed`; `trigger`: `manual` | `schedule` | `change`.
    pub fn run_finished(&self, profile: &str, status: &str, trigger: &str) {
        self.with(|m| {
            *m.runs
                .entry(labels(&[profile, status, trigger]))
                .or_default() += 1
        });
    }

    /// One policy was evaluated within a run.
    pub fn policy_evaluated(&self, e: PolicyEvaluation<'_>) {
        self.with(|m| {
            m.policy_duration
                .entry(labels(&[e.policy, e.plugin_set, e.profile, e.outcome]))
                .or_insert_with(Histogram::new)
                .observe(e.seconds);
            *m.policy_evaluations
                .entry(labels(&[e.policy, e.outcome]))
                .or_default() += 1;
            if e.proposals > 0 {
                *m.proposals
                    .entry(labels(&[e.policy, e.profile]))
                    .or_default() += e.proposals;
            }
        });
    }

    /// A pod eviction was attempted by the executor. `result`: `success` | `error` |
    /// `blocked` (e.g. by a PodDisruptionBudget); `strategy`: the plugin that proposed it;
    /// `node`: the node the pod was evicted from. Modelled on descheduler's
    /// `descheduler_pods_evicted_total{result,strategy,profile,namespace,node}`.
    pub fn pod_evicted(
        &self,
        result: &str,
        strategy: &str,
        profile: &str,
        namespace: &str,
        node: &str,
    ) {
        self.with(|m| {
            *m.pods_evicted
                .entry(labels(&[result, strategy, profile, namespace, node]))
                .or_default() += 1;
        });
    }

    /// A pod migration reached a final phase (`Succeeded` | `Failed` | `Aborted`) for `reason`
    /// (e.g. `Complete`, `Unschedulable`, `Stale`; empty when there is none).
    pub fn pod_migration_finished(&self, phase: &str, reason: &str) {
        self.with(|m| {
            *m.pod_migrations
                .entry(labels(&[phase, reason]))
                .or_default() += 1
        });
    }

    /// Retention deleted `rows` of `table` (counted even when 0, so every table has a series).
    pub fn rows_pruned(&self, table: &str, rows: u64) {
        self.with(|m| *m.pruned.entry(labels(&[table])).or_default() += rows);
    }

    /// The exposition text, with the database gauges read by the caller at scrape time.
    pub fn render(&self, database: &DatabaseGauges) -> String {
        let mut out = String::new();
        self.with(|m| {
            counter(
                &mut out,
                "rebalancer_runs_total",
                "Runs that finished, by profile, status and trigger.",
                &["profile", "status", "trigger"],
                &m.runs,
            );
            histogram(
                &mut out,
                "rebalancer_policy_evaluation_duration_seconds",
                "Wall time of one policy evaluation within a run.",
                &["policy", "plugin_set", "profile", "outcome"],
                &m.policy_duration,
            );
            counter(
                &mut out,
                "rebalancer_policy_evaluations_total",
                "Policy evaluations, by policy and outcome (ok or the failure kind).",
                &["policy", "outcome"],
                &m.policy_evaluations,
            );
            counter(
                &mut out,
                "rebalancer_proposals_total",
                "Eviction proposals accepted by the evictor and recorded as decisions.",
                &["plugin", "profile"],
                &m.proposals,
            );
            counter(
                &mut out,
                "rebalancer_pods_evicted_total",
                "Pod evictions attempted by pod migrations, by result, strategy (plugin), \
                 profile, namespace and node.",
                &["result", "strategy", "profile", "namespace", "node"],
                &m.pods_evicted,
            );
            counter(
                &mut out,
                "rebalancer_pod_migrations_total",
                "Pod migrations that reached a final phase, by phase and reason.",
                &["phase", "reason"],
                &m.pod_migrations,
            );
            counter(
                &mut out,
                "rebalancer_pruned_rows_total",
                "Rows retention deleted, by table.",
                &["table"],
                &m.pruned,
            );
        });
        let gauge: Counter = database
            .decisions
            .iter()
            .map(|(status, n)| (vec![status.clone()], (*n).max(0) as u64))
            .collect();
        header(
            &mut out,
            "rebalancer_decisions",
            "Decisions currently in each status.",
            "gauge",
        );
        series(&mut out, "rebalancer_decisions", &["status"], &gauge);
        for (name, help, value) in [
            (
                "rebalancer_database_size_bytes",
                "Size of the database file (its pages, used or free).",
                database.file_bytes,
            ),
            (
                "rebalancer_database_free_bytes",
                "Free pages in the database file, reused by later writes.",
                database.free_bytes,
            ),
            (
                "rebalancer_database_wal_bytes",
                "Size of the database's write-ahead log file.",
                database.wal_bytes,
            ),
        ] {
            header(&mut out, name, help, "gauge");
            let _ = writeln!(out, "{name} {value}");
        }
        out
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn counter(out: &mut String, name: &str, help: &str, names: &[&str], values: &Counter) {
    header(out, name, help, "counter");
    series(out, name, names, values);
}

fn series(out: &mut String, name: &str, names: &[&str], values: &Counter) {
    for (label_values, value) in values {
        let _ = writeln!(out, "{name}{{{}}} {value}", label_set(names, label_values));
    }
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    names: &[&str],
    values: &BTreeMap<Vec<String>, Histogram>,
) {
    header(out, name, help, "histogram");
    for (label_values, h) in values {
        let set = label_set(names, label_values);
        let sep = if set.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, n) in EVALUATION_BUCKETS.iter().zip(&h.buckets) {
            cumulative += n;
            let _ = writeln!(
                out,
                "{name}_bucket{{{set}{sep}le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{set}{sep}le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum{{{set}}} {}", h.sum);
        let _ = writeln!(out, "{name}_count{{{set}}} {}", h.count);
    }
}

fn label_set(names: &[&str], values: &[String]) -> String {
    let mut set = String::new();
    for (i, (name, value)) in names.iter().zip(values).enumerate() {
        if i > 0 {
            set.push(',');
        }
        let _ = write!(set, "{name}=\"{}\"", escape(value));
    }
    set
}

/// Label values escape backslash, double quote and newline.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histograms_and_gauges() {
        let m = Metrics::new();
        m.run_finished("default", "succeeded", "manual");
        m.run_finished("default", "succeeded", "manual");
        m.policy_evaluated(PolicyEvaluation {
            policy: "RemoveDuplicates",
            plugin_set: "set-1",
            profile: "default",
            outcome: "ok",
            seconds: 0.003,
            proposals: 4,
        });
        m.pod_evicted("success", "RemoveDuplicates", "default", "shop", "n1");
        m.pod_migration_finished("Succeeded", "Complete");
        m.rows_pruned("decisions", 2000);
        m.rows_pruned("decisions", 5);
        m.rows_pruned("audit_log", 0);
        let text = m.render(&DatabaseGauges {
            decisions: vec![("proposed".into(), 7)],
            file_bytes: 1 << 20,
            free_bytes: 16384,
            wal_bytes: 0,
        });
        assert!(text.contains(
            "rebalancer_runs_total{profile=\"default\",status=\"succeeded\",trigger=\"manual\"} 2"
        ));
        assert!(text.contains(
            "rebalancer_policy_evaluation_duration_seconds_bucket{policy=\"RemoveDuplicates\",\
             plugin_set=\"set-1\",profile=\"default\",outcome=\"ok\",le=\"0.0025\"} 0"
        ));
        assert!(text.contains(
            "rebalancer_policy_evaluation_duration_seconds_bucket{policy=\"RemoveDuplicates\",\
             plugin_set=\"set-1\",profile=\"default\",outcome=\"ok\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "rebalancer_policy_evaluation_duration_seconds_count{policy=\"RemoveDuplicates\",\
             plugin_set=\"set-1\",profile=\"default\",outcome=\"ok\"} 1"
        ));
        assert!(text.contains(
            "rebalancer_policy_evaluations_total{policy=\"RemoveDuplicates\",outcome=\"ok\"} 1"
        ));
        assert!(text.contains(
            "rebalancer_proposals_total{plugin=\"RemoveDuplicates\",profile=\"default\"} 4"
        ));
        assert!(text.contains(
            "rebalancer_pods_evicted_total{result=\"success\",strategy=\"RemoveDuplicates\",\
             profile=\"default\",namespace=\"shop\",node=\"n1\"} 1"
        ));
        assert!(text.contains(
            "rebalancer_pod_migrations_total{phase=\"Succeeded\",reason=\"Complete\"} 1"
        ));
        assert!(text.contains("# TYPE rebalancer_decisions gauge"));
        assert!(text.contains("rebalancer_decisions{status=\"proposed\"} 7"));
        assert!(text.contains("rebalancer_pruned_rows_total{table=\"decisions\"} 2005"));
        assert!(text.contains("rebalancer_pruned_rows_total{table=\"audit_log\"} 0"));
        assert!(text.contains("# TYPE rebalancer_database_size_bytes gauge"));
        assert!(text.contains("\nrebalancer_database_size_bytes 1048576\n"));
        assert!(text.contains("\nrebalancer_database_free_bytes 16384\n"));
        assert!(text.contains("\nrebalancer_database_wal_bytes 0\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        m.pod_migration_finished("Failed", "a \"quoted\"\\reason\nnext");
        let text = m.render(&DatabaseGauges::default());
        assert!(
            text.contains(r#"reason="a \"quoted\"\\reason\nnext"} 1"#),
            "{text}"
        );
    }
}
