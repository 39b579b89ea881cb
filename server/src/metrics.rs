//! Prometheus metrics: the counters and histograms the server keeps in memory, and their text
//! exposition (format 0.0.4) for `GET /metrics`.
//!
//! Owns: metric names, label sets, buckets, and rendering. Two sets of names:
//! - Rebalancer's own (`rebalancer_*`), some modelled on Kubewarden
//!   (`kubewarden_policy_evaluations_total` → `rebalancer_policy_evaluations_total`);
//! - descheduler v0.36's (`descheduler_*`: its `metrics/metrics.go`), with its types, labels,
//!   buckets and label values, so that dashboards and alerts written for descheduler work
//!   unchanged. One descheduling cycle is one run; a `strategy` is a plugin; a `profile` is a
//!   DeschedulerPolicy's `profiles[].name` (a plugin set), as in descheduler. The names
//!   descheduler 0.34 deprecated are rendered too, from the same data, as v0.36 still does.
//!
//! The process's own metrics (CPU, memory, file descriptors) are [`process`]'s.
//! Must not: read the database — gauges that are really database state (decisions by status,
//! the file's size) are read by the `/metrics` handler at scrape time and passed to
//! [`Metrics::render`] as [`DatabaseGauges`].
//!
//! Hand-written rather than a client library: a handful of label sets, no network, and the
//! exposition format is small and stable.

pub mod process;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Upper bounds (seconds) of the policy evaluation histogram: from a sub-millisecond policy on
/// a small cluster to one near the default deadline on a 150,000-pod cluster.
pub const EVALUATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// descheduler's buckets of `descheduler_loop_duration_seconds` (seconds).
pub const LOOP_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
];

/// descheduler's buckets of `descheduler_strategy_duration_seconds` (seconds).
pub const STRATEGY_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0,
];

/// The labels of `descheduler_build_info`: descheduler's, except `GoVersion`, which this
/// program has none of; `RustVersion` stands beside them instead. Values come from the build
/// (`build.rs`); a value the build could not know (no git) is empty.
pub const BUILD_INFO_LABELS: &[&str] = &[
    "AppVersion",
    "DeschedulerVersion",
    "GitBranch",
    "GitSha1",
    "RustVersion",
];

/// The values of [`BUILD_INFO_LABELS`] for this binary.
pub fn build_info() -> [&'static str; 5] {
    [
        env!("CARGO_PKG_VERSION"),
        concat!("v", env!("CARGO_PKG_VERSION")),
        env!("REBALANCER_GIT_BRANCH"),
        env!("REBALANCER_GIT_SHA"),
        env!("REBALANCER_RUSTC_VERSION"),
    ]
}

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
    policy_duration: Histograms,
    pods_evicted: Counter,
    pod_migrations: Counter,
    // descheduler's series.
    descheduler_pods_evicted: Counter,
    loop_duration: Histograms,
    strategy_duration: Histograms,
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
/// Histograms per label values (in the metric's label order).
type Histograms = BTreeMap<Vec<String>, Histogram>;

#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64],
    /// Per bucket of `bounds`, not cumulative.
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            buckets: vec![0; bounds.len()],
            count: 0,
            sum: 0.0,
        }
    }

    fn observe(&mut self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|&b| value <= b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += value;
    }
}

fn observe(histograms: &mut Histograms, bounds: &'static [f64], labels: Vec<String>, value: f64) {
    histograms
        .entry(labels)
        .or_insert_with(|| Histogram::new(bounds))
        .observe(value);
}

fn labels(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_string()).collect()
}

/// One policy evaluation of a run, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyEvaluation<'a> {
    pub policy: &'a str,
    /// The DeschedulerPolicy profile (`profiles[].name`) the plugin ran in.
    pub plugin_set: &'a str,
    /// The stored profile (the whole DeschedulerPolicy document) the run evaluated.
    pub profile: &'a str,
    /// `ok`, or the failure kind (`timeout`, `trap`, `memory`, …).
    pub outcome: &'a str,
    pub seconds: f64,
    /// Proposals the policy made that the evictor accepted.
    pub proposals: u64,
}

/// How an eviction the executor attempted ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionOutcome {
    /// The pod was evicted.
    Success,
    /// The eviction was refused (not by a disruption budget); the pod migration failed.
    Error,
    /// A PodDisruptionBudget refused it for now; the pod migration retries.
    Blocked,
}

impl EvictionOutcome {
    /// The `result` label of `rebalancer_pods_evicted_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionOutcome::Success => "success",
            EvictionOutcome::Error => "error",
            EvictionOutcome::Blocked => "blocked",
        }
    }

    /// The `result` label of `descheduler_pods_evicted_total`: descheduler has no `blocked`
    /// (an eviction a PodDisruptionBudget refuses is an API error to it, counted `error`).
    pub fn descheduler_result(self) -> &'static str {
        match self {
            EvictionOutcome::Success => "success",
            EvictionOutcome::Error | EvictionOutcome::Blocked => "error",
        }
    }
}

/// One eviction the executor attempted, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct Eviction<'a> {
    pub outcome: EvictionOutcome,
    /// The plugin that proposed it.
    pub strategy: &'a str,
    /// The stored profile of the run that proposed it.
    pub profile: &'a str,
    /// The DeschedulerPolicy profile (`profiles[].name`) the plugin ran in.
    pub plugin_set: &'a str,
    pub namespace: &'a str,
    /// The node the pod was evicted from.
    pub node: &'a str,
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

    /// A run's descheduling cycle (every plugin of the profile over the snapshot) took
    /// `seconds`, whatever its outcome: descheduler's `descheduler_loop_duration_seconds`.
    pub fn cycle_finished(&self, seconds: f64) {
        self.with(|m| observe(&mut m.loop_duration, LOOP_BUCKETS, Vec::new(), seconds));
    }

    /// One policy was evaluated within a run.
    pub fn policy_evaluated(&self, e: PolicyEvaluation<'_>) {
        self.with(|m| {
            observe(
                &mut m.policy_duration,
                EVALUATION_BUCKETS,
                labels(&[e.policy, e.plugin_set, e.profile, e.outcome]),
                e.seconds,
            );
            observe(
                &mut m.strategy_duration,
                STRATEGY_BUCKETS,
                labels(&[e.policy, e.plugin_set]),
                e.seconds,
            );
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

    /// A pod eviction was attempted by the executor: counted in `rebalancer_pods_evicted_total`
    /// (by stored profile) and in descheduler's `descheduler_pods_evicted_total` (by
    /// DeschedulerPolicy profile, with descheduler's result values).
    pub fn pod_evicted(&self, e: Eviction<'_>) {
        self.with(|m| {
            *m.pods_evicted
                .entry(labels(&[
                    e.outcome.as_str(),
                    e.strategy,
                    e.profile,
                    e.namespace,
                    e.node,
                ]))
                .or_default() += 1;
            *m.descheduler_pods_evicted
                .entry(labels(&[
                    e.outcome.descheduler_result(),
                    e.strategy,
                    e.plugin_set,
                    e.namespace,
                    e.node,
                ]))
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
                "Pod evictions attempted by pod migrations, by result (success, error, blocked), \
                 strategy (plugin), profile (stored profile), namespace and node.",
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
            render_descheduler(&mut out, m);
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

/// descheduler v0.36's series, each current name followed by the name 0.34 deprecated.
fn render_descheduler(out: &mut String, m: &Inner) {
    let deprecated = |current: &str| {
        format!(" (Deprecated since descheduler 0.34.0: the same series as {current}.)")
    };
    let evicted = "Pods evicted by pod migrations, by result (success or error), strategy \
                   (plugin), profile (DeschedulerPolicy profile), namespace and node.";
    let evicted_labels = &["result", "strategy", "profile", "namespace", "node"];
    let current = "descheduler_pods_evicted_total";
    counter(
        out,
        current,
        evicted,
        evicted_labels,
        &m.descheduler_pods_evicted,
    );
    counter(
        out,
        "descheduler_pods_evicted",
        &format!("{evicted}{}", deprecated(current)),
        evicted_labels,
        &m.descheduler_pods_evicted,
    );
    let cycle = "Time taken by one descheduling cycle: every plugin of a run's profile over the \
                 cluster snapshot.";
    let current = "descheduler_loop_duration_seconds";
    histogram(out, current, cycle, &[], &m.loop_duration);
    histogram(
        out,
        "descheduler_descheduler_loop_duration_seconds",
        &format!("{cycle}{}", deprecated(current)),
        &[],
        &m.loop_duration,
    );
    let strategy = "Time taken by one plugin (strategy) of a descheduling cycle, by strategy and \
                    profile (DeschedulerPolicy profile).";
    let strategy_labels = &["strategy", "profile"];
    let current = "descheduler_strategy_duration_seconds";
    histogram(
        out,
        current,
        strategy,
        strategy_labels,
        &m.strategy_duration,
    );
    histogram(
        out,
        "descheduler_descheduler_strategy_duration_seconds",
        &format!("{strategy}{}", deprecated(current)),
        strategy_labels,
        &m.strategy_duration,
    );
    header(
        out,
        "descheduler_build_info",
        "Build information of this server, under descheduler's name: its version, git branch \
         and commit, and the Rust compiler that built it (in place of GoVersion).",
        "gauge",
    );
    let _ = writeln!(
        out,
        "descheduler_build_info{{{}}} 1",
        label_set(BUILD_INFO_LABELS, &build_info().map(String::from))
    );
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
        let _ = writeln!(
            out,
            "{name}{} {value}",
            braced(&label_set(names, label_values))
        );
    }
}

fn histogram(out: &mut String, name: &str, help: &str, names: &[&str], values: &Histograms) {
    header(out, name, help, "histogram");
    for (label_values, h) in values {
        let set = label_set(names, label_values);
        let sep = if set.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, n) in h.bounds.iter().zip(&h.buckets) {
            cumulative += n;
            let _ = writeln!(
                out,
                "{name}_bucket{{{set}{sep}le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{set}{sep}le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum{} {}", braced(&set), h.sum);
        let _ = writeln!(out, "{name}_count{} {}", braced(&set), h.count);
    }
}

/// `{set}`, or nothing for a series without labels (`name{}` is not valid everywhere).
fn braced(set: &str) -> String {
    if set.is_empty() {
        String::new()
    } else {
        format!("{{{set}}}")
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

    /// An eviction by RemoveDuplicates of the stored profile `default`, plugin set `set-1`.
    fn eviction(outcome: EvictionOutcome, node: &str) -> Eviction<'_> {
        Eviction {
            outcome,
            strategy: "RemoveDuplicates",
            profile: "default",
            plugin_set: "set-1",
            namespace: "shop",
            node,
        }
    }

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
        m.pod_evicted(eviction(EvictionOutcome::Success, "n1"));
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

    #[test]
    fn descheduler_series_with_its_names_labels_and_buckets() {
        let m = Metrics::new();
        let text = m.render(&DatabaseGauges::default());
        // Every family is declared before anything is observed; only build info has a series.
        for family in [
            "descheduler_pods_evicted_total counter",
            "descheduler_pods_evicted counter",
            "descheduler_loop_duration_seconds histogram",
            "descheduler_descheduler_loop_duration_seconds histogram",
            "descheduler_strategy_duration_seconds histogram",
            "descheduler_descheduler_strategy_duration_seconds histogram",
            "descheduler_build_info gauge",
        ] {
            assert!(
                text.contains(&format!("# TYPE {family}\n")),
                "{family}: {text}"
            );
        }
        assert!(
            !text.contains("descheduler_loop_duration_seconds_count"),
            "{text}"
        );

        m.pod_evicted(eviction(EvictionOutcome::Success, "n1"));
        m.pod_evicted(eviction(EvictionOutcome::Blocked, "n1"));
        m.pod_evicted(eviction(EvictionOutcome::Error, "n1"));
        m.cycle_finished(0.2);
        m.cycle_finished(30.0);
        m.policy_evaluated(PolicyEvaluation {
            policy: "RemoveDuplicates",
            plugin_set: "set-1",
            profile: "default",
            outcome: "timeout",
            seconds: 0.04,
            proposals: 0,
        });
        let text = m.render(&DatabaseGauges::default());
        // descheduler's labels: the plugin set is the profile; blocked is an error to it.
        let evicted = |name: &str, result: &str| {
            format!(
                "{name}{{result=\"{result}\",strategy=\"RemoveDuplicates\",profile=\"set-1\",\
                 namespace=\"shop\",node=\"n1\"}}"
            )
        };
        for name in ["descheduler_pods_evicted_total", "descheduler_pods_evicted"] {
            assert!(
                text.contains(&format!("{} 1\n", evicted(name, "success"))),
                "{text}"
            );
            assert!(
                text.contains(&format!("{} 2\n", evicted(name, "error"))),
                "{text}"
            );
            assert!(!text.contains(&evicted(name, "blocked")), "{text}");
        }
        // Rebalancer's own keep the stored profile and the blocked result.
        assert!(text.contains(
            "rebalancer_pods_evicted_total{result=\"blocked\",strategy=\"RemoveDuplicates\",\
             profile=\"default\",namespace=\"shop\",node=\"n1\"} 1\n"
        ));
        // The loop: no labels, descheduler's buckets (0.01 … 500 s).
        for name in [
            "descheduler_loop_duration_seconds",
            "descheduler_descheduler_loop_duration_seconds",
        ] {
            for (le, n) in [
                ("0.1", 0),
                ("0.25", 1),
                ("25", 1),
                ("50", 2),
                ("500", 2),
                ("+Inf", 2),
            ] {
                let line = format!("{name}_bucket{{le=\"{le}\"}} {n}\n");
                assert!(text.contains(&line), "{line}: {text}");
            }
            assert!(text.contains(&format!("{name}_sum 30.2\n")), "{text}");
            assert!(text.contains(&format!("{name}_count 2\n")), "{text}");
        }
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("descheduler_loop_duration_seconds_bucket"))
            .count();
        assert_eq!(buckets, LOOP_BUCKETS.len() + 1);
        // The strategy: by plugin and plugin set, failed evaluations too, buckets up to 100 s.
        for name in [
            "descheduler_strategy_duration_seconds",
            "descheduler_descheduler_strategy_duration_seconds",
        ] {
            let set = "strategy=\"RemoveDuplicates\",profile=\"set-1\"";
            for (le, n) in [("0.025", 0), ("0.05", 1), ("100", 1), ("+Inf", 1)] {
                let line = format!("{name}_bucket{{{set},le=\"{le}\"}} {n}\n");
                assert!(text.contains(&line), "{line}: {text}");
            }
            assert!(
                text.contains(&format!("{name}_count{{{set}}} 1\n")),
                "{text}"
            );
        }
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("descheduler_strategy_duration_seconds_bucket"))
            .count();
        assert_eq!(
            buckets,
            STRATEGY_BUCKETS.len() + 1,
            "up to 100 s, then +Inf"
        );
    }

    #[test]
    fn build_info_names_this_build() {
        let text = Metrics::new().render(&DatabaseGauges::default());
        let line = text
            .lines()
            .find(|l| l.starts_with("descheduler_build_info{"))
            .expect("descheduler_build_info");
        assert!(line.ends_with("} 1"), "{line}");
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            line.contains(&format!("AppVersion=\"{version}\"")),
            "{line}"
        );
        assert!(
            line.contains(&format!("DeschedulerVersion=\"v{version}\"")),
            "{line}"
        );
        assert!(line.contains("RustVersion=\"rustc 1."), "{line}");
        assert!(!line.contains("GoVersion"), "{line}");
        let [.., sha, _] = build_info();
        assert!(
            sha.is_empty() || (sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit())),
            "GitSha1 is a full commit id or empty: {sha:?}"
        );
    }
}
