//! Transitions between decisions and pod migrations: the one place where a status change of one
//! touches the other, each in one `BEGIN IMMEDIATE` transaction.
//!
//! Owns: approving and rejecting (one, each of a list, every match of a filter, with a preview) — the decision becomes
//! `approved` and its pod migration is created in the same transaction, exactly once however many
//! approvals race —, rejecting, expiring proposals past the proposal TTL, and applying a pod
//! migration's step change together with its events and its decision's status change.
//! Every change here appends its change-feed event ([`super::events`]) in its transaction: one
//! `decisions` event per batch (one per cluster), a `migration` event per step applied.
//! Must not: decide policy (who may approve, TTLs, templates come from the caller) or wake
//! anything but the change feed's streams: callers commit here, then wake the executor and
//! write the audit log.

use std::collections::HashMap;

use sqlx::Row;

use super::decisions::{
    COLUMNS, DecisionFilter, DecisionRecord, DecisionStatus, decision_from_row,
};
use super::events::{self, EventKind};
use super::pod_migrations::{FIRST_STEP, MigrationChange, MigrationPhase, NewEvent, insert_event};
use super::{Store, StoreError, now_ms};

/// How the pod migration an approval creates starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationTemplate {
    /// `ReservationFirst` or `EvictDirectly`.
    pub mode: String,
    /// 0: no TTL.
    pub ttl_ms: i64,
}

/// The templates of new pod migrations: one for each cluster with its own arbitration knobs,
/// and one for every other cluster. An approval picks the one of its decision's cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationTemplates {
    pub default: MigrationTemplate,
    pub clusters: HashMap<String, MigrationTemplate>,
}

impl MigrationTemplates {
    /// The template of pod migrations in `cluster`.
    pub fn for_cluster(&self, cluster: &str) -> &MigrationTemplate {
        self.clusters.get(cluster).unwrap_or(&self.default)
    }
}

/// The outcome of approving one decision.
#[derive(Clone, Debug, PartialEq)]
pub enum Approval {
    /// Approved now; `pod_migration` is the pod migration created with it.
    Approved {
        decision: DecisionRecord,
        pod_migration: i64,
    },
    /// Not `proposed` (any more): nothing changed, except that a proposal past its TTL was
    /// marked `expired` on the way.
    NotProposed(DecisionRecord),
    /// Proposed by a dry run: can never be approved.
    DryRun(DecisionRecord),
}

/// The outcome of rejecting one decision: `Err` holds the decision when it was not `proposed`.
pub type Rejection = Result<DecisionRecord, DecisionRecord>;

/// What a bulk approval or rejection does to the decisions it acts on.
#[derive(Clone, Copy, Debug)]
pub enum BulkAction<'a> {
    /// Approve them, each with a pod migration made from its cluster's template.
    Approve(&'a MigrationTemplates),
    Reject,
}

/// Most decisions a bulk outcome shows whole ([`BulkOutcome::sample`]).
pub const BULK_SAMPLE: usize = 50;

/// What a bulk approval or rejection matched and did (or, in a preview, would do).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BulkOutcome {
    /// Decisions matching the filter, whatever their status.
    pub matched: u64,
    /// Ids approved or rejected by this call (would be, in a preview), newest first.
    pub acted: Vec<i64>,
    /// Proposals found past their TTL, marked expired instead (would be, in a preview).
    pub expired: u64,
    /// Proposals of dry runs (never approvable), left alone.
    pub dry_run: u64,
    /// Matched but not `proposed` (approved, rejected, superseded… before).
    pub not_proposed: u64,
    /// The first [`BULK_SAMPLE`] of `acted`, whole, as they are after the call.
    pub sample: Vec<DecisionRecord>,
}

/// Actor of expiries.
pub const EXPIRY_ACTOR: &str = "system:expiry";

type Conn = sqlx::SqliteConnection;

async fn insert_decision_event(
    conn: &mut Conn,
    id: i64,
    from: DecisionStatus,
    to: DecisionStatus,
    actor: &str,
    comment: Option<&str>,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO decision_events (decision_id, from_status, to_status, actor, comment, time) \
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(id)
    .bind(from.as_str())
    .bind(to.as_str())
    .bind(actor)
    .bind(comment)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A status change of a decision.
pub(crate) struct Transition<'a> {
    /// Applies only when the decision is in one of these.
    pub from: &'a [DecisionStatus],
    pub to: DecisionStatus,
    pub actor: &'a str,
    pub comment: Option<&'a str>,
    /// Becomes the decision's `status_reason` (kept when `None`).
    pub reason: Option<&'a str>,
}

/// Apply `t` to decision `id` (with an event); returns whether it moved.
pub(crate) async fn transition_decision(
    conn: &mut Conn,
    id: i64,
    t: &Transition<'_>,
    now: i64,
) -> Result<bool, StoreError> {
    let Transition {
        from,
        to,
        actor,
        comment,
        reason,
    } = *t;
    let current: Option<(String, String)> =
        sqlx::query_as("SELECT status, cluster FROM decisions WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((current, cluster)) = current else {
        return Ok(false);
    };
    let current: DecisionStatus = current
        .parse()
        .map_err(|e| StoreError::corrupt("decision status", e))?;
    if !from.contains(&current) {
        return Ok(false);
    }
    sqlx::query(
        "UPDATE decisions SET status = ?, status_reason = COALESCE(?, status_reason), \
         updated_at = ? WHERE id = ?",
    )
    .bind(to.as_str())
    .bind(reason)
    .bind(now)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    insert_decision_event(conn, id, current, to, actor, comment, now).await?;
    events::append_decisions(conn, &cluster, to.as_str(), &[id]).await?;
    Ok(true)
}

/// Most proposals the expiry sweep marks in one transaction.
pub(crate) const EXPIRY_BATCH: i64 = 5_000;

/// Mark the proposals among `ids` (all proposals when `None`) created at or before
/// `expire_before` as expired. Returns how many.
async fn expire_in_tx(
    conn: &mut Conn,
    ids: Option<&[i64]>,
    expire_before: i64,
    now: i64,
) -> Result<u64, StoreError> {
    match ids {
        Some([]) => Ok(0),
        Some(ids) => {
            let ids = serde_json::Value::from(ids.to_vec()).to_string();
            expire_where(
                conn,
                "status = 'proposed' AND created_at <= ? AND id IN (SELECT value FROM json_each(?))",
                &[Bound::Int(expire_before), Bound::Text(&ids)],
                now,
            )
            .await
        }
        None => {
            expire_where(
                conn,
                "status = 'proposed' AND created_at <= ?",
                &[Bound::Int(expire_before)],
                now,
            )
            .await
        }
    }
}

/// A value bound to a `?` of a filter.
#[derive(Clone, Copy)]
enum Bound<'a> {
    Int(i64),
    Text(&'a str),
}

fn bind_all<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    values: &[Bound<'q>],
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    for value in values {
        query = match *value {
            Bound::Int(v) => query.bind(v),
            Bound::Text(v) => query.bind(v),
        };
    }
    query
}

/// Mark every decision matching `filter` (a fixed SQL condition over `decisions` that implies
/// `status = 'proposed'`, with `values` for its `?`s) expired by the TTL, with one event each:
/// two statements whatever the number, so a sweep over a large cluster's run takes
/// milliseconds of the write lock instead of a round trip per decision.
async fn expire_where(
    conn: &mut Conn,
    filter: &'static str,
    values: &[Bound<'_>],
    now: i64,
) -> Result<u64, StoreError> {
    // The events first: the update below changes what `filter` matches.
    let events = format!(
        "INSERT INTO decision_events (decision_id, from_status, to_status, actor, comment, time) \
         SELECT id, 'proposed', 'expired', ?, NULL, ? FROM decisions WHERE {filter}"
    );
    let query = sqlx::query(sqlx::AssertSqlSafe(events))
        .bind(EXPIRY_ACTOR)
        .bind(now);
    bind_all(query, values).execute(&mut *conn).await?;
    let update = format!(
        "UPDATE decisions SET status = 'expired', \
           status_reason = 'expired: not approved within the proposal TTL (' \
             || ((? - created_at) / 1000) || ' s since it was proposed)', \
           updated_at = ? \
         WHERE {filter}"
    );
    let update = format!("{update} RETURNING id, cluster");
    let query = sqlx::query(sqlx::AssertSqlSafe(update)).bind(now).bind(now);
    let rows = bind_all(query, values).fetch_all(&mut *conn).await?;
    announce_expired(conn, &rows).await
}

/// One `decisions` event per cluster for the rows (`id`, `cluster`) an expiry just marked.
/// Returns how many.
async fn announce_expired(
    conn: &mut Conn,
    rows: &[sqlx::sqlite::SqliteRow],
) -> Result<u64, StoreError> {
    let expired = rows
        .iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get("cluster")?)))
        .collect::<Result<Vec<(i64, String)>, sqlx::Error>>()?;
    events::append_decisions_by_cluster(conn, DecisionStatus::Expired.as_str(), &expired).await?;
    Ok(expired.len() as u64)
}

/// Mark every proposal of `cluster` expired with `reason`, in the caller's transaction.
/// Returns how many.
pub(crate) async fn expire_cluster_proposals(
    conn: &mut Conn,
    cluster: &str,
    actor: &str,
    reason: &str,
    now: i64,
) -> Result<u64, StoreError> {
    expire_open_proposals(conn, "cluster", cluster, actor, reason, now).await
}

/// Mark every proposal of `profile` expired with `reason`, in the caller's transaction.
/// Returns how many.
pub(crate) async fn expire_profile_proposals(
    conn: &mut Conn,
    profile: &str,
    actor: &str,
    reason: &str,
    now: i64,
) -> Result<u64, StoreError> {
    expire_open_proposals(conn, "profile", profile, actor, reason, now).await
}

/// Mark every proposal whose `column` (a fixed name) is `value` expired, with one event
/// each, in two statements.
async fn expire_open_proposals(
    conn: &mut Conn,
    column: &'static str,
    value: &str,
    actor: &str,
    reason: &str,
    now: i64,
) -> Result<u64, StoreError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO decision_events (decision_id, from_status, to_status, actor, comment, time) \
         SELECT id, 'proposed', 'expired', ?, NULL, ? FROM decisions \
         WHERE status = 'proposed' AND {column} = ?"
    )))
    .bind(actor)
    .bind(now)
    .bind(value)
    .execute(&mut *conn)
    .await?;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE decisions SET status = 'expired', status_reason = ?, updated_at = ? \
         WHERE status = 'proposed' AND {column} = ? RETURNING id, cluster"
    )))
    .bind(reason)
    .bind(now)
    .bind(value)
    .fetch_all(&mut *conn)
    .await?;
    announce_expired(conn, &rows).await
}

/// Approve one proposed decision of a non-dry run (with its event and pod migration), in the
/// caller's transaction. Returns the pod migration id, or `None` when it was not approvable.
async fn approve_in_tx(
    conn: &mut Conn,
    id: i64,
    actor: &str,
    comment: Option<&str>,
    templates: &MigrationTemplates,
    now: i64,
) -> Result<Option<(DecisionRecord, i64)>, StoreError> {
    // The conditional UPDATE is what makes concurrent approvals safe: only one of them sees
    // `proposed`; the unique index on pod_migrations.decision_id backs it up.
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE decisions SET status = 'approved', updated_at = ? \
         WHERE id = ? AND status = 'proposed' \
         AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = decisions.run_id AND runs.dry_run = 1) \
         RETURNING {COLUMNS}"
    )))
    .bind(now)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let decision = decision_from_row(&row)?;
    insert_decision_event(
        conn,
        id,
        DecisionStatus::Proposed,
        DecisionStatus::Approved,
        actor,
        comment,
        now,
    )
    .await?;
    let migration = insert_for_decision(conn, &decision, actor, templates, now).await?;
    Ok(Some((decision, migration)))
}

/// Create the pod migration of a decision just approved (in the approval's transaction).
pub(crate) async fn insert_for_decision(
    conn: &mut sqlx::SqliteConnection,
    decision: &DecisionRecord,
    actor: &str,
    templates: &MigrationTemplates,
    now: i64,
) -> Result<i64, StoreError> {
    let template = templates.for_cluster(&decision.cluster);
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO pod_migrations (decision_id, cluster, pod_uid, pod_namespace, pod_name, \
         mode, phase, step, status, reason, message, source_node, ttl_ms, created_at, \
         updated_at) VALUES (?, ?, ?, ?, ?, ?, 'Pending', ?, '', 'Created', ?, ?, ?, ?, ?) \
         RETURNING id",
    )
    .bind(decision.id)
    .bind(&decision.cluster)
    .bind(&decision.pod_uid)
    .bind(&decision.pod_namespace)
    .bind(&decision.pod_name)
    .bind(&template.mode)
    .bind(FIRST_STEP)
    .bind("waiting for arbitration")
    .bind(&decision.node)
    .bind(template.ttl_ms)
    .bind(now)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    insert_event(
        conn,
        id,
        &NewEvent::normal(
            "Created",
            format!(
                "pod migration of pod {}/{} from node {} ({}) created: decision {} approved by {actor}",
                decision.pod_namespace, decision.pod_name, decision.node, template.mode, decision.id
            ),
        ),
        now,
    )
    .await?;
    Ok(id)
}

/// `[1,2,3]`: ids for a `json_each(?)`.
fn json_ids(ids: &[i64]) -> String {
    serde_json::Value::from(ids.to_vec()).to_string()
}

/// Approve the decisions `ids` that are `proposed` and not of a dry run, each with its history
/// entry and its pod migration (with its `Created` event), in set-based statements. Returns
/// the ids approved, newest first.
async fn approve_all(
    conn: &mut Conn,
    ids: &[i64],
    actor: &str,
    comment: Option<&str>,
    templates: &MigrationTemplates,
    now: i64,
) -> Result<Vec<i64>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let approved: Vec<(i64, String)> = sqlx::query_as(
        "UPDATE decisions SET status = 'approved', updated_at = ? \
         WHERE id IN (SELECT value FROM json_each(?)) AND status = 'proposed' \
         AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = decisions.run_id AND runs.dry_run = 1) \
         RETURNING id, cluster",
    )
    .bind(now)
    .bind(json_ids(ids))
    .fetch_all(&mut *conn)
    .await?;
    let mut by_cluster: HashMap<&str, Vec<i64>> = HashMap::new();
    for (id, cluster) in &approved {
        by_cluster.entry(cluster).or_default().push(*id);
    }
    let mut all: Vec<i64> = approved.iter().map(|(id, _)| *id).collect();
    all.sort_unstable_by(|a, b| b.cmp(a));
    sqlx::query(
        "INSERT INTO decision_events (decision_id, from_status, to_status, actor, comment, time) \
         SELECT value, 'proposed', 'approved', ?, ?, ? FROM json_each(?) ORDER BY value",
    )
    .bind(actor)
    .bind(comment)
    .bind(now)
    .bind(json_ids(&all))
    .execute(&mut *conn)
    .await?;
    for (cluster, ids) in by_cluster {
        let template = templates.for_cluster(cluster);
        sqlx::query(
            "INSERT INTO pod_migrations (decision_id, cluster, pod_uid, pod_namespace, pod_name, \
             mode, phase, step, status, reason, message, source_node, ttl_ms, created_at, \
             updated_at) \
             SELECT id, cluster, pod_uid, pod_namespace, pod_name, ?, 'Pending', ?, '', \
               'Created', 'waiting for arbitration', node, ?, ?, ? \
             FROM decisions WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
        )
        .bind(&template.mode)
        .bind(FIRST_STEP)
        .bind(template.ttl_ms)
        .bind(now)
        .bind(now)
        .bind(json_ids(&ids))
        .execute(&mut *conn)
        .await?;
    }
    // The same words as `insert_for_decision`'s event.
    sqlx::query(
        "INSERT INTO pod_migration_events (pod_migration_id, time, type, reason, message) \
         SELECT id, ?, 'Normal', 'Created', 'pod migration of pod ' || pod_namespace || '/' \
           || pod_name || ' from node ' || source_node || ' (' || mode || ') created: decision ' \
           || decision_id || ' approved by ' || ? \
         FROM pod_migrations WHERE decision_id IN (SELECT value FROM json_each(?)) ORDER BY id",
    )
    .bind(now)
    .bind(actor)
    .bind(json_ids(&all))
    .execute(&mut *conn)
    .await?;
    Ok(all)
}

/// Reject the decisions `ids` that are `proposed`, each with its history entry, in two
/// statements. Returns the ids rejected, newest first.
async fn reject_all(
    conn: &mut Conn,
    ids: &[i64],
    actor: &str,
    comment: Option<&str>,
    now: i64,
) -> Result<Vec<i64>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut rejected: Vec<i64> = sqlx::query_scalar(
        "UPDATE decisions SET status = 'rejected', status_reason = 'rejected by ' || ?, \
           updated_at = ? \
         WHERE id IN (SELECT value FROM json_each(?)) AND status = 'proposed' RETURNING id",
    )
    .bind(actor)
    .bind(now)
    .bind(json_ids(ids))
    .fetch_all(&mut *conn)
    .await?;
    rejected.sort_unstable_by(|a, b| b.cmp(a));
    sqlx::query(
        "INSERT INTO decision_events (decision_id, from_status, to_status, actor, comment, time) \
         SELECT value, 'proposed', 'rejected', ?, ?, ? FROM json_each(?) ORDER BY value",
    )
    .bind(actor)
    .bind(comment)
    .bind(now)
    .bind(json_ids(&rejected))
    .execute(&mut *conn)
    .await?;
    Ok(rejected)
}

impl Store {
    /// Approve a proposed decision and create its pod migration, atomically. A proposal created
    /// at or before `expire_before` is marked expired instead.
    pub async fn approve_decision(
        &self,
        id: i64,
        actor: &str,
        comment: Option<&str>,
        expire_before: i64,
        templates: &MigrationTemplates,
    ) -> Result<Approval, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        expire_in_tx(&mut tx, Some(&[id]), expire_before, now).await?;
        let approved = approve_in_tx(&mut tx, id, actor, comment, templates, now).await?;
        if let Some((decision, _)) = &approved {
            events::append_decisions(
                &mut tx,
                &decision.cluster,
                DecisionStatus::Approved.as_str(),
                &[id],
            )
            .await?;
        }
        tx.commit().await?;
        self.events_committed();
        if let Some((decision, pod_migration)) = approved {
            return Ok(Approval::Approved {
                decision,
                pod_migration,
            });
        }
        let decision = self.get_decision(id).await?;
        if decision.status == DecisionStatus::Proposed {
            Ok(Approval::DryRun(decision))
        } else {
            Ok(Approval::NotProposed(decision))
        }
    }

    /// Approve several decisions, each with its own actor (auto-approve rules), in one
    /// transaction. Returns `(decision, pod migration)` for those approved.
    pub async fn approve_each(
        &self,
        approvals: &[(i64, String)],
        expire_before: i64,
        templates: &MigrationTemplates,
    ) -> Result<Vec<(i64, i64)>, StoreError> {
        if approvals.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let ids: Vec<i64> = approvals.iter().map(|(id, _)| *id).collect();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        expire_in_tx(&mut tx, Some(&ids), expire_before, now).await?;
        let mut done = Vec::new();
        let mut approved = Vec::new();
        for (id, actor) in approvals {
            if let Some((decision, migration)) =
                approve_in_tx(&mut tx, *id, actor, None, templates, now).await?
            {
                done.push((*id, migration));
                approved.push((*id, decision.cluster));
            }
        }
        events::append_decisions_by_cluster(&mut tx, DecisionStatus::Approved.as_str(), &approved)
            .await?;
        tx.commit().await?;
        self.events_committed();
        Ok(done)
    }

    /// Approve or reject (`action`) every proposed decision of a non-dry run matching `filter`
    /// (its `status` is ignored) that is within the proposal TTL, in one transaction; proposals
    /// past the TTL are marked expired on the way. With `preview`, nothing changes and the
    /// answer is what would happen. A fixed number of statements whatever the number of
    /// decisions (one per cluster for the pod migrations an approval creates).
    pub async fn act_on_matching(
        &self,
        filter: &DecisionFilter,
        action: BulkAction<'_>,
        actor: &str,
        comment: Option<&str>,
        expire_before: i64,
        preview: bool,
    ) -> Result<BulkOutcome, StoreError> {
        let filter = DecisionFilter {
            status: None,
            ..filter.clone()
        };
        let now = now_ms();
        let mut tx = if preview {
            self.pool.begin().await?
        } else {
            self.pool.begin_with("BEGIN IMMEDIATE").await?
        };
        let mut sql = String::from(
            "SELECT id, status, created_at, \
             (SELECT dry_run FROM runs WHERE runs.id = decisions.run_id) AS dry_run \
             FROM decisions WHERE 1 = 1",
        );
        filter.conditions(&mut sql);
        sql.push_str(" ORDER BY id DESC");
        let rows: Vec<(i64, String, i64, Option<bool>)> = filter
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| {
                Ok::<_, StoreError>((
                    r.try_get("id")?,
                    r.try_get("status")?,
                    r.try_get("created_at")?,
                    r.try_get("dry_run")?,
                ))
            })
            .collect::<Result<_, _>>()?;
        let mut outcome = BulkOutcome {
            matched: rows.len() as u64,
            ..BulkOutcome::default()
        };
        let mut expired = Vec::new();
        let mut act = Vec::new();
        for (id, status, created_at, dry_run) in rows {
            if status != DecisionStatus::Proposed.as_str() {
                outcome.not_proposed += 1;
            } else if created_at <= expire_before {
                expired.push(id);
            } else if dry_run.unwrap_or(false) {
                outcome.dry_run += 1;
            } else {
                act.push(id);
            }
        }
        outcome.expired = expired.len() as u64;
        if !preview {
            expire_in_tx(&mut tx, Some(&expired), expire_before, now).await?;
            act = match action {
                BulkAction::Approve(templates) => {
                    approve_all(&mut tx, &act, actor, comment, templates, now).await?
                }
                BulkAction::Reject => reject_all(&mut tx, &act, actor, comment, now).await?,
            };
        }
        let sample = &act[..act.len().min(BULK_SAMPLE)];
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM decisions WHERE id IN (SELECT value FROM json_each(?)) \
             ORDER BY id DESC"
        )))
        .bind(json_ids(sample))
        .fetch_all(&mut *tx)
        .await?;
        outcome.sample = rows
            .iter()
            .map(decision_from_row)
            .collect::<Result<_, _>>()?;
        if preview {
            tx.rollback().await?;
        } else {
            let pairs: Vec<(i64, String)> = sqlx::query_as(
                "SELECT id, cluster FROM decisions WHERE id IN (SELECT value FROM json_each(?))",
            )
            .bind(json_ids(&act))
            .fetch_all(&mut *tx)
            .await?;
            let status = match action {
                BulkAction::Approve(_) => DecisionStatus::Approved,
                BulkAction::Reject => DecisionStatus::Rejected,
            };
            events::append_decisions_by_cluster(&mut tx, status.as_str(), &pairs).await?;
            tx.commit().await?;
            self.events_committed();
        }
        outcome.acted = act;
        Ok(outcome)
    }

    /// Reject a proposed decision (a proposal past its TTL is marked expired instead).
    pub async fn reject_decision(
        &self,
        id: i64,
        actor: &str,
        comment: Option<&str>,
        expire_before: i64,
    ) -> Result<Rejection, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        expire_in_tx(&mut tx, Some(&[id]), expire_before, now).await?;
        let moved = transition_decision(
            &mut tx,
            id,
            &Transition {
                from: &[DecisionStatus::Proposed],
                to: DecisionStatus::Rejected,
                actor,
                comment,
                reason: Some(&format!("rejected by {actor}")),
            },
            now,
        )
        .await?;
        tx.commit().await?;
        self.events_committed();
        let decision = self.get_decision(id).await?;
        Ok(if moved { Ok(decision) } else { Err(decision) })
    }

    /// Mark every proposal created at or before `expire_before` as expired. Returns how many.
    pub async fn expire_proposals(&self, expire_before: i64) -> Result<u64, StoreError> {
        // Cheap check first: most sweeps find nothing and need no write lock.
        let any: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM decisions WHERE status = 'proposed' AND created_at <= ? LIMIT 1",
        )
        .bind(expire_before)
        .fetch_optional(&self.pool)
        .await?;
        if any.is_none() {
            return Ok(0);
        }
        // In transactions of at most EXPIRY_BATCH, so that API writes get in between.
        let mut total = 0;
        loop {
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            let n = expire_where(
                &mut tx,
                "id IN (SELECT id FROM decisions WHERE status = 'proposed' AND created_at <= ? \
                 ORDER BY id LIMIT ?)",
                &[Bound::Int(expire_before), Bound::Int(EXPIRY_BATCH)],
                now_ms(),
            )
            .await?;
            tx.commit().await?;
            self.events_committed();
            total += n;
            if n < EXPIRY_BATCH as u64 {
                return Ok(total);
            }
        }
    }

    /// Apply `change` to pod migration `id` if it is still unfinished and at step
    /// `expect_step`, with its events and decision change, in one transaction. Returns whether
    /// it applied (false: someone else moved it first, e.g. an abort). A change that names a
    /// replacement (`new_pod_uid`) claims it for this pod migration in the same transaction; if
    /// another pod migration of the cluster holds the claim, nothing is applied and the answer
    /// is [`StoreError::ReplacementClaimed`].
    pub async fn change_pod_migration(
        &self,
        id: i64,
        expect_step: &str,
        change: &MigrationChange,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // The phase before the change, for the event (webhooks announce phase changes).
        let from: Option<String> =
            sqlx::query_scalar("SELECT phase FROM pod_migrations WHERE id = ?")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let row: Option<(i64, String, String, String)> = sqlx::query_as(
            "UPDATE pod_migrations SET \
               step = COALESCE(?, step), phase = COALESCE(?, phase), \
               status = COALESCE(?, status), reason = COALESCE(?, reason), \
               message = COALESCE(?, message), target_node = COALESCE(?, target_node), \
               reservation = COALESCE(?, reservation), \
               reservation_kind = COALESCE(?, reservation_kind), \
               reservation_released = MAX(reservation_released, ?), \
               new_pod_uid = COALESCE(?, new_pod_uid), new_pod_name = COALESCE(?, new_pod_name), \
               new_pod_node = COALESCE(?, new_pod_node), workload = COALESCE(?, workload), \
               started_at = COALESCE(?, started_at), \
               eviction_requested_at = COALESCE(?, eviction_requested_at), \
               evicted_at = COALESCE(?, evicted_at), finished_at = COALESCE(?, finished_at), \
               updated_at = ? \
             WHERE id = ? AND step = ? AND phase IN ('Pending', 'Running') \
             RETURNING decision_id, cluster, phase, step",
        )
        .bind(change.step.as_deref())
        .bind(change.phase.map(MigrationPhase::as_str))
        .bind(change.status.as_deref())
        .bind(change.reason.as_deref())
        .bind(change.message.as_deref())
        .bind(change.target_node.as_deref())
        .bind(change.reservation.as_deref())
        .bind(change.reservation_kind.as_deref())
        .bind(change.reservation_released)
        .bind(change.new_pod_uid.as_deref())
        .bind(change.new_pod_name.as_deref())
        .bind(change.new_pod_node.as_deref())
        .bind(change.workload.as_deref())
        .bind(change.started_at)
        .bind(change.eviction_requested_at)
        .bind(change.evicted_at)
        .bind(change.finished_at)
        .bind(now)
        .bind(id)
        .bind(expect_step)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((decision_id, cluster, phase, step)) = row else {
            return Ok(false);
        };
        if let Some(pod_uid) = &change.new_pod_uid {
            sqlx::query(
                "INSERT INTO replacement_claims (cluster, pod_uid, pod_migration_id, claimed_at) \
                 VALUES (?, ?, ?, ?) ON CONFLICT (cluster, pod_uid) DO NOTHING",
            )
            .bind(&cluster)
            .bind(pod_uid)
            .bind(id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let (by,): (i64,) = sqlx::query_as(
                "SELECT pod_migration_id FROM replacement_claims WHERE cluster = ? AND pod_uid = ?",
            )
            .bind(&cluster)
            .bind(pod_uid)
            .fetch_one(&mut *tx)
            .await?;
            if by != id {
                tx.rollback().await?;
                return Err(StoreError::ReplacementClaimed {
                    pod_uid: pod_uid.clone(),
                    by,
                });
            }
        }
        for event in &change.events {
            insert_event(&mut tx, id, event, now).await?;
        }
        if let Some(d) = &change.decision {
            transition_decision(
                &mut tx,
                decision_id,
                &Transition {
                    from: &d.from,
                    to: d.to,
                    actor: &d.actor,
                    comment: d.comment.as_deref(),
                    reason: d.reason.as_deref(),
                },
                now,
            )
            .await?;
        }
        let data = serde_json::json!({
            "id": id, "decision": decision_id, "cluster": cluster, "phase": phase, "step": step,
            "from": from,
        });
        events::append_event(&mut tx, EventKind::Migration, Some(&cluster), &data).await?;
        tx.commit().await?;
        self.events_committed();
        Ok(true)
    }
}
