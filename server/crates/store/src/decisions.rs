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
    pub(crate) fn conditions(&self, sql: &mut String) {
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

    pub(crate) fn bind<'q>(
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

pub(crate) const COLUMNS: &str = "id, run_id, cluster, profile, plugin_set, plugin, pod_uid, pod_namespace, \
     pod_name, node, reason, status, status_reason, created_at, updated_at";

pub(crate) fn decision_from_row(
    row: &sqlx::sqlite::SqliteRow,
) -> Result<DecisionRecord, StoreError> {
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
// Status changes with who and when (the transitions themselves are in `transitions`)
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
