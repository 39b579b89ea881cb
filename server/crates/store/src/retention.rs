//! Retention: deleting history that is past its keep time, one bounded batch per transaction,
//! and handing the space back to the database file.
//!
//! Owns: which rows each [`PruneRule`] finds due and what goes with them —
//! - [`PruneRule::Proposals`]: proposals nobody acted on (`expired` or `superseded`, so never
//!   approved or rejected) of runs finished before the cutoff (dry runs have a cutoff of their own), with
//!   their status history; the run counts them (`runs.decisions_pruned`) and is marked once none
//!   of its decisions is left to prune (`runs.decisions_pruned_at`), its policies' log lines
//!   then going too (`run_logs`, counted in each policy's `logsDropped` in the report): they
//!   explain proposals that are gone, and are most of a report's size;
//! - [`PruneRule::PodMigrations`]: pod migrations finished before the cutoff, with their events,
//!   their decision and its history;
//! - [`PruneRule::RejectedDecisions`]: rejected decisions, with their history;
//! - [`PruneRule::SimulatedEvents`]: the simulated backend's event log;
//! - [`PruneRule::Runs`]: runs finished before the cutoff with no decision left (and their logs);
//! - [`PruneRule::Audit`]: the oldest audit entries;
//!
//! and the WAL checkpoint ([`Store::checkpoint_wal`]) and file figures ([`Store::file_stats`]).
//! Must not: choose keep times or pace the batches (the server's `retention` task does), or
//! delete what someone can still act on or needs: a `proposed` decision, an unfinished pod
//! migration, a finished one whose reservation still has to be released, the simulated events
//! of a pod an unfinished pod migration moves, a run that still has decisions.
//!
//! The queries name their index (`INDEXED BY`): without statistics SQLite may otherwise walk
//! every expired decision (millions on a large cluster) to find the few runs that are due.

use std::collections::BTreeMap;

use super::{BUSY_TIMEOUT, Store, StoreError, now_ms};

/// What one rule deletes; applied in this order by a pass ([`PruneRule::ALL`]), so that runs
/// go after their decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PruneRule {
    Proposals,
    PodMigrations,
    RejectedDecisions,
    SimulatedEvents,
    Runs,
    Audit,
}

impl PruneRule {
    pub const ALL: [PruneRule; 6] = [
        PruneRule::Proposals,
        PruneRule::PodMigrations,
        PruneRule::RejectedDecisions,
        PruneRule::SimulatedEvents,
        PruneRule::Runs,
        PruneRule::Audit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PruneRule::Proposals => "proposals",
            PruneRule::PodMigrations => "pod-migrations",
            PruneRule::RejectedDecisions => "rejected-decisions",
            PruneRule::SimulatedEvents => "simulated-events",
            PruneRule::Runs => "runs",
            PruneRule::Audit => "audit",
        }
    }
}

/// When each rule's rows become due: rows older than the cutoff (ms since the epoch) are
/// deleted; `None` keeps them forever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneCutoffs {
    /// Expired and superseded proposals of runs (not dry runs) that finished before this.
    pub proposals: Option<i64>,
    /// Expired and superseded proposals of dry runs that finished before this.
    pub dry_run_proposals: Option<i64>,
    /// Pod migrations that finished, decisions rejected and simulated-backend events recorded
    /// before this.
    pub history: Option<i64>,
    /// Runs that finished before this, once none of their decisions is left.
    pub runs: Option<i64>,
    /// Audit entries recorded before this (never younger than a day: the schema refuses).
    pub audit: Option<i64>,
}

/// Rows deleted, per table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub decisions: u64,
    pub decision_events: u64,
    pub pod_migrations: u64,
    pub pod_migration_events: u64,
    pub simulated_events: u64,
    pub runs: u64,
    pub audit_log: u64,
    /// Runs whose policies' log lines went (their `run_logs` row, or the lines inline in a
    /// report written before that table existed).
    pub run_logs: u64,
}

impl Pruned {
    /// Every table with its count (zeros included), by table name.
    pub fn by_table(&self) -> [(&'static str, u64); 8] {
        [
            ("decisions", self.decisions),
            ("decision_events", self.decision_events),
            ("pod_migrations", self.pod_migrations),
            ("pod_migration_events", self.pod_migration_events),
            ("simulated_events", self.simulated_events),
            ("runs", self.runs),
            ("run_logs", self.run_logs),
            ("audit_log", self.audit_log),
        ]
    }

    pub fn rows(&self) -> u64 {
        self.by_table().iter().map(|(_, n)| n).sum()
    }

    pub fn add(&mut self, other: &Pruned) {
        self.decisions += other.decisions;
        self.decision_events += other.decision_events;
        self.pod_migrations += other.pod_migrations;
        self.pod_migration_events += other.pod_migration_events;
        self.simulated_events += other.simulated_events;
        self.runs += other.runs;
        self.audit_log += other.audit_log;
        self.run_logs += other.run_logs;
    }
}

/// What one batch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneBatch {
    pub pruned: Pruned,
    /// The batch was full: more rows of the rule may be due.
    pub more: bool,
}

/// What a WAL checkpoint did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Frames in the WAL before it was reset.
    pub wal_frames: i64,
    /// Frames copied into the database file.
    pub checkpointed: i64,
    /// The WAL file was truncated to zero bytes. `false` when a reader or writer kept it busy
    /// past the short wait: the next checkpoint tries again.
    pub truncated: bool,
}

/// The database file's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStats {
    pub page_size: i64,
    /// Pages of the file (in use or free).
    pub pages: i64,
    /// Pages on the free list: room reused by later writes (the file does not shrink).
    pub free_pages: i64,
}

/// Runs marked done (and their reports rewritten without logs) per transaction: a report with
/// logs is tens of KB.
const RUNS_PER_BATCH: i64 = 100;
/// How long the truncating checkpoint may wait for readers: it blocks writers while it waits.
const TRUNCATE_WAIT_MS: u64 = 100;
/// Audit entries younger than this are never deleted (the schema's trigger refuses).
const AUDIT_MIN_AGE_MS: i64 = 24 * 60 * 60 * 1000;

type Tx = sqlx::Transaction<'static, sqlx::Sqlite>;

impl Store {
    /// Delete up to `limit` due rows of `rule` (with what goes with them) in one `BEGIN
    /// IMMEDIATE` transaction.
    pub async fn prune(
        &self,
        rule: PruneRule,
        cutoffs: &PruneCutoffs,
        limit: u32,
    ) -> Result<PruneBatch, StoreError> {
        let limit = i64::from(limit.max(1));
        let cutoff = match rule {
            PruneRule::Proposals => cutoffs.proposals.or(cutoffs.dry_run_proposals),
            PruneRule::PodMigrations
            | PruneRule::RejectedDecisions
            | PruneRule::SimulatedEvents => cutoffs.history,
            PruneRule::Runs => cutoffs.runs,
            PruneRule::Audit => cutoffs.audit,
        };
        let Some(cutoff) = cutoff else {
            return Ok(PruneBatch::default());
        };
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let batch = match rule {
            PruneRule::Proposals => {
                proposals(
                    &mut tx,
                    cutoffs.proposals.unwrap_or(i64::MIN),
                    cutoffs.dry_run_proposals.unwrap_or(i64::MIN),
                    limit,
                )
                .await?
            }
            PruneRule::PodMigrations => pod_migrations(&mut tx, cutoff, limit).await?,
            PruneRule::RejectedDecisions => rejected(&mut tx, cutoff, limit).await?,
            PruneRule::SimulatedEvents => simulated_events(&mut tx, cutoff, limit).await?,
            PruneRule::Runs => runs(&mut tx, cutoff, limit).await?,
            PruneRule::Audit => {
                audit(&mut tx, cutoff.min(now_ms() - AUDIT_MIN_AGE_MS), limit).await?
            }
        };
        tx.commit().await?;
        Ok(batch)
    }

    /// Copy the WAL into the database file and truncate it: first without waiting for anyone
    /// (PASSIVE), then truncating (TRUNCATE), which waits for readers of the WAL and blocks
    /// writers meanwhile, so it waits at most [`TRUNCATE_WAIT_MS`].
    pub async fn checkpoint_wal(&self) -> Result<Checkpoint, StoreError> {
        let mut conn = self.pool.acquire().await?;
        sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut *conn)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}"
        )))
        .execute(&mut *conn)
        .await?;
        let result: Result<(i64, i64, i64), sqlx::Error> =
            sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                .fetch_one(&mut *conn)
                .await;
        let restored = sqlx::query(sqlx::AssertSqlSafe(format!(
            "PRAGMA busy_timeout = {}",
            BUSY_TIMEOUT.as_millis()
        )))
        .execute(&mut *conn)
        .await;
        if restored.is_err() {
            // Never hand a connection with the short wait back to the pool.
            conn.close_on_drop();
        }
        let (busy, wal_frames, checkpointed) = result?;
        restored?;
        Ok(Checkpoint {
            wal_frames,
            checkpointed,
            truncated: busy == 0,
        })
    }

    /// The database file's page size, page count and free pages.
    pub async fn file_stats(&self) -> Result<FileStats, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut values = [0i64; 3];
        for (value, name) in values
            .iter_mut()
            .zip(["page_size", "page_count", "freelist_count"])
        {
            *value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("PRAGMA {name}")))
                .fetch_one(&mut *conn)
                .await?;
        }
        let [page_size, pages, free_pages] = values;
        Ok(FileStats {
            page_size,
            pages,
            free_pages,
        })
    }
}

/// Expired and superseded proposals of runs finished before `normal` (dry runs: `dry`), run by
/// run in id order.
async fn proposals(
    tx: &mut Tx,
    normal: i64,
    dry: i64,
    limit: i64,
) -> Result<PruneBatch, StoreError> {
    let due_runs: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM runs INDEXED BY runs_proposals_unpruned \
         WHERE decisions_pruned_at IS NULL AND finished_at IS NOT NULL \
         AND finished_at < CASE dry_run WHEN 1 THEN ? ELSE ? END ORDER BY id",
    )
    .bind(dry)
    .bind(normal)
    .fetch_all(&mut **tx)
    .await?;
    let mut ids: Vec<(i64, i64)> = Vec::new();
    for run in &due_runs {
        let left = limit - ids.len() as i64;
        if left <= 0 {
            break;
        }
        let found: Vec<i64> = sqlx::query_scalar(
            "SELECT d.id FROM decisions d INDEXED BY decisions_by_run \
             WHERE d.run_id = ? AND d.status IN ('expired', 'superseded') \
             AND NOT EXISTS (SELECT 1 FROM pod_migrations m WHERE m.decision_id = d.id) LIMIT ?",
        )
        .bind(run)
        .bind(left)
        .fetch_all(&mut **tx)
        .await?;
        ids.extend(found.into_iter().map(|id| (id, *run)));
    }
    let mut more = ids.len() as i64 >= limit;
    let mut pruned = delete_decisions(tx, &ids).await?;
    pruned.decisions = ids.len() as u64;
    if !more {
        // Every due run has been gone through: those with nothing left to prune are done (a
        // proposal still open keeps its run until it expires and goes too), and their
        // policies' logs go with their proposals.
        let done: Vec<(i64, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT id, report, (SELECT logs FROM run_logs WHERE run_id = runs.id) FROM runs \
             WHERE id IN (SELECT value FROM json_each(?)) \
             AND NOT EXISTS (SELECT 1 FROM decisions d INDEXED BY decisions_by_run \
                             WHERE d.run_id = runs.id \
                               AND d.status IN ('proposed', 'expired', 'superseded')) \
             LIMIT ?",
        )
        .bind(json_ids(due_runs.iter().copied()))
        .bind(RUNS_PER_BATCH)
        .fetch_all(&mut **tx)
        .await?;
        more = done.len() as i64 >= RUNS_PER_BATCH;
        let now = now_ms();
        for (id, report, apart) in done {
            let compacted = report
                .as_deref()
                .and_then(|r| without_logs(r, apart.as_deref()));
            if apart.is_some() {
                sqlx::query("DELETE FROM run_logs WHERE run_id = ?")
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            if apart.is_some() || compacted.is_some() {
                pruned.run_logs += 1;
            }
            sqlx::query(
                "UPDATE runs SET decisions_pruned_at = ?, report = COALESCE(?, report) WHERE id = ?",
            )
            .bind(now)
            .bind(compacted)
            .bind(id)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(PruneBatch { pruned, more })
}

/// A run report (JSON) with its policies' log lines counted in their `logsDropped`: the lines
/// kept apart (`apart`, one array per policy as `runs::split_logs` made them) and those still
/// inline in reports written before `run_logs` existed (removed). `None` when there were none
/// (or it is not a report: left as it is).
fn without_logs(report: &str, apart: Option<&str>) -> Option<String> {
    let mut report: serde_json::Value = serde_json::from_str(report).ok()?;
    let apart: Vec<serde_json::Value> = apart
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default();
    let mut counted = false;
    for (i, policy) in report
        .get_mut("policies")?
        .as_array_mut()?
        .iter_mut()
        .enumerate()
    {
        let inline = match policy.get_mut("logs").and_then(|l| l.as_array_mut()) {
            Some(logs) => std::mem::take(logs).len(),
            None => 0,
        };
        let lines = (inline + apart.get(i).and_then(|a| a.as_array()).map_or(0, Vec::len)) as u64;
        if lines == 0 {
            continue;
        }
        let dropped = policy["logsDropped"].as_u64().unwrap_or(0);
        policy["logsDropped"] = (dropped + lines).into();
        counted = true;
    }
    counted.then(|| report.to_string())
}

/// Finished pod migrations (reservation released), oldest first, with their decisions.
async fn pod_migrations(tx: &mut Tx, before: i64, limit: i64) -> Result<PruneBatch, StoreError> {
    let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT m.id, m.decision_id, d.run_id \
         FROM pod_migrations m INDEXED BY pod_migrations_by_finish \
         JOIN decisions d ON d.id = m.decision_id \
         WHERE m.finished_at IS NOT NULL AND m.finished_at < ? \
         AND m.phase IN ('Succeeded', 'Failed', 'Aborted') \
         AND (m.reservation IS NULL OR m.reservation_released = 1) \
         ORDER BY m.finished_at LIMIT ?",
    )
    .bind(before)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?;
    let migrations = json_ids(rows.iter().map(|r| r.0));
    let events = sqlx::query(
        "DELETE FROM pod_migration_events \
         WHERE pod_migration_id IN (SELECT value FROM json_each(?))",
    )
    .bind(&migrations)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    let deleted =
        sqlx::query("DELETE FROM pod_migrations WHERE id IN (SELECT value FROM json_each(?))")
            .bind(&migrations)
            .execute(&mut **tx)
            .await?
            .rows_affected();
    let decisions: Vec<(i64, i64)> = rows.iter().map(|r| (r.1, r.2)).collect();
    let mut pruned = delete_decisions(tx, &decisions).await?;
    pruned.decisions = decisions.len() as u64;
    pruned.pod_migrations = deleted;
    pruned.pod_migration_events = events;
    Ok(PruneBatch {
        pruned,
        more: rows.len() as i64 >= limit,
    })
}

/// Rejected decisions last changed before `before`.
async fn rejected(tx: &mut Tx, before: i64, limit: i64) -> Result<PruneBatch, StoreError> {
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT id, run_id FROM decisions INDEXED BY decisions_by_status \
         WHERE status = 'rejected' AND updated_at < ? ORDER BY id LIMIT ?",
    )
    .bind(before)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?;
    let mut pruned = delete_decisions(tx, &rows).await?;
    pruned.decisions = rows.len() as u64;
    Ok(PruneBatch {
        pruned,
        more: rows.len() as i64 >= limit,
    })
}

/// The simulated backend's events recorded before `before`, but those of a pod an unfinished pod
/// migration moves (the backend looks its replacement up in them).
async fn simulated_events(tx: &mut Tx, before: i64, limit: i64) -> Result<PruneBatch, StoreError> {
    let deleted = sqlx::query(
        "DELETE FROM simulated_events WHERE id IN ( \
           SELECT e.id FROM simulated_events e INDEXED BY simulated_events_by_time \
           WHERE e.time_ms < ? AND NOT EXISTS ( \
             SELECT 1 FROM pod_migrations m WHERE m.phase IN ('Pending', 'Running') \
             AND m.cluster = e.cluster AND m.pod_uid = e.pod_uid) \
           ORDER BY e.time_ms LIMIT ?)",
    )
    .bind(before)
    .bind(limit)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(PruneBatch {
        pruned: Pruned {
            simulated_events: deleted,
            ..Pruned::default()
        },
        more: deleted as i64 >= limit,
    })
}

/// Runs finished before `before` with no decision left, with their logs.
async fn runs(tx: &mut Tx, before: i64, limit: i64) -> Result<PruneBatch, StoreError> {
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT r.id FROM runs r INDEXED BY runs_by_finish \
         WHERE r.finished_at IS NOT NULL AND r.finished_at < ? \
         AND NOT EXISTS (SELECT 1 FROM decisions d WHERE d.run_id = r.id) \
         ORDER BY r.finished_at LIMIT ?",
    )
    .bind(before)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?;
    let ids_json = json_ids(ids.iter().copied());
    let run_logs =
        sqlx::query("DELETE FROM run_logs WHERE run_id IN (SELECT value FROM json_each(?))")
            .bind(&ids_json)
            .execute(&mut **tx)
            .await?
            .rows_affected();
    let deleted = sqlx::query("DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))")
        .bind(&ids_json)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(PruneBatch {
        pruned: Pruned {
            runs: deleted,
            run_logs,
            ..Pruned::default()
        },
        more: ids.len() as i64 >= limit,
    })
}

/// The oldest audit entries, up to the first one recorded at or after `before` (entries are
/// cut from the start of the log only: the schema refuses anything else).
async fn audit(tx: &mut Tx, before: i64, limit: i64) -> Result<PruneBatch, StoreError> {
    let oldest: Vec<(i64, i64)> =
        sqlx::query_as("SELECT id, at FROM audit_log ORDER BY id LIMIT ?")
            .bind(limit)
            .fetch_all(&mut **tx)
            .await?;
    let due = oldest.iter().take_while(|(_, at)| *at < before).count();
    let Some(&(last, _)) = due.checked_sub(1).and_then(|i| oldest.get(i)) else {
        return Ok(PruneBatch::default());
    };
    // A range from the first id: deleted in id order, each the oldest left when it goes.
    let deleted = sqlx::query("DELETE FROM audit_log WHERE id <= ?")
        .bind(last)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(PruneBatch {
        pruned: Pruned {
            audit_log: deleted,
            ..Pruned::default()
        },
        more: due as i64 >= limit,
    })
}

/// Delete decisions (id, run id) with their status history, and count them on their runs.
/// Returns the history rows deleted (the caller counts the decisions).
async fn delete_decisions(tx: &mut Tx, decisions: &[(i64, i64)]) -> Result<Pruned, StoreError> {
    if decisions.is_empty() {
        return Ok(Pruned::default());
    }
    let ids = json_ids(decisions.iter().map(|d| d.0));
    let events = sqlx::query(
        "DELETE FROM decision_events WHERE decision_id IN (SELECT value FROM json_each(?))",
    )
    .bind(&ids)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    sqlx::query("DELETE FROM decisions WHERE id IN (SELECT value FROM json_each(?))")
        .bind(&ids)
        .execute(&mut **tx)
        .await?;
    let mut per_run: BTreeMap<i64, i64> = BTreeMap::new();
    for &(_, run) in decisions {
        *per_run.entry(run).or_default() += 1;
    }
    for (run, n) in per_run {
        sqlx::query("UPDATE runs SET decisions_pruned = decisions_pruned + ? WHERE id = ?")
            .bind(n)
            .bind(run)
            .execute(&mut **tx)
            .await?;
    }
    Ok(Pruned {
        decision_events: events,
        ..Pruned::default()
    })
}

fn json_ids(ids: impl Iterator<Item = i64>) -> String {
    serde_json::Value::from(ids.collect::<Vec<_>>()).to_string()
}

#[cfg(test)]
mod tests;
