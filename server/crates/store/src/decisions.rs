//! Decisions: every proposal of a run, with the status it has reached since.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{Store, StoreError, now_ms};

/// A decision's life: `proposed → approved | rejected | expired | superseded`, then
/// `approved → executing → succeeded | failed`. Runs create `proposed` decisions and supersede
/// the earlier open ones of the same pod; the other states belong to approval and pod migrations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionStatus {
    Proposed,
    Approved,
    Rejected,
    Expired,
    /// A newer proposal for the same pod (same profile and cluster) replaced it
    /// ([`DecisionRecord::superseded_by`]).
    Superseded,
    Executing,
    Succeeded,
    Failed,
}

impl DecisionStatus {
    pub const ALL: [DecisionStatus; 8] = [
        DecisionStatus::Proposed,
        DecisionStatus::Approved,
        DecisionStatus::Rejected,
        DecisionStatus::Expired,
        DecisionStatus::Superseded,
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
            DecisionStatus::Superseded => "superseded",
            DecisionStatus::Executing => "executing",
            DecisionStatus::Succeeded => "succeeded",
            DecisionStatus::Failed => "failed",
        }
    }
}

/// Unknown decision status name.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown decision status `{0}` (expected proposed, approved, rejected, expired, superseded, executing, succeeded or failed)"
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
    /// Why it ended where it did (expired, failed as stale, superseded, …).
    pub status_reason: Option<String>,
    /// The newer decision for the same pod that superseded it (status `superseded`).
    pub superseded_by: Option<i64>,
    /// Proposed by a dry run (never approvable).
    pub dry_run: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Which decisions to list or act on. Every field given narrows.
#[derive(Clone, Debug, Default)]
pub struct DecisionFilter {
    pub run: Option<i64>,
    pub status: Option<DecisionStatus>,
    pub plugin: Option<String>,
    pub namespace: Option<String>,
    pub node: Option<String>,
    pub cluster: Option<String>,
    pub profile: Option<String>,
    /// A case-insensitive substring of `namespace/name`.
    pub pod: Option<String>,
    pub ids: Option<Vec<i64>>,
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
            // instr, not LIKE: `%` and `_` in the search are plain characters.
            (
                self.pod.is_some(),
                " AND instr(lower(pod_namespace || '/' || pod_name), lower(?)) > 0",
            ),
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
            &self.pod,
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

/// The order of a decision list. Every order ends with the id, so it is total and a page
/// boundary ([`DecisionCursor`]) is exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionSort {
    /// Newest first (highest id first).
    #[default]
    Newest,
    /// Oldest first.
    Oldest,
    /// By namespace, then pod name; newest first among equals.
    Namespace,
    /// By pod name, then namespace; newest first among equals.
    Pod,
    /// By node; newest first among equals.
    Node,
    /// By plugin; newest first among equals.
    Plugin,
    /// By status in life order (proposed, approved, executing, succeeded, failed, rejected,
    /// expired, superseded); newest first among equals.
    Status,
}

/// The rank of a status in [`DecisionSort::Status`] order.
const STATUS_RANK: &str = "(CASE status WHEN 'proposed' THEN 0 WHEN 'approved' THEN 1 \
     WHEN 'executing' THEN 2 WHEN 'succeeded' THEN 3 WHEN 'failed' THEN 4 \
     WHEN 'rejected' THEN 5 WHEN 'expired' THEN 6 WHEN 'superseded' THEN 7 ELSE 8 END)";

impl DecisionSort {
    pub const ALL: [DecisionSort; 7] = [
        DecisionSort::Newest,
        DecisionSort::Oldest,
        DecisionSort::Namespace,
        DecisionSort::Pod,
        DecisionSort::Node,
        DecisionSort::Plugin,
        DecisionSort::Status,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DecisionSort::Newest => "newest",
            DecisionSort::Oldest => "oldest",
            DecisionSort::Namespace => "namespace",
            DecisionSort::Pod => "pod",
            DecisionSort::Node => "node",
            DecisionSort::Plugin => "plugin",
            DecisionSort::Status => "status",
        }
    }

    /// The ascending keys before the id (fixed SQL expressions over `decisions`).
    fn keys(self) -> &'static [&'static str] {
        match self {
            DecisionSort::Newest | DecisionSort::Oldest => &[],
            DecisionSort::Namespace => &["pod_namespace", "pod_name"],
            DecisionSort::Pod => &["pod_name", "pod_namespace"],
            DecisionSort::Node => &["node"],
            DecisionSort::Plugin => &["plugin"],
            DecisionSort::Status => &[STATUS_RANK],
        }
    }

    /// Does the id go up along the list?
    fn id_ascending(self) -> bool {
        self == DecisionSort::Oldest
    }

    fn key_values(self, d: &DecisionRecord) -> Vec<CursorKey> {
        let text = |s: &str| CursorKey::Text(s.to_string());
        match self {
            DecisionSort::Newest | DecisionSort::Oldest => Vec::new(),
            DecisionSort::Namespace => vec![text(&d.pod_namespace), text(&d.pod_name)],
            DecisionSort::Pod => vec![text(&d.pod_name), text(&d.pod_namespace)],
            DecisionSort::Node => vec![text(&d.node)],
            DecisionSort::Plugin => vec![text(&d.plugin)],
            DecisionSort::Status => vec![CursorKey::Int(status_rank(d.status))],
        }
    }

    /// The kind of each key, to check a cursor read back from a client.
    fn key_is_text(self) -> &'static [bool] {
        match self {
            DecisionSort::Newest | DecisionSort::Oldest => &[],
            DecisionSort::Namespace | DecisionSort::Pod => &[true, true],
            DecisionSort::Node | DecisionSort::Plugin => &[true],
            DecisionSort::Status => &[false],
        }
    }
}

fn status_rank(status: DecisionStatus) -> i64 {
    match status {
        DecisionStatus::Proposed => 0,
        DecisionStatus::Approved => 1,
        DecisionStatus::Executing => 2,
        DecisionStatus::Succeeded => 3,
        DecisionStatus::Failed => 4,
        DecisionStatus::Rejected => 5,
        DecisionStatus::Expired => 6,
        DecisionStatus::Superseded => 7,
    }
}

/// One sort key of a [`DecisionCursor`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CursorKey {
    Int(i64),
    Text(String),
}

/// Where a page of a decision list ends: the sort, the last item's sort keys and its id. The
/// next page starts right after it (keyset pagination: stable while rows come and go).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionCursor {
    pub sort: DecisionSort,
    pub keys: Vec<CursorKey>,
    pub id: i64,
}

/// A cursor that does not fit its sort.
#[derive(Debug, thiserror::Error)]
#[error("the cursor belongs to sort `{cursor}`, not `{asked}`, or its keys do not fit it")]
pub struct CursorMismatch {
    pub cursor: &'static str,
    pub asked: &'static str,
}

impl DecisionCursor {
    /// Check that this cursor can continue a list in `sort` order.
    pub fn check(&self, sort: DecisionSort) -> Result<(), CursorMismatch> {
        let fits = self.sort == sort
            && self.keys.len() == sort.key_is_text().len()
            && self
                .keys
                .iter()
                .zip(sort.key_is_text())
                .all(|(key, text)| matches!(key, CursorKey::Text(_)) == *text);
        if fits {
            Ok(())
        } else {
            Err(CursorMismatch {
                cursor: self.sort.as_str(),
                asked: sort.as_str(),
            })
        }
    }

    /// ` AND (…)`: the rows after this cursor in its sort order, with its values appended to
    /// `values` (for [`bind_keys`]).
    fn condition(&self, sql: &mut String, values: &mut Vec<CursorKey>) {
        let keys = self.sort.keys();
        let id_op = if self.sort.id_ascending() { ">" } else { "<" };
        // (k1 > a) OR (k1 = a AND k2 > b) OR (k1 = a AND k2 = b AND id <op> c)
        let mut alternatives = Vec::new();
        for i in 0..=keys.len() {
            let mut parts = Vec::new();
            for (j, key) in keys.iter().enumerate().take(i) {
                parts.push(format!("{key} = ?"));
                values.push(self.keys[j].clone());
            }
            if i < keys.len() {
                parts.push(format!("{} > ?", keys[i]));
                values.push(self.keys[i].clone());
            } else {
                parts.push(format!("id {id_op} ?"));
                values.push(CursorKey::Int(self.id));
            }
            alternatives.push(format!("({})", parts.join(" AND ")));
        }
        sql.push_str(" AND (");
        sql.push_str(&alternatives.join(" OR "));
        sql.push(')');
    }
}

fn bind_keys<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    values: &'q [CursorKey],
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    for value in values {
        query = match value {
            CursorKey::Int(v) => query.bind(*v),
            CursorKey::Text(v) => query.bind(v.as_str()),
        };
    }
    query
}

/// The decision columns, for `SELECT`s and `RETURNING` over `decisions` (not aliased): the
/// run's dry-run flag comes along.
pub(crate) const COLUMNS: &str = "id, run_id, cluster, profile, plugin_set, plugin, pod_uid, \
     pod_namespace, pod_name, node, reason, status, status_reason, superseded_by, \
     (SELECT dry_run FROM runs WHERE runs.id = decisions.run_id) AS dry_run, created_at, \
     updated_at";

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
        superseded_by: row.try_get("superseded_by")?,
        dry_run: row.try_get::<Option<bool>, _>("dry_run")?.unwrap_or(false),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Store {
    /// Up to `limit` decisions matching `filter` in `sort` order, starting after `after`, and
    /// the cursor to continue after when more match.
    pub async fn list_decisions(
        &self,
        filter: &DecisionFilter,
        sort: DecisionSort,
        after: Option<&DecisionCursor>,
        limit: u32,
    ) -> Result<(Vec<DecisionRecord>, Option<DecisionCursor>), StoreError> {
        // Only fixed fragments are concatenated; every value is a bound parameter.
        let mut sql = format!("SELECT {COLUMNS} FROM decisions WHERE 1 = 1");
        filter.conditions(&mut sql);
        let mut values = Vec::new();
        if let Some(after) = after {
            after.condition(&mut sql, &mut values);
        }
        sql.push_str(" ORDER BY ");
        for key in sort.keys() {
            sql.push_str(key);
            sql.push_str(", ");
        }
        sql.push_str(if sort.id_ascending() {
            "id LIMIT ?"
        } else {
            "id DESC LIMIT ?"
        });
        let query = filter.bind(sqlx::query(sqlx::AssertSqlSafe(sql)));
        let rows = bind_keys(query, &values)
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.pool)
            .await?;
        let mut items = rows
            .iter()
            .map(decision_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|d| DecisionCursor {
                sort,
                keys: sort.key_values(d),
                id: d.id,
            })
        } else {
            None
        };
        Ok((items, next))
    }

    /// How many decisions match `filter`.
    pub async fn count_decisions(&self, filter: &DecisionFilter) -> Result<u64, StoreError> {
        let mut sql = String::from("SELECT COUNT(*) FROM decisions WHERE 1 = 1");
        filter.conditions(&mut sql);
        let n: i64 = filter
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        Ok(u64::try_from(n).unwrap_or(0))
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
