//! Decisions: every proposal of a run, with the status it has reached since.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{Store, StoreError, now_ms};

/// A decision's life: `proposed → approved | rejected | expired → executing → succeeded | failed`.
/// Runs create `proposed` decisions; the other states belong to approval and pod migrations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionStatus {
    Proposed,
    Approved,
    Rejected,
    Expired,
    Executing,
    Succeeded,
    Failed,
}

impl DecisionStatus {
    pub const ALL: [DecisionStatus; 7] = [
        DecisionStatus::Proposed,
        DecisionStatus::Approved,
        DecisionStatus::Rejected,
        DecisionStatus::Expired,
        DecisionStatus::Executing,
        DecisionStatus::Succeeded,
        DecisionStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DecisionStatus::Proposed => "proposed",
            DecisionStatus::Approved => "approved",
            DecisionStatus::Rejected => "rejected",
            DecisionStatus::Expired => "expired",
            DecisionStatus::Executing => "executing",
            DecisionStatus::Succeeded => "succeeded",
            DecisionStatus::Failed => "failed",
        }
    }
}

/// Unknown decision status name.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown decision status `{0}` (expected proposed, approved, rejected, expired, executing, succeeded or failed)"
)]
pub struct UnknownStatus(pub String);

impl FromStr for DecisionStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DecisionStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

/// A proposal to record with a run (borrowed from the run's report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewDecision<'a> {
    pub plugin_set: &'a str,
    pub plugin: &'a str,
    pub pod_uid: &'a str,
    pub pod_namespace: &'a str,
    pub pod_name: &'a str,
    pub node: &'a str,
    pub reason: &'a str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionRecord {
    pub id: i64,
    pub run_id: i64,
    pub cluster: String,
    pub profile: String,
    pub plugin_set: String,
    pub plugin: String,
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub node: String,
    pub reason: String,
    pub status: DecisionStatus,
    /// Why it ended where it did (expired, failed as stale, …).
    pub status_reason: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Which decisions to list, in id order, starting after `after`. Every field narrows.
#[derive(Clone, Debug, Default)]
pub struct DecisionFilter {
    pub run: Option<i64>,
    pub status: Option<DecisionStatus>,
    pub plugin: Option<String>,
    pub namespace: Option<String>,
    pub node: Option<String>,
    pub cluster: Option<String>,
    pub profile: Option<String>,
    pub ids: Option<Vec<i64>>,
    pub after: Option<i64>,
}

impl DecisionFilter {
    /// ` AND …` conditions (fixed fragments; values are bound by [`DecisionFilter::bind`]).
    fn conditions(&self, sql: &mut String) {
        for (present, fragment) in [
            (self.run.is_some(), " AND run_id = ?"),
            (self.status.is_some(), " AND status = ?"),
            (self.plugin.is_some(), " AND plugin = ?"),
            (self.namespace.is_some(), " AND pod_namespace = ?"),
            (self.node.is_some(), " AND node = ?"),
            (self.cluster.is_some(), " AND cluster = ?"),
            (self.profile.is_some(), " AND profile = ?"),
        ] {
            if present {
                sql.push_str(fragment);
            }
        }
        if self.ids.is_some() {
            sql.push_str(" AND id IN (SELECT value FROM json_each(?))");
        }
    }

    fn bind<'q>(
        &'q self,
        mut query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
        if let Some(run) = self.run {
            query = query.bind(run);
        }
        if let Some(status) = self.status {
            query = query.bind(status.as_str());
        }
        for value in [
            &self.plugin,
            &self.namespace,
            &self.node,
            &self.cluster,
            &self.profile,
        ]
        .into_iter()
        .flatten()
        {
            query = query.bind(value.as_str());
        }
        if let Some(ids) = &self.ids {
            query = query.bind(serde_json::Value::from(ids.clone()).to_string());
        }
        query
    }
}

const COLUMNS: &str = "id, run_id, cluster, profile, plugin_set, plugin, pod_uid, pod_namespace, \
     pod_name, node, reason, status, status_reason, created_at, updated_at";

fn decision_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<DecisionRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(DecisionRecord {
        id: row.try_get("id")?,
        run_id: row.try_get("run_id")?,
        cluster: row.try_get("cluster")?,
        profile: row.try_get("profile")?,
        plugin_set: row.try_get("plugin_set")?,
        plugin: row.try_get("plugin")?,
        pod_uid: row.try_get("pod_uid")?,
        pod_namespace: row.try_get("pod_namespace")?,
        pod_name: row.try_get("pod_name")?,
        node: row.try_get("node")?,
        reason: row.try_get("reason")?,
        status: status
            .parse()
            .map_err(|e| StoreError::corrupt("decision status", e))?,
        status_reason: row.try_get("status_reason")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Store {
    /// Up to `limit` decisions matching `filter`, in id order, and the id to continue after when
    /// more match.
    pub async fn list_decisions(
        &self,
        filter: &DecisionFilter,
        limit: u32,
    ) -> Result<(Vec<DecisionRecord>, Option<i64>), StoreError> {
        // Only fixed fragments are concatenated; every value is a bound parameter.
        let mut sql = format!("SELECT {COLUMNS} FROM decisions WHERE id > ?");
        filter.conditions(&mut sql);
        sql.push_str(" ORDER BY id LIMIT ?");
        let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(filter.after.unwrap_or(0));
        let rows = filter
            .bind(query)
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.pool)
            .await?;
        let mut items = rows
            .iter()
            .map(decision_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|d| d.id)
        } else {
            None
        };
        Ok((items, next))
    }

    pub async fn get_decision(&self, id: i64) -> Result<DecisionRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM decisions WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("decision {id}"),
        })?;
        decision_from_row(&row)
    }

    /// How many decisions a run recorded.
    pub async fn count_run_decisions(&self, run_id: i64) -> Result<i64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM decisions WHERE run_id = ?")
            .bind(run_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(n)
    }
}

// =============================================================================================
// Approval: status changes with who and when, and the pod migration an approval creates
// =============================================================================================

/// One status change of a decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionEvent {
    pub time: i64,
    pub from: DecisionStatus,
    pub to: DecisionStatus,
    /// A token name, `auto-approve:<rule>`, or `system:<what>`.
    pub actor: String,
    pub comment: Option<String>,
}

/// How the pod migration an approval creates starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigrationTemplate<'a> {
    /// `ReservationFirst` or `EvictDirectly`.
    pub mode: &'a str,
    /// 0: no TTL.
    pub ttl_ms: i64,
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

/// Counts of a bulk approval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkApproval {
    /// Decisions matching the filter, whatever their status.
    pub matched: u64,
    /// Ids approved by this call (each got a pod migration).
    pub approved: Vec<i64>,
    /// Proposals found past their TTL and marked expired instead.
    pub expired: u64,
    /// Proposals of dry runs (never approvable).
    pub dry_run: u64,
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
    let current: Option<String> = sqlx::query_scalar("SELECT status FROM decisions WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(current) = current else {
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
    Ok(true)
}

/// Mark the proposals among `ids` (all proposals when `None`) created at or before
/// `expire_before` as expired. Returns how many.
async fn expire_in_tx(
    conn: &mut Conn,
    ids: Option<&[i64]>,
    expire_before: i64,
    now: i64,
) -> Result<u64, StoreError> {
    let mut sql = String::from(
        "SELECT id, created_at FROM decisions WHERE status = 'proposed' AND created_at <= ?",
    );
    if ids.is_some() {
        sql.push_str(" AND id IN (SELECT value FROM json_each(?))");
    }
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(expire_before);
    if let Some(ids) = ids {
        query = query.bind(serde_json::Value::from(ids.to_vec()).to_string());
    }
    let rows = query.fetch_all(&mut *conn).await?;
    for row in &rows {
        let id: i64 = row.try_get("id")?;
        let created: i64 = row.try_get("created_at")?;
        let reason = format!(
            "expired: not approved within the proposal TTL ({} s since it was proposed)",
            (now - created) / 1000
        );
        transition_decision(
            conn,
            id,
            &Transition {
                from: &[DecisionStatus::Proposed],
                to: DecisionStatus::Expired,
                actor: EXPIRY_ACTOR,
                comment: None,
                reason: Some(&reason),
            },
            now,
        )
        .await?;
    }
    Ok(rows.len() as u64)
}

/// Approve one proposed decision of a non-dry run (with its event and pod migration), in the
/// caller's transaction. Returns the pod migration id, or `None` when it was not approvable.
async fn approve_in_tx(
    conn: &mut Conn,
    id: i64,
    actor: &str,
    comment: Option<&str>,
    template: MigrationTemplate<'_>,
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
    let migration =
        super::pod_migrations::insert_for_decision(conn, &decision, actor, template, now).await?;
    Ok(Some((decision, migration)))
}

impl Store {
    /// The status changes of a decision, oldest first.
    pub async fn decision_events(&self, id: i64) -> Result<Vec<DecisionEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT from_status, to_status, actor, comment, time FROM decision_events \
             WHERE decision_id = ? ORDER BY id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let parse = |s: String| {
                    s.parse::<DecisionStatus>()
                        .map_err(|e| StoreError::corrupt("decision event", e))
                };
                Ok(DecisionEvent {
                    time: row.try_get("time")?,
                    from: parse(row.try_get("from_status")?)?,
                    to: parse(row.try_get("to_status")?)?,
                    actor: row.try_get("actor")?,
                    comment: row.try_get("comment")?,
                })
            })
            .collect()
    }

    /// Approve a proposed decision and create its pod migration, atomically. A proposal created
    /// at or before `expire_before` is marked expired instead.
    pub async fn approve_decision(
        &self,
        id: i64,
        actor: &str,
        comment: Option<&str>,
        expire_before: i64,
        template: MigrationTemplate<'_>,
    ) -> Result<Approval, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        expire_in_tx(&mut tx, Some(&[id]), expire_before, now).await?;
        let approved = approve_in_tx(&mut tx, id, actor, comment, template, now).await?;
        tx.commit().await?;
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
        template: MigrationTemplate<'_>,
    ) -> Result<Vec<(i64, i64)>, StoreError> {
        if approvals.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let ids: Vec<i64> = approvals.iter().map(|(id, _)| *id).collect();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        expire_in_tx(&mut tx, Some(&ids), expire_before, now).await?;
        let mut done = Vec::new();
        for (id, actor) in approvals {
            if let Some((_, migration)) =
                approve_in_tx(&mut tx, *id, actor, None, template, now).await?
            {
                done.push((*id, migration));
            }
        }
        tx.commit().await?;
        Ok(done)
    }

    /// Approve every proposed decision matching `filter` (its `status` and `after` are
    /// ignored), in one transaction.
    pub async fn approve_matching(
        &self,
        filter: &DecisionFilter,
        actor: &str,
        comment: Option<&str>,
        expire_before: i64,
        template: MigrationTemplate<'_>,
    ) -> Result<BulkApproval, StoreError> {
        let filter = DecisionFilter {
            status: None,
            after: None,
            ..filter.clone()
        };
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let mut sql = String::from("SELECT id, status FROM decisions WHERE 1 = 1");
        filter.conditions(&mut sql);
        sql.push_str(" ORDER BY id");
        let rows = filter
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .fetch_all(&mut *tx)
            .await?;
        let mut outcome = BulkApproval {
            matched: rows.len() as u64,
            ..BulkApproval::default()
        };
        let proposed: Vec<i64> = rows
            .iter()
            .filter(|r| r.try_get::<String, _>("status").ok().as_deref() == Some("proposed"))
            .map(|r| r.try_get("id"))
            .collect::<Result<_, _>>()?;
        outcome.expired = expire_in_tx(&mut tx, Some(&proposed), expire_before, now).await?;
        for id in proposed {
            match approve_in_tx(&mut tx, id, actor, comment, template, now).await? {
                Some(_) => outcome.approved.push(id),
                None => {
                    let status: String =
                        sqlx::query_scalar("SELECT status FROM decisions WHERE id = ?")
                            .bind(id)
                            .fetch_one(&mut *tx)
                            .await?;
                    if status == "proposed" {
                        outcome.dry_run += 1;
                    }
                }
            }
        }
        tx.commit().await?;
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
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let n = expire_in_tx(&mut tx, None, expire_before, now_ms()).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// The decisions a run recorded that are still `proposed`.
    pub async fn proposed_decisions_of_run(
        &self,
        run_id: i64,
    ) -> Result<Vec<DecisionRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM decisions WHERE run_id = ? AND status = 'proposed' ORDER BY id"
        )))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decision_from_row).collect()
    }

    /// The auto-approve rules of a profile (a JSON array), `None` when it has none stored.
    pub async fn auto_approve_rules(
        &self,
        profile: &str,
    ) -> Result<Option<(serde_json::Value, i64)>, StoreError> {
        let row =
            sqlx::query("SELECT rules, updated_at FROM profile_auto_approve WHERE profile = ?")
                .bind(profile)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|r| {
            let rules: String = r.try_get("rules")?;
            Ok((
                super::from_json(&format!("auto-approve rules of {profile}"), &rules)?,
                r.try_get("updated_at")?,
            ))
        })
        .transpose()
    }

    /// Replace the auto-approve rules of an existing profile. Returns when.
    pub async fn put_auto_approve_rules(
        &self,
        profile: &str,
        rules: &serde_json::Value,
    ) -> Result<i64, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let exists: Option<String> = sqlx::query_scalar("SELECT name FROM profiles WHERE name = ?")
            .bind(profile)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound {
                what: format!("profile \"{profile}\""),
            });
        }
        sqlx::query(
            "INSERT INTO profile_auto_approve (profile, rules, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT (profile) DO UPDATE SET rules = excluded.rules, \
             updated_at = excluded.updated_at",
        )
        .bind(profile)
        .bind(super::to_json("auto-approve rules", rules)?)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(now)
    }
}
