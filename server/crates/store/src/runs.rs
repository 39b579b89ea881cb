//! Runs: one row per evaluation of a profile over a cluster revision; finishing a run stores
//! its report and all its decisions in one transaction.
//!
//! A report's policy log lines (`policies[].logs`) are stored apart, in `run_logs` (most of a
//! report's size; retention deletes them with the run's proposals), and put back into the
//! report when it is read: callers see one report.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::decisions::{DecisionStatus, NewDecision};
use super::events;
use super::state::StateWrite;
use super::{Store, StoreError, from_json, now_ms};

/// Rows per multi-row decision INSERT (12 parameters each).
const DECISION_BATCH: usize = 500;

/// Actor of the decision history entries a run's proposals write when they supersede earlier
/// ones.
pub const SUPERSEDE_ACTOR: &str = "system:supersede";

/// What finishing a run recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFinished {
    /// When it finished (ms since the epoch).
    pub finished_at: i64,
    /// The earlier open proposals its proposals superseded (status `superseded` now), by id.
    pub superseded: Vec<i64>,
}

/// `running` until the run ends as `succeeded` or `failed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
        }
    }
}

impl FromStr for RunStatus {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "running" => Ok(RunStatus::Running),
            "succeeded" => Ok(RunStatus::Succeeded),
            "failed" => Ok(RunStatus::Failed),
            other => Err(StoreError::corrupt("run status", format!("`{other}`"))),
        }
    }
}

/// What started a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunTrigger {
    /// `POST /api/v1/runs`.
    Manual,
    /// A schedule's interval elapsed.
    Schedule,
    /// The cluster's state changed (debounced), for a schedule with `onChange`.
    Change,
}

impl RunTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            RunTrigger::Manual => "manual",
            RunTrigger::Schedule => "schedule",
            RunTrigger::Change => "change",
        }
    }
}

impl FromStr for RunTrigger {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "manual" => Ok(RunTrigger::Manual),
            "schedule" => Ok(RunTrigger::Schedule),
            "change" => Ok(RunTrigger::Change),
            other => Err(StoreError::corrupt("run trigger", format!("`{other}`"))),
        }
    }
}

/// A run about to start.
#[derive(Clone, Copy, Debug)]
pub struct NewRun<'a> {
    pub cluster: &'a str,
    pub cluster_revision: i64,
    pub profile: &'a str,
    /// A dry run's decisions can never be approved or executed.
    pub dry_run: bool,
    pub trigger: RunTrigger,
    /// The schedule that started it.
    pub schedule_id: Option<i64>,
    /// The incarnation of the cluster the run reads ([`ClusterRecord::incarnation`](crate::ClusterRecord),
    /// taken before its snapshot); `None`: the cluster's when the run is recorded.
    pub cluster_incarnation: Option<i64>,
}

impl<'a> NewRun<'a> {
    /// A run started by hand, not a dry run.
    pub fn manual(cluster: &'a str, cluster_revision: i64, profile: &'a str) -> NewRun<'a> {
        NewRun {
            cluster,
            cluster_revision,
            profile,
            dry_run: false,
            trigger: RunTrigger::Manual,
            schedule_id: None,
            cluster_incarnation: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub id: i64,
    pub cluster: String,
    pub cluster_revision: i64,
    pub profile: String,
    pub status: RunStatus,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    /// The run report as JSON, once finished.
    pub report: Option<serde_json::Value>,
    pub error: Option<String>,
    /// A dry run's decisions can never be approved or executed (column `runs.dry_run`).
    pub dry_run: bool,
    pub trigger: RunTrigger,
    pub schedule_id: Option<i64>,
    /// How many of its decisions retention deleted (see `retention`).
    pub decisions_pruned: i64,
    /// When the last of its decisions retention deletes went; `None` while some are left (or
    /// none was due yet).
    pub decisions_pruned_at: Option<i64>,
}

/// How a run ended.
#[derive(Clone, Copy)]
pub enum RunEnd<'a> {
    Succeeded {
        /// The run report as JSON text, given the indexes into `state` of the writes that lost
        /// to a concurrent run (committed in the same transaction, so it can say so).
        report: &'a (dyn Fn(&[usize]) -> String + Sync),
        decisions: &'a [NewDecision<'a>],
        /// Policy state scopes the run changed.
        state: &'a [StateWrite<'a>],
    },
    Failed {
        error: &'a str,
    },
}

const COLUMNS: &str = "id, cluster, cluster_revision, profile, status, started_at, finished_at, \
     report, error, dry_run, triggered_by, schedule_id, decisions_pruned, decisions_pruned_at, \
     (SELECT logs FROM run_logs WHERE run_id = runs.id) AS logs";

fn run_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<RunRecord, StoreError> {
    let id: i64 = row.try_get("id")?;
    let status: String = row.try_get("status")?;
    let report: Option<String> = row.try_get("report")?;
    let logs: Option<String> = row.try_get("logs")?;
    Ok(RunRecord {
        id,
        cluster: row.try_get("cluster")?,
        cluster_revision: row.try_get("cluster_revision")?,
        profile: row.try_get("profile")?,
        status: status.parse()?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        report: report
            .map(|r| {
                let mut report = from_json(&format!("report of run {id}"), &r)?;
                if let Some(logs) = &logs {
                    let logs = from_json(&format!("logs of run {id}"), logs)?;
                    put_logs_back(&mut report, logs);
                }
                Ok::<_, StoreError>(report)
            })
            .transpose()?,
        error: row.try_get("error")?,
        dry_run: row.try_get("dry_run")?,
        trigger: row.try_get::<String, _>("triggered_by")?.parse()?,
        schedule_id: row.try_get("schedule_id")?,
        decisions_pruned: row.try_get("decisions_pruned")?,
        decisions_pruned_at: row.try_get("decisions_pruned_at")?,
    })
}

impl Store {
    /// Record the start of a run (status `running`).
    pub async fn insert_run(&self, run: &NewRun<'_>) -> Result<RunRecord, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO runs (cluster, cluster_revision, profile, status, started_at, dry_run, \
             triggered_by, schedule_id, cluster_incarnation) \
             VALUES (?, ?, ?, 'running', ?, ?, ?, ?, \
               COALESCE(?, (SELECT incarnation FROM clusters WHERE name = ?))) \
             RETURNING {COLUMNS}"
        )))
        .bind(run.cluster)
        .bind(run.cluster_revision)
        .bind(run.profile)
        .bind(now_ms())
        .bind(run.dry_run)
        .bind(run.trigger.as_str())
        .bind(run.schedule_id)
        .bind(run.cluster_incarnation)
        .bind(run.cluster)
        .fetch_one(&mut *tx)
        .await?;
        let record = run_from_row(&row)?;
        events::append_run(&mut tx, record.id, run.cluster, run.profile, "running").await?;
        tx.commit().await?;
        self.events_committed();
        Ok(record)
    }

    /// Finish a running run: its status, report and decisions, all in one transaction. A
    /// succeeded run's proposals supersede the open proposals of earlier runs (and earlier ones
    /// of its own) for the same pod, profile and cluster ([`supersede`]), in that transaction.
    pub async fn finish_run(&self, id: i64, end: RunEnd<'_>) -> Result<RunFinished, StoreError> {
        let now = now_ms();
        let mut superseded = Vec::new();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query(
            "SELECT r.cluster, r.profile, r.status, r.cluster_incarnation, r.dry_run, \
               (SELECT c.incarnation FROM clusters c WHERE c.name = r.cluster) AS current \
             FROM runs r WHERE r.id = ?",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("run {id}"),
        })?;
        let (cluster, profile): (String, String) =
            (row.try_get("cluster")?, row.try_get("profile")?);
        let dry_run: bool = row.try_get("dry_run")?;
        let status: RunStatus = row.try_get::<String, _>("status")?.parse()?;
        if status != RunStatus::Running {
            return Err(StoreError::corrupt(
                format!("run {id}"),
                format!("it is already {}", status.as_str()),
            ));
        }
        let ran_on: Option<i64> = row.try_get("cluster_incarnation")?;
        let current: Option<i64> = row.try_get("current")?;
        // `None`: recorded before runs knew their cluster's incarnation, or for a cluster that
        // did not exist (the store's own tests); the state commit below still checks by name.
        let replaced = ran_on.is_some_and(|ran_on| current != Some(ran_on));
        if replaced && matches!(end, RunEnd::Succeeded { .. }) {
            // Its proposals and policy state belong to a cluster that is gone: keep neither.
            let error = format!(
                "cluster \"{cluster}\" was deleted while the run was in progress; its proposals \
                 and policy state were not kept"
            );
            sqlx::query(
                "UPDATE runs SET status = 'failed', finished_at = ?, error = ? WHERE id = ?",
            )
            .bind(now)
            .bind(&error)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            events::append_run(&mut tx, id, &cluster, &profile, "failed").await?;
            tx.commit().await?;
            self.events_committed();
            return Err(StoreError::ClusterGone { run: id, cluster });
        }
        match end {
            RunEnd::Succeeded {
                report,
                decisions,
                state,
            } => {
                let conflicts =
                    super::state::commit(&mut tx, &cluster, &profile, id, state, now).await?;
                let (report, logs) = split_logs(&report(&conflicts));
                let mut proposed: Vec<i64> = Vec::with_capacity(decisions.len());
                for batch in decisions.chunks(DECISION_BATCH) {
                    let mut sql = String::from(
                        "INSERT INTO decisions (run_id, cluster, profile, plugin_set, plugin, \
                         pod_uid, pod_namespace, pod_name, node, reason, status, created_at, \
                         updated_at) VALUES ",
                    );
                    for i in 0..batch.len() {
                        sql.push_str(if i == 0 { "" } else { "," });
                        sql.push_str("(?,?,?,?,?,?,?,?,?,?,?,?,?)");
                    }
                    sql.push_str(" RETURNING id");
                    let mut query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql));
                    for d in batch {
                        query = query
                            .bind(id)
                            .bind(cluster.as_str())
                            .bind(profile.as_str())
                            .bind(d.plugin_set)
                            .bind(d.plugin)
                            .bind(d.pod_uid)
                            .bind(d.pod_namespace)
                            .bind(d.pod_name)
                            .bind(d.node)
                            .bind(d.reason)
                            .bind(DecisionStatus::Proposed.as_str())
                            .bind(now)
                            .bind(now);
                    }
                    proposed.extend(query.fetch_all(&mut *tx).await?);
                }
                if !decisions.is_empty() {
                    superseded = supersede(&mut tx, id, &cluster, &profile, dry_run, now).await?;
                }
                proposed.sort_unstable();
                let run = events::RunOf {
                    id,
                    profile: &profile,
                    dry_run,
                };
                events::append_run_decisions(
                    &mut tx,
                    &cluster,
                    DecisionStatus::Proposed.as_str(),
                    &proposed,
                    &run,
                )
                .await?;
                events::append_run_decisions(
                    &mut tx,
                    &cluster,
                    DecisionStatus::Superseded.as_str(),
                    &superseded,
                    &run,
                )
                .await?;
                sqlx::query(
                    "UPDATE runs SET status = 'succeeded', finished_at = ?, report = ? \
                     WHERE id = ?",
                )
                .bind(now)
                .bind(&report)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                if let Some(logs) = logs {
                    sqlx::query("INSERT INTO run_logs (run_id, logs) VALUES (?, ?)")
                        .bind(id)
                        .bind(logs)
                        .execute(&mut *tx)
                        .await?;
                }
                events::append_run(&mut tx, id, &cluster, &profile, "succeeded").await?;
            }
            RunEnd::Failed { error } => {
                sqlx::query(
                    "UPDATE runs SET status = 'failed', finished_at = ?, error = ? WHERE id = ?",
                )
                .bind(now)
                .bind(error)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                events::append_run(&mut tx, id, &cluster, &profile, "failed").await?;
            }
        }
        tx.commit().await?;
        self.events_committed();
        Ok(RunFinished {
            finished_at: now,
            superseded,
        })
    }

    pub async fn get_run(&self, id: i64) -> Result<RunRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM runs WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("run {id}"),
        })?;
        run_from_row(&row)
    }

    /// Runs, newest first: at most `limit`, with ids below `before` when given.
    pub async fn list_runs(
        &self,
        limit: u32,
        before: Option<i64>,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM runs WHERE id < ? ORDER BY id DESC LIMIT ?"
        )))
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(run_from_row).collect()
    }

    /// When each run of `cluster` still stored started, oldest first.
    pub async fn run_starts(&self, cluster: &str) -> Result<Vec<i64>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT started_at FROM runs WHERE cluster = ? ORDER BY id")
                .bind(cluster)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Mark runs left `running` by a previous process as failed. Returns how many there were.
    pub async fn fail_interrupted_runs(&self, error: &str) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let failed: Vec<(i64, String, String)> = sqlx::query_as(
            "UPDATE runs SET status = 'failed', finished_at = ?, error = ? \
             WHERE status = 'running' RETURNING id, cluster, profile",
        )
        .bind(now_ms())
        .bind(error)
        .fetch_all(&mut *tx)
        .await?;
        for (id, cluster, profile) in &failed {
            events::append_run(&mut tx, *id, cluster, profile, "failed").await?;
        }
        tx.commit().await?;
        self.events_committed();
        Ok(failed.len() as u64)
    }
}

/// Supersede the open proposals that run `run`'s proposals replace: for each pod the run
/// proposed, every other `proposed` decision of the same cluster, profile and pod uid with a
/// lower id than the run's newest one for the pod becomes `superseded`, linked to that newest
/// one, with a history entry by [`SUPERSEDE_ACTOR`]. A dry run's proposals supersede only
/// dry-run proposals (a dry run must not empty the queue of approvable ones); a real run's
/// supersede both. Three statements whatever the number. Returns the ids superseded.
async fn supersede(
    conn: &mut sqlx::SqliteConnection,
    run: i64,
    cluster: &str,
    profile: &str,
    dry_run: bool,
    now: i64,
) -> Result<Vec<i64>, StoreError> {
    // Pairs (old, newer) in a temporary table, so the history and the update agree.
    sqlx::query("DROP TABLE IF EXISTS temp.superseding")
        .execute(&mut *conn)
        .await?;
    sqlx::query("CREATE TEMP TABLE superseding (id INTEGER PRIMARY KEY, newer INTEGER NOT NULL)")
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO superseding (id, newer) \
         SELECT o.id, n.id FROM \
           (SELECT pod_uid, MAX(id) AS id FROM decisions WHERE run_id = ? GROUP BY pod_uid) n \
         JOIN decisions o \
           ON o.cluster = ? AND o.profile = ? AND o.pod_uid = n.pod_uid \
           AND o.status = 'proposed' AND o.id < n.id \
         WHERE ? = 0 OR (SELECT dry_run FROM runs WHERE runs.id = o.run_id) = 1",
    )
    .bind(run)
    .bind(cluster)
    .bind(profile)
    .bind(dry_run)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO decision_events (decision_id, from_status, to_status, actor, comment, time) \
         SELECT id, 'proposed', 'superseded', ?, \
           'superseded by decision ' || newer || ' (run ' || ? || ')', ? \
         FROM superseding ORDER BY id",
    )
    .bind(SUPERSEDE_ACTOR)
    .bind(run)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    let ids: Vec<i64> = sqlx::query_scalar(
        "UPDATE decisions SET status = 'superseded', \
           superseded_by = (SELECT newer FROM superseding s WHERE s.id = decisions.id), \
           status_reason = 'superseded: run ' || ? || ' proposed pod ' || pod_namespace || '/' \
             || pod_name || ' again (decision ' \
             || (SELECT newer FROM superseding s WHERE s.id = decisions.id) || ')', \
           updated_at = ? \
         WHERE id IN (SELECT id FROM superseding) RETURNING id",
    )
    .bind(run)
    .bind(now)
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query("DROP TABLE temp.superseding")
        .execute(&mut *conn)
        .await?;
    let mut ids = ids;
    ids.sort_unstable();
    Ok(ids)
}

/// A report (JSON text) without its policies' log lines, and those lines (a JSON array of each
/// policy's `logs`, in order) when any policy logged something. Text that is not a report with
/// `policies` is kept whole.
pub(crate) fn split_logs(report: &str) -> (String, Option<String>) {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(report) else {
        return (report.to_string(), None);
    };
    let Some(policies) = value.get_mut("policies").and_then(|p| p.as_array_mut()) else {
        return (report.to_string(), None);
    };
    let logs: Vec<serde_json::Value> = policies
        .iter_mut()
        .map(|p| match p.get_mut("logs") {
            Some(logs) => std::mem::replace(logs, serde_json::Value::Array(Vec::new())),
            None => serde_json::Value::Array(Vec::new()),
        })
        .collect();
    if logs.iter().all(|l| l.as_array().is_some_and(Vec::is_empty)) {
        return (report.to_string(), None);
    }
    (
        value.to_string(),
        Some(serde_json::Value::Array(logs).to_string()),
    )
}

/// Put each policy's log lines from `logs` (as [`split_logs`] made them) back into `report`.
fn put_logs_back(report: &mut serde_json::Value, logs: serde_json::Value) {
    let (Some(policies), serde_json::Value::Array(logs)) = (
        report.get_mut("policies").and_then(|p| p.as_array_mut()),
        logs,
    ) else {
        return;
    };
    for (policy, lines) in policies.iter_mut().zip(logs) {
        if let Some(slot) = policy.get_mut("logs") {
            *slot = lines;
        }
    }
}
