//! Retention: the background task that keeps the database bounded by deleting history past its
//! keep time (the `--retain-*` flags).
//!
//! Owns: the keep times in force ([`effective`]: the flags, with the overrides of
//! `PUT /api/v1/retention` stored in the database on top, read again at every pass), turning
//! keep times into cutoffs ([`cutoffs`]), the pass ([`prune_pass`]: every rule of
//! `rebalancer_store::retention` in order, batch by batch, with a pause between batches so that
//! an API write waits for one batch at most, then the change feed past [`EVENTS_KEEP`] or beyond
//! [`EVENTS_MAX`] rows, then a WAL checkpoint), what a pass reports (a log line,
//! `rebalancer_pruned_rows_total`, and [`LastPass`] in the database for the API), and the task's
//! loop ([`run`]: a pass once the server is ready, then every prune interval; it stops between
//! two batches at shutdown).
//! Must not: hold SQL or decide which rows a rule deletes (that is `store::retention`), or hold
//! a transaction across a pause.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::{self, RetentionSettings};
use crate::metrics::Metrics;
use rebalancer_store::{Checkpoint, PruneCutoffs, PruneRule, Pruned, Store, StoreError, now_ms};

/// Rows (decisions, pod migrations, runs, audit entries…) per batch: one transaction of a few
/// tens of milliseconds on the reference cluster's decisions.
pub const BATCH: u32 = 2000;

/// Pause between two batches. At least the longest sleep of SQLite's busy handler (100 ms), so a
/// writer that waited on a batch gets the lock before the next batch takes it.
pub const PAUSE: Duration = Duration::from_millis(100);

/// How a pass paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    pub batch: u32,
    pub pause: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            batch: BATCH,
            pause: PAUSE,
        }
    }
}

/// How long the change feed (`GET /api/v1/events`) keeps an event: a client away for longer
/// resumes with a `reset` (refetch everything).
pub const EVENTS_KEEP: Duration = Duration::from_secs(24 * 3600);
/// The most events the feed keeps, whatever their age (a burst of changes cannot grow it
/// without bound between two passes).
pub const EVENTS_MAX: u64 = 100_000;

/// The `settings` key of the overrides (`PUT /api/v1/retention`).
pub const OVERRIDES_KEY: &str = "retention";
/// The `settings` key of what the last pass did.
pub const LAST_PASS_KEY: &str = "retention.lastPass";

/// Keep times and interval set over the API, each overriding its flag; absent (or null): the
/// flag's value. Written as the flags are: days (`7d`) or a Go duration (`12h`, `30m`); `0`
/// keeps forever (not for `interval`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Overrides {
    /// `--retain-proposals`: expired proposals, from when their run finished.
    #[schema(example = "1d")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposals: Option<String>,
    /// `--retain-dry-runs`: proposals of dry runs, from when their run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_runs: Option<String>,
    /// `--retain-history`: finished pod migrations, rejected decisions, simulated events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
    /// `--retain-runs`: runs, once none of their decisions is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<String>,
    /// `--retain-audit`: audit entries; at least `1d`, or `0` (forever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<String>,
    /// `--prune-interval`: time between two passes (greater than 0).
    #[schema(example = "10m")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// A field of [`Overrides`] that cannot be used, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// The field's name (`audit`).
    pub field: String,
    pub message: String,
}

impl Overrides {
    /// `flags` with these overrides on top, or every field that cannot be used.
    pub fn apply(&self, flags: RetentionSettings) -> Result<RetentionSettings, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut settings = flags;
        let mut keep = |field: &str, flag: &'static str, text: &Option<String>| {
            let text = text.as_deref()?;
            match config::keep_time(flag, text) {
                Ok(keep) => Some(keep),
                Err(e) => {
                    errors.push(FieldError {
                        field: field.into(),
                        message: format!("{text:?}: {}", e.message),
                    });
                    None
                }
            }
        };
        if let Some(v) = keep("proposals", "retain-proposals", &self.proposals) {
            settings.proposals = v;
        }
        if let Some(v) = keep("dryRuns", "retain-dry-runs", &self.dry_runs) {
            settings.dry_runs = v;
        }
        if let Some(v) = keep("history", "retain-history", &self.history) {
            settings.history = v;
        }
        if let Some(v) = keep("runs", "retain-runs", &self.runs) {
            settings.runs = v;
        }
        if let Some(v) = keep("audit", "retain-audit", &self.audit) {
            if v.is_some_and(|d| d < config::MIN_RETAIN_AUDIT) {
                errors.push(FieldError {
                    field: "audit".into(),
                    message: format!(
                        "{:?} is shorter than a day: the database keeps audit entries for at \
                         least 1d (or use 0 to keep them forever)",
                        self.audit.as_deref().unwrap_or_default()
                    ),
                });
            } else {
                settings.audit = v;
            }
        }
        if let Some(text) = &self.interval {
            match config::positive_duration("prune-interval", text) {
                Ok(d) => settings.interval = d,
                Err(e) => errors.push(FieldError {
                    field: "interval".into(),
                    message: format!("{text:?}: {}", e.message),
                }),
            }
        }
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }
}

/// The settings in force: `flags` with the stored overrides on top, the overrides, and when
/// they were set. Stored overrides that no longer validate (a newer build's rules) are logged
/// and left out.
pub async fn effective(
    store: &Store,
    flags: RetentionSettings,
) -> Result<(RetentionSettings, Overrides, Option<i64>), StoreError> {
    let Some((value, at)) = store.setting(OVERRIDES_KEY).await? else {
        return Ok((flags, Overrides::default(), None));
    };
    let overrides: Overrides = match serde_json::from_value(value) {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(error = %e, "the stored retention overrides are not valid; using the flags");
            return Ok((flags, Overrides::default(), Some(at)));
        }
    };
    match overrides.apply(flags) {
        Ok(settings) => Ok((settings, overrides, Some(at))),
        Err(errors) => {
            tracing::error!(
                ?errors,
                "the stored retention overrides are not valid; using the flags"
            );
            Ok((flags, overrides, Some(at)))
        }
    }
}

/// A keep time as the flags write it: `90d`, `12h`, `30m`, `45s`, `1500ms`; `0` for forever.
pub fn render_keep(keep: Option<Duration>) -> String {
    keep.map_or_else(|| "0".to_string(), render_duration)
}

/// A duration as the flags write it, in the largest unit that divides it.
pub fn render_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    if d.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{ms}ms")
    } else {
        format!("{}ns", d.as_nanos())
    }
}

/// What the last pass did (stored for `GET /api/v1/retention`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastPass {
    /// When it finished (RFC 3339).
    #[schema(format = DateTime)]
    pub finished_at: String,
    pub duration_ms: u64,
    /// Rows deleted per table (`events`: the change feed).
    #[schema(value_type = Object, example = json!({"decisions": 120, "events": 4000}))]
    pub pruned: std::collections::BTreeMap<String, u64>,
    /// Transactions that deleted something.
    pub batches: u32,
    /// The longest of them: the longest an API write waited for the pass.
    pub longest_batch_ms: u64,
    /// Shutdown began during the pass: the rest was left for the next one.
    pub stopped: bool,
    /// Why the pass failed, if it did.
    pub error: Option<String>,
}

impl LastPass {
    fn of(report: Result<&PassReport, &StoreError>) -> LastPass {
        let finished_at = crate::http::timestamp(now_ms());
        match report {
            Ok(r) => LastPass {
                finished_at,
                duration_ms: r.elapsed.as_millis() as u64,
                pruned: r
                    .pruned
                    .by_table()
                    .into_iter()
                    .map(|(t, n)| (t.to_string(), n))
                    .chain([
                        ("events".to_string(), r.events),
                        ("webhook_deliveries".to_string(), r.webhook_deliveries),
                    ])
                    .collect(),
                batches: r.batches,
                longest_batch_ms: r.longest_batch.as_millis() as u64,
                stopped: r.stopped,
                error: None,
            },
            Err(e) => LastPass {
                finished_at,
                duration_ms: 0,
                pruned: Default::default(),
                batches: 0,
                longest_batch_ms: 0,
                stopped: false,
                error: Some(e.to_string()),
            },
        }
    }
}

/// What a pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassReport {
    pub pruned: Pruned,
    /// Events of the change feed deleted.
    pub events: u64,
    /// Finished webhook deliveries deleted.
    pub webhook_deliveries: u64,
    /// Transactions that deleted something.
    pub batches: u32,
    /// The longest of them: the longest an API write waited for this pass.
    pub longest_batch: Duration,
    /// The whole pass, pauses included.
    pub elapsed: Duration,
    /// `None` when the pass was stopped before it.
    pub checkpoint: Option<Checkpoint>,
    /// Shutdown began during the pass: what is left is for the next start.
    pub stopped: bool,
}

/// The cutoffs of `settings` at `now` (ms since the epoch).
pub fn cutoffs(settings: &RetentionSettings, now: i64) -> PruneCutoffs {
    let before = |keep: Option<Duration>| {
        keep.map(|d| now.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    };
    PruneCutoffs {
        proposals: before(settings.proposals),
        dry_run_proposals: before(settings.dry_runs),
        history: before(settings.history),
        runs: before(settings.runs),
        audit: before(settings.audit),
    }
}

/// Delete everything due under `cutoffs`, rule by rule, one batch per transaction with `pace`'s
/// pause between batches; then the change feed, then the webhook deliveries that finished
/// before `webhook_deliveries` (ms; `None`: keep them); then checkpoint the WAL. Stops between
/// two batches once `stop` is true.
pub async fn prune_pass(
    store: &Store,
    cutoffs: &PruneCutoffs,
    webhook_deliveries: Option<i64>,
    pace: Pace,
    stop: &watch::Receiver<bool>,
) -> Result<PassReport, StoreError> {
    let started = Instant::now();
    let mut report = PassReport::default();
    'rules: for rule in PruneRule::ALL {
        loop {
            if *stop.borrow() {
                report.stopped = true;
                break 'rules;
            }
            let batch_started = Instant::now();
            let batch = store.prune(rule, cutoffs, pace.batch).await?;
            if batch.pruned.rows() > 0 {
                report.batches += 1;
                report.longest_batch = report.longest_batch.max(batch_started.elapsed());
                report.pruned.add(&batch.pruned);
            }
            if !batch.more {
                break;
            }
            tokio::time::sleep(pace.pause).await;
        }
    }
    let events_before = now_ms().saturating_sub(EVENTS_KEEP.as_millis() as i64);
    report.events = drain(&mut report, pace, stop, move |n| {
        store.prune_events(Some(events_before), Some(EVENTS_MAX), n)
    })
    .await?;
    if let Some(before) = webhook_deliveries {
        report.webhook_deliveries = drain(&mut report, pace, stop, move |n| {
            store.prune_webhook_deliveries(before, n)
        })
        .await?;
    }
    if !report.stopped {
        report.checkpoint = Some(store.checkpoint_wal().await?);
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Delete with `batch` (given the batch size; it answers rows deleted and whether more may be
/// due) until nothing is left, pausing between batches, stopping once `stop` is true. Returns
/// the rows deleted.
async fn drain<F>(
    report: &mut PassReport,
    pace: Pace,
    stop: &watch::Receiver<bool>,
    mut batch: impl FnMut(u32) -> F,
) -> Result<u64, StoreError>
where
    F: std::future::Future<Output = Result<(u64, bool), StoreError>>,
{
    let mut total = 0;
    while !report.stopped {
        if *stop.borrow() {
            report.stopped = true;
            break;
        }
        let (deleted, more) = batch(pace.batch).await?;
        total += deleted;
        if deleted > 0 {
            report.batches += 1;
        }
        if !more {
            break;
        }
        tokio::time::sleep(pace.pause).await;
    }
    Ok(total)
}

/// What the task needs.
#[derive(Clone)]
pub struct Deps {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub settings: RetentionSettings,
    /// `--retain-webhook-deliveries` (`None`: forever).
    pub webhook_deliveries: Option<Duration>,
}

/// Prune now, then every interval, until `stop` turns true. A pass that fails is logged and
/// tried again at the next interval.
pub async fn run(deps: Deps, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            break;
        }
        // Read at every pass: PUT /api/v1/retention takes effect at the next one.
        let settings = match effective(&deps.store, deps.settings).await {
            Ok((settings, _, _)) => settings,
            Err(e) => {
                tracing::error!(error = %e, "reading the retention overrides failed; using the flags");
                deps.settings
            }
        };
        let now = now_ms();
        let cutoffs = cutoffs(&settings, now);
        let deliveries = deps
            .webhook_deliveries
            .map(|keep| now.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX)));
        let pass = prune_pass(&deps.store, &cutoffs, deliveries, Pace::default(), &stop).await;
        match &pass {
            Ok(report) => record(&deps.metrics, report),
            Err(e) => {
                tracing::error!(error = %e, "pruning history failed; retrying at the next interval")
            }
        }
        let last = LastPass::of(pass.as_ref());
        match serde_json::to_value(&last) {
            Ok(value) => {
                if let Err(e) = deps.store.put_setting(LAST_PASS_KEY, &value).await {
                    tracing::warn!(error = %e, "could not record what the retention pass did");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not render what the retention pass did"),
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            changed = stop.changed() => if changed.is_err() { break },
        }
    }
    tracing::info!("retention stopped");
}

/// Count a pass in the metrics and log it (`info` when it deleted anything).
fn record(metrics: &Metrics, report: &PassReport) {
    for (table, rows) in report.pruned.by_table() {
        metrics.rows_pruned(table, rows);
    }
    metrics.rows_pruned("events", report.events);
    metrics.rows_pruned("webhook_deliveries", report.webhook_deliveries);
    let p = &report.pruned;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let wal_truncated = report.checkpoint.map(|c| c.truncated);
    if p.rows() + report.events + report.webhook_deliveries > 0 {
        tracing::info!(
            decisions = p.decisions,
            decision_events = p.decision_events,
            pod_migrations = p.pod_migrations,
            pod_migration_events = p.pod_migration_events,
            simulated_events = p.simulated_events,
            runs = p.runs,
            audit_log = p.audit_log,
            run_logs = p.run_logs,
            events = report.events,
            webhook_deliveries = report.webhook_deliveries,
            batches = report.batches,
            longest_batch_ms = ms(report.longest_batch),
            duration_ms = ms(report.elapsed),
            wal_truncated,
            stopped = report.stopped,
            "history pruned"
        );
    } else {
        tracing::debug!(
            duration_ms = ms(report.elapsed),
            wal_truncated,
            "nothing to prune"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_on_the_flags_and_every_bad_field_is_named() {
        let flags = RetentionSettings::default();
        let hour = Duration::from_secs(3600);
        let applied = Overrides {
            runs: Some("7d".into()),
            audit: Some("0".into()),
            interval: Some("30s".into()),
            ..Overrides::default()
        }
        .apply(flags)
        .unwrap();
        assert_eq!(applied.runs, Some(7 * 24 * hour));
        assert_eq!(applied.audit, None);
        assert_eq!(applied.interval, Duration::from_secs(30));
        assert_eq!(
            applied.history, flags.history,
            "fields left out keep the flag's"
        );
        let errors = Overrides {
            proposals: Some("soon".into()),
            audit: Some("12h".into()),
            interval: Some("0s".into()),
            ..Overrides::default()
        }
        .apply(flags)
        .unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["proposals", "audit", "interval"]);
        assert!(
            errors[1].message.contains("shorter than a day"),
            "{errors:?}"
        );
        assert!(errors[2].message.contains("greater than 0"), "{errors:?}");
    }

    #[test]
    fn durations_render_as_the_flags_write_them() {
        assert_eq!(render_keep(None), "0");
        assert_eq!(render_duration(Duration::from_secs(90 * 86_400)), "90d");
        assert_eq!(render_duration(Duration::from_secs(36 * 3600)), "36h");
        assert_eq!(render_duration(Duration::from_secs(600)), "10m");
        assert_eq!(render_duration(Duration::from_secs(90)), "90s");
        assert_eq!(render_duration(Duration::from_millis(1500)), "1500ms");
        for text in ["90d", "36h", "10m", "90s", "1500ms"] {
            let keep = config::keep_time("retain", text).unwrap();
            assert_eq!(render_keep(keep), text);
        }
    }

    #[test]
    fn keep_times_become_cutoffs_before_now_and_none_keeps_forever() {
        let hour = Duration::from_secs(3600);
        let settings = RetentionSettings {
            proposals: Some(24 * hour),
            dry_runs: Some(6 * hour),
            history: None,
            runs: Some(30 * 24 * hour),
            audit: Some(Duration::MAX),
            interval: hour,
        };
        let now = 1_800_000_000_000;
        assert_eq!(
            cutoffs(&settings, now),
            PruneCutoffs {
                proposals: Some(now - 86_400_000),
                dry_run_proposals: Some(now - 21_600_000),
                history: None,
                runs: Some(now - 2_592_000_000),
                audit: Some(now.saturating_sub(i64::MAX)),
            }
        );
    }
}
