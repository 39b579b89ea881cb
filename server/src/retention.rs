//! Retention: the background task that keeps the database bounded by deleting history past its
//! keep time (the `--retain-*` flags).
//!
//! Owns: turning keep times into cutoffs ([`cutoffs`]), the pass ([`prune_pass`]: every rule of
//! `rebalancer_store::retention` in order, batch by batch, with a pause between batches so that
//! an API write waits for one batch at most, then a WAL checkpoint), what a pass reports (a log
//! line, `rebalancer_pruned_rows_total`), and the task's loop ([`run`]: a pass once the server is
//! ready, then every `--prune-interval`; it stops between two batches at shutdown).
//! Must not: hold SQL or decide which rows a rule deletes (that is `store::retention`), or hold
//! a transaction across a pause.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::RetentionSettings;
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

/// What a pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassReport {
    pub pruned: Pruned,
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
/// pause between batches; then checkpoint the WAL. Stops between two batches once `stop` is
/// true.
pub async fn prune_pass(
    store: &Store,
    cutoffs: &PruneCutoffs,
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
    if !report.stopped {
        report.checkpoint = Some(store.checkpoint_wal().await?);
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// What the task needs.
#[derive(Clone)]
pub struct Deps {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub settings: RetentionSettings,
}

/// Prune now, then every interval, until `stop` turns true. A pass that fails is logged and
/// tried again at the next interval.
pub async fn run(deps: Deps, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            break;
        }
        let cutoffs = cutoffs(&deps.settings, now_ms());
        match prune_pass(&deps.store, &cutoffs, Pace::default(), &stop).await {
            Ok(report) => record(&deps.metrics, &report),
            Err(e) => {
                tracing::error!(error = %e, "pruning history failed; retrying at the next interval")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(deps.settings.interval) => {}
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
    let p = &report.pruned;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let wal_truncated = report.checkpoint.map(|c| c.truncated);
    if p.rows() > 0 {
        tracing::info!(
            decisions = p.decisions,
            decision_events = p.decision_events,
            pod_migrations = p.pod_migrations,
            pod_migration_events = p.pod_migration_events,
            simulated_events = p.simulated_events,
            runs = p.runs,
            audit_log = p.audit_log,
            run_logs = p.run_logs,
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
