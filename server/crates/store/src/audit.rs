//! The audit log: who did what to which object, when. Append-only — this module only inserts
//! and reads, and the schema's triggers refuse UPDATE, and DELETE of anything but the oldest
//! entries once they are a day old (which only `retention` deletes).

use sqlx::Row;

use super::{Store, StoreError, from_json, now_ms};

/// One entry to append.
#[derive(Clone, Copy, Debug)]
pub struct NewAuditEntry<'a> {
    /// The acting token's id; `None` for the server itself.
    pub actor_id: Option<i64>,
    pub actor_name: &'a str,
    pub actor_role: &'a str,
    pub action: &'a str,
    pub object_kind: &'a str,
    pub object_id: Option<&'a str>,
    /// A JSON object with extra facts, or `None`.
    pub detail: Option<&'a serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AuditRecord {
    pub id: i64,
    pub at: i64,
    pub actor_id: Option<i64>,
    pub actor_name: String,
    pub actor_role: String,
    pub action: String,
    pub object_kind: String,
    pub object_id: Option<String>,
    pub detail: Option<serde_json::Value>,
}

/// Which entries to list, newest first, starting below `before`.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub object_kind: Option<String>,
    pub object_id: Option<String>,
    /// Only entries at or after this time (ms).
    pub since: Option<i64>,
    /// Only entries with a smaller id (the cursor).
    pub before: Option<i64>,
}

const COLUMNS: &str =
    "id, at, actor_id, actor_name, actor_role, action, object_kind, object_id, detail";

fn entry_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<AuditRecord, StoreError> {
    let id: i64 = row.try_get("id")?;
    let detail: Option<String> = row.try_get("detail")?;
    Ok(AuditRecord {
        id,
        at: row.try_get("at")?,
        actor_id: row.try_get("actor_id")?,
        actor_name: row.try_get("actor_name")?,
        actor_role: row.try_get("actor_role")?,
        action: row.try_get("action")?,
        object_kind: row.try_get("object_kind")?,
        object_id: row.try_get("object_id")?,
        detail: detail
            .map(|d| from_json(&format!("detail of audit entry {id}"), &d))
            .transpose()?,
    })
}

impl Store {
    /// Append an entry. Returns its id.
    pub async fn insert_audit(&self, entry: &NewAuditEntry<'_>) -> Result<i64, StoreError> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO audit_log (at, actor_id, actor_name, actor_role, action, object_kind, \
             object_id, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(now_ms())
        .bind(entry.actor_id)
        .bind(entry.actor_name)
        .bind(entry.actor_role)
        .bind(entry.action)
        .bind(entry.object_kind)
        .bind(entry.object_id)
        .bind(entry.detail.map(serde_json::Value::to_string))
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    /// Append several entries in one transaction (a bulk approval's, one per decision).
    pub async fn insert_audit_batch(
        &self,
        entries: &[NewAuditEntry<'_>],
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        for entry in entries {
            sqlx::query(
                "INSERT INTO audit_log (at, actor_id, actor_name, actor_role, action, \
                 object_kind, object_id, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(now)
            .bind(entry.actor_id)
            .bind(entry.actor_name)
            .bind(entry.actor_role)
            .bind(entry.action)
            .bind(entry.object_kind)
            .bind(entry.object_id)
            .bind(entry.detail.map(serde_json::Value::to_string))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Up to `limit` entries matching `filter`, newest first, and the cursor to continue with
    /// when more match.
    pub async fn list_audit(
        &self,
        filter: &AuditFilter,
        limit: u32,
    ) -> Result<(Vec<AuditRecord>, Option<i64>), StoreError> {
        // Only fixed fragments are concatenated; every value is a bound parameter.
        let mut sql = format!("SELECT {COLUMNS} FROM audit_log WHERE id < ?");
        let mut text = Vec::new();
        for (value, column) in [
            (&filter.actor, "actor_name"),
            (&filter.action, "action"),
            (&filter.object_kind, "object_kind"),
            (&filter.object_id, "object_id"),
        ] {
            if let Some(value) = value {
                sql.push_str(" AND ");
                sql.push_str(column);
                sql.push_str(" = ?");
                text.push(value.as_str());
            }
        }
        if filter.since.is_some() {
            sql.push_str(" AND at >= ?");
        }
        sql.push_str(" ORDER BY id DESC LIMIT ?");
        let mut query =
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(filter.before.unwrap_or(i64::MAX));
        for value in text {
            query = query.bind(value);
        }
        if let Some(since) = filter.since {
            query = query.bind(since);
        }
        let rows = query
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.pool)
            .await?;
        let mut items = rows
            .iter()
            .map(entry_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|e| e.id)
        } else {
            None
        };
        Ok((items, next))
    }
}
