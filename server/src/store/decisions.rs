//! Decisions: every proposal of a run, with the status it has reached since.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{Store, StoreError};

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
    pub created_at: i64,
    pub updated_at: i64,
}

/// Which decisions to list, in id order, starting after `after`.
#[derive(Clone, Debug, Default)]
pub struct DecisionFilter {
    pub run: Option<i64>,
    pub status: Option<DecisionStatus>,
    pub after: Option<i64>,
}

const COLUMNS: &str = "id, run_id, cluster, profile, plugin_set, plugin, pod_uid, pod_namespace, \
     pod_name, node, reason, status, created_at, updated_at";

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
        if filter.run.is_some() {
            sql.push_str(" AND run_id = ?");
        }
        if filter.status.is_some() {
            sql.push_str(" AND status = ?");
        }
        sql.push_str(" ORDER BY id LIMIT ?");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(filter.after.unwrap_or(0));
        if let Some(run) = filter.run {
            query = query.bind(run);
        }
        if let Some(status) = filter.status {
            query = query.bind(status.as_str());
        }
        let rows = query
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
