//! Webhooks (`webhooks`, `webhook_deliveries`, `webhook_cursor`): the hooks portals register,
//! the deliveries of change-feed events to them, and how far the feed has been dispatched.
//!
//! Owns: hooks (insert, list, get, delete with their deliveries, enable again), dispatching
//! ([`Store::dispatch_webhook_events`]: the deliveries of a stretch of the feed inserted in the
//! transaction that advances the cursor, compare-and-set, so a stretch is dispatched once
//! whatever crashes or which replica does it), claiming due deliveries for an attempt (the
//! claim moves `next_attempt_at` past the attempt's timeout, so a delivery whose sender died
//! is attempted again), recording an attempt's outcome (with the hook's failure count and its
//! disabling), listing deliveries, and pruning finished ones.
//! Must not: decide which events a hook gets, build bodies, sign or send anything, or choose
//! retry times (the server's `webhooks` module does).

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{Store, StoreError, from_json, now_ms, to_json};

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not delivered yet: due at `nextAttemptAt`.
    Pending,
    /// A 2xx answered an attempt.
    Delivered,
    /// Every attempt failed, or the destination was refused: not attempted again.
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }
}

impl std::str::FromStr for DeliveryStatus {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "pending" => DeliveryStatus::Pending,
            "delivered" => DeliveryStatus::Delivered,
            "failed" => DeliveryStatus::Failed,
            other => return Err(StoreError::corrupt("delivery status", format!("`{other}`"))),
        })
    }
}

/// A hook to insert.
#[derive(Debug)]
pub struct NewWebhook<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub secret: &'a str,
    pub description: &'a str,
    pub created_by: &'a str,
}

/// A stored hook.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookRecord {
    pub id: i64,
    pub url: String,
    /// Event names, or `["*"]`.
    pub events: Vec<String>,
    /// Signs the deliveries; never shown.
    pub secret: String,
    pub description: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub consecutive_failures: i64,
    pub created_at: i64,
    pub created_by: String,
    pub last_delivery_at: Option<i64>,
    pub last_status: Option<DeliveryStatus>,
}

impl WebhookRecord {
    /// Does this hook receive `event`?
    pub fn wants(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event)
    }
}

/// A delivery to insert: `body` is the exact JSON every attempt sends.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    pub id: String,
    pub webhook_id: i64,
    pub event: String,
    pub body: String,
}

/// A stored delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryRecord {
    /// Orders deliveries (the list's cursor).
    pub seq: i64,
    pub id: String,
    pub webhook_id: i64,
    pub event: String,
    pub body: String,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub next_attempt_at: Option<i64>,
    pub last_attempt_at: Option<i64>,
    pub last_response_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

/// A delivery claimed for an attempt, with where and how to send it.
#[derive(Clone, Debug)]
pub struct ClaimedDelivery {
    pub delivery: DeliveryRecord,
    pub url: String,
    pub secret: String,
}

/// How an attempt that got no 2xx ended.
#[derive(Clone, Debug)]
pub struct AttemptFailure<'a> {
    /// The answer's status, when there was one.
    pub response_status: Option<u16>,
    pub error: &'a str,
    /// When to try again; `None`: the delivery has failed for good.
    pub retry_at: Option<i64>,
}

/// What recording a failed attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureOutcome {
    /// Another attempt is due later.
    Retrying,
    /// The delivery failed for good; the hook's failure count is now `failures`.
    Failed { failures: i64, disabled: bool },
    /// The delivery was no longer this attempt's (claimed again, or its hook deleted).
    Stale,
}

const WEBHOOK_COLUMNS: &str = "id, url, events, secret, description, enabled, disabled_reason, \
     consecutive_failures, created_at, created_by, last_delivery_at, last_status";

const DELIVERY_COLUMNS: &str = "seq, id, webhook_id, event, body, status, attempts, \
     next_attempt_at, last_attempt_at, last_response_status, last_error, created_at, delivered_at";

fn webhook_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<WebhookRecord, StoreError> {
    let id: i64 = row.try_get("id")?;
    let events: String = row.try_get("events")?;
    Ok(WebhookRecord {
        id,
        url: row.try_get("url")?,
        events: from_json(&format!("events of webhook {id}"), &events)?,
        secret: row.try_get("secret")?,
        description: row.try_get("description")?,
        enabled: row.try_get("enabled")?,
        disabled_reason: row.try_get("disabled_reason")?,
        consecutive_failures: row.try_get("consecutive_failures")?,
        created_at: row.try_get("created_at")?,
        created_by: row.try_get("created_by")?,
        last_delivery_at: row.try_get("last_delivery_at")?,
        last_status: row
            .try_get::<Option<String>, _>("last_status")?
            .map(|s| s.parse())
            .transpose()?,
    })
}

fn delivery_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<DeliveryRecord, StoreError> {
    Ok(DeliveryRecord {
        seq: row.try_get("seq")?,
        id: row.try_get("id")?,
        webhook_id: row.try_get("webhook_id")?,
        event: row.try_get("event")?,
        body: row.try_get("body")?,
        status: row.try_get::<String, _>("status")?.parse()?,
        attempts: row.try_get("attempts")?,
        next_attempt_at: row.try_get("next_attempt_at")?,
        last_attempt_at: row.try_get("last_attempt_at")?,
        last_response_status: row.try_get("last_response_status")?,
        last_error: row.try_get("last_error")?,
        created_at: row.try_get("created_at")?,
        delivered_at: row.try_get("delivered_at")?,
    })
}

fn webhook_not_found(id: i64) -> StoreError {
    StoreError::NotFound {
        what: format!("webhook {id}"),
    }
}

async fn insert_deliveries(
    conn: &mut sqlx::SqliteConnection,
    deliveries: &[NewDelivery],
    now: i64,
) -> Result<(), StoreError> {
    for d in deliveries {
        sqlx::query(
            "INSERT INTO webhook_deliveries (id, webhook_id, event, body, next_attempt_at, \
             created_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&d.id)
        .bind(d.webhook_id)
        .bind(&d.event)
        .bind(&d.body)
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

impl Store {
    pub async fn insert_webhook(&self, hook: &NewWebhook<'_>) -> Result<WebhookRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO webhooks (url, events, secret, description, created_at, created_by) \
             VALUES (?, ?, ?, ?, ?, ?) RETURNING {WEBHOOK_COLUMNS}"
        )))
        .bind(hook.url)
        .bind(to_json("webhook events", &hook.events)?)
        .bind(hook.secret)
        .bind(hook.description)
        .bind(now_ms())
        .bind(hook.created_by)
        .fetch_one(&self.pool)
        .await?;
        webhook_from_row(&row)
    }

    /// Every hook, oldest first.
    pub async fn list_webhooks(&self) -> Result<Vec<WebhookRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY id"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(webhook_from_row).collect()
    }

    pub async fn webhook(&self, id: i64) -> Result<WebhookRecord, StoreError> {
        self.one_webhook(
            &format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?"),
            id,
        )
        .await
    }

    /// Delete a hook and every delivery of it (pending ones are dropped).
    pub async fn delete_webhook(&self, id: i64) -> Result<WebhookRecord, StoreError> {
        self.one_webhook(
            &format!("DELETE FROM webhooks WHERE id = ? RETURNING {WEBHOOK_COLUMNS}"),
            id,
        )
        .await
    }

    /// The hook `sql` (binding `id`) answers, or `NotFound`.
    async fn one_webhook(&self, sql: &str, id: i64) -> Result<WebhookRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| webhook_not_found(id))?;
        webhook_from_row(&row)
    }

    /// Enable a hook again: its failure count starts over, its pending deliveries are due now.
    pub async fn enable_webhook(&self, id: i64) -> Result<WebhookRecord, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE webhooks SET enabled = 1, disabled_reason = NULL, consecutive_failures = 0 \
             WHERE id = ? RETURNING {WEBHOOK_COLUMNS}"
        )))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| webhook_not_found(id))?;
        sqlx::query(
            "UPDATE webhook_deliveries SET next_attempt_at = MIN(next_attempt_at, ?) \
             WHERE webhook_id = ? AND status = 'pending'",
        )
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        webhook_from_row(&row)
    }

    /// Insert one delivery, due now (`webhook.test`). `NotFound` when the hook is gone.
    pub async fn insert_webhook_delivery(
        &self,
        delivery: &NewDelivery,
    ) -> Result<DeliveryRecord, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM webhooks WHERE id = ?")
            .bind(delivery.webhook_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(webhook_not_found(delivery.webhook_id));
        }
        insert_deliveries(&mut tx, std::slice::from_ref(delivery), now_ms()).await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = ?"
        )))
        .bind(&delivery.id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        delivery_from_row(&row)
    }

    /// The id of the last change-feed event dispatched to the hooks.
    pub async fn webhook_cursor(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT last_event FROM webhook_cursor WHERE id = 1")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Advance the cursor from `from` to `to` and insert the deliveries of the events between,
    /// in one transaction. `false` (nothing written) when the cursor is no longer at `from`:
    /// another dispatcher did that stretch.
    pub async fn dispatch_webhook_events(
        &self,
        from: i64,
        to: i64,
        deliveries: &[NewDelivery],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let moved =
            sqlx::query("UPDATE webhook_cursor SET last_event = ? WHERE id = 1 AND last_event = ?")
                .bind(to)
                .bind(from)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if moved == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        insert_deliveries(&mut tx, deliveries, now_ms()).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Claim up to `limit` pending deliveries of enabled hooks due at `now`, oldest due first:
    /// each gets one more attempt, made at `now`, and is not due again before `lease_until`
    /// (past the attempt's timeout) unless its outcome is recorded first.
    pub async fn claim_webhook_deliveries(
        &self,
        now: i64,
        lease_until: i64,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(
            "SELECT d.seq, w.url, w.secret FROM webhook_deliveries d \
             JOIN webhooks w ON w.id = d.webhook_id \
             WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND w.enabled = 1 \
             ORDER BY d.next_attempt_at, d.seq LIMIT ?",
        )
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in rows {
            let seq: i64 = row.try_get("seq")?;
            let updated = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = ?, \
                 next_attempt_at = ? WHERE seq = ? RETURNING {DELIVERY_COLUMNS}"
            )))
            .bind(now)
            .bind(lease_until)
            .bind(seq)
            .fetch_one(&mut *tx)
            .await?;
            claimed.push(ClaimedDelivery {
                delivery: delivery_from_row(&updated)?,
                url: row.try_get("url")?,
                secret: row.try_get("secret")?,
            });
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// When the next pending delivery of an enabled hook is due, if any.
    pub async fn next_webhook_delivery_due(&self) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT MIN(d.next_attempt_at) FROM webhook_deliveries d \
             JOIN webhooks w ON w.id = d.webhook_id WHERE d.status = 'pending' AND w.enabled = 1",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Record that attempt number `attempt` of delivery `id` got the 2xx `status`: delivered,
    /// and its hook's failure count starts over. `false` when the delivery was no longer this
    /// attempt's.
    pub async fn webhook_delivered(
        &self,
        id: &str,
        attempt: i64,
        status: u16,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let hook: Option<i64> = sqlx::query_scalar(
            "UPDATE webhook_deliveries SET status = 'delivered', delivered_at = ?, \
             finished_at = ?, next_attempt_at = NULL, last_response_status = ?, \
             last_error = NULL WHERE id = ? AND status = 'pending' AND attempts = ? \
             RETURNING webhook_id",
        )
        .bind(now)
        .bind(now)
        .bind(i64::from(status))
        .bind(id)
        .bind(attempt)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(hook) = hook else {
            tx.rollback().await?;
            return Ok(false);
        };
        sqlx::query(
            "UPDATE webhooks SET consecutive_failures = 0, last_delivery_at = ?, \
             last_status = 'delivered' WHERE id = ?",
        )
        .bind(now)
        .bind(hook)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Record that attempt number `attempt` of delivery `id` failed. Without a retry time the
    /// delivery has failed for good: its hook counts one more failure in a row, and at
    /// `disable_after` it is disabled.
    pub async fn webhook_attempt_failed(
        &self,
        id: &str,
        attempt: i64,
        failure: &AttemptFailure<'_>,
        disable_after: u32,
    ) -> Result<FailureOutcome, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let hook: Option<i64> = sqlx::query_scalar(
            "UPDATE webhook_deliveries SET \
               status = CASE WHEN ? IS NULL THEN 'failed' ELSE 'pending' END, \
               finished_at = CASE WHEN ? IS NULL THEN ? END, \
               next_attempt_at = ?, last_response_status = ?, last_error = ? \
             WHERE id = ? AND status = 'pending' AND attempts = ? RETURNING webhook_id",
        )
        .bind(failure.retry_at)
        .bind(failure.retry_at)
        .bind(now)
        .bind(failure.retry_at)
        .bind(failure.response_status.map(i64::from))
        .bind(failure.error)
        .bind(id)
        .bind(attempt)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(hook) = hook else {
            tx.rollback().await?;
            return Ok(FailureOutcome::Stale);
        };
        if failure.retry_at.is_some() {
            tx.commit().await?;
            return Ok(FailureOutcome::Retrying);
        }
        let reason = format!(
            "disabled after {disable_after} deliveries in a row failed; the last: {}",
            failure.error
        );
        let (failures, enabled): (i64, bool) = sqlx::query_as(
            "UPDATE webhooks SET consecutive_failures = consecutive_failures + 1, \
               last_delivery_at = ?, last_status = 'failed', \
               disabled_reason = CASE WHEN enabled = 1 AND consecutive_failures + 1 >= ? \
                 THEN ? ELSE disabled_reason END, \
               enabled = CASE WHEN consecutive_failures + 1 >= ? THEN 0 ELSE enabled END \
             WHERE id = ? RETURNING consecutive_failures, enabled",
        )
        .bind(now)
        .bind(i64::from(disable_after))
        .bind(&reason)
        .bind(i64::from(disable_after))
        .bind(hook)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(FailureOutcome::Failed {
            failures,
            disabled: !enabled,
        })
    }

    /// Make a claimed delivery due again now, keeping its attempt count (its attempt was
    /// abandoned at shutdown). Nothing when it is no longer that attempt's.
    pub async fn release_webhook_delivery(&self, id: &str, attempt: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE webhook_deliveries SET next_attempt_at = ? \
             WHERE id = ? AND status = 'pending' AND attempts = ?",
        )
        .bind(now_ms())
        .bind(id)
        .bind(attempt)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A hook's deliveries, newest first: up to `limit` with a `seq` below `before`, of
    /// `status` when given; and the cursor of the next page.
    pub async fn list_webhook_deliveries(
        &self,
        webhook: i64,
        status: Option<DeliveryStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<(Vec<DeliveryRecord>, Option<i64>), StoreError> {
        self.webhook(webhook).await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = ? \
             AND (? IS NULL OR status = ?) AND seq < ? ORDER BY seq DESC LIMIT ?"
        )))
        .bind(webhook)
        .bind(status.map(DeliveryStatus::as_str))
        .bind(status.map(DeliveryStatus::as_str))
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit) + 1)
        .fetch_all(&self.pool)
        .await?;
        let mut items = rows
            .iter()
            .map(delivery_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|d| d.seq)
        } else {
            None
        };
        Ok((items, next))
    }

    /// One delivery of a hook.
    pub async fn webhook_delivery(
        &self,
        webhook: i64,
        id: &str,
    ) -> Result<DeliveryRecord, StoreError> {
        self.webhook(webhook).await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = ? AND id = ?"
        )))
        .bind(webhook)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("delivery {id} of webhook {webhook}"),
        })?;
        delivery_from_row(&row)
    }

    /// The pods of decisions `ids` (namespace, name, node), for a `decisions.proposed` body.
    pub async fn decision_pods(
        &self,
        ids: &[i64],
    ) -> Result<Vec<(i64, String, String, String)>, StoreError> {
        let mut pods = Vec::with_capacity(ids.len());
        // SQLite allows 32766 variables per statement.
        for chunk in ids.chunks(10_000) {
            let mut sql = String::from(
                "SELECT id, pod_namespace, pod_name, node FROM decisions WHERE id IN (",
            );
            for i in 0..chunk.len() {
                sql.push_str(if i == 0 { "?" } else { ",?" });
            }
            sql.push_str(") ORDER BY id");
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(id);
            }
            pods.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(pods)
    }

    /// Delete deliveries that finished (delivered or failed) before `before` (ms), at most
    /// `limit` at a time. Returns how many went, and whether more may be due.
    pub async fn prune_webhook_deliveries(
        &self,
        before: i64,
        limit: u32,
    ) -> Result<(u64, bool), StoreError> {
        let limit = limit.max(1);
        let deleted = sqlx::query(
            "DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM webhook_deliveries \
             WHERE status <> 'pending' AND finished_at < ? ORDER BY finished_at LIMIT ?)",
        )
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok((deleted, deleted >= u64::from(limit)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("webhooks.db")).await.unwrap();
        (dir, store)
    }

    async fn hook(store: &Store) -> WebhookRecord {
        store
            .insert_webhook(&NewWebhook {
                url: "https://portal.example.com/hook",
                events: &["run.finished".to_string()],
                secret: "0123456789abcdef",
                description: "portal",
                created_by: "admin",
            })
            .await
            .unwrap()
    }

    fn delivery(id: &str, webhook_id: i64) -> NewDelivery {
        NewDelivery {
            id: id.into(),
            webhook_id,
            event: "run.finished".into(),
            body: "{}".into(),
        }
    }

    #[tokio::test]
    async fn the_cursor_moves_once_with_its_deliveries() {
        let (_dir, store) = open().await;
        let h = hook(&store).await;
        assert_eq!(store.webhook_cursor().await.unwrap(), 0);
        assert!(
            store
                .dispatch_webhook_events(0, 5, &[delivery("a", h.id)])
                .await
                .unwrap()
        );
        // A second dispatcher that read the same stretch writes nothing.
        assert!(
            !store
                .dispatch_webhook_events(0, 5, &[delivery("b", h.id)])
                .await
                .unwrap()
        );
        assert_eq!(store.webhook_cursor().await.unwrap(), 5);
        let (items, next) = store
            .list_webhook_deliveries(h.id, None, None, 10)
            .await
            .unwrap();
        assert_eq!(next, None);
        assert_eq!(
            items.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
    }

    #[tokio::test]
    async fn attempts_retry_fail_and_disable_the_hook_and_enabling_resets() {
        let (_dir, store) = open().await;
        let h = hook(&store).await;
        store
            .dispatch_webhook_events(0, 2, &[delivery("a", h.id), delivery("b", h.id)])
            .await
            .unwrap();
        let now = now_ms();
        let claimed = store
            .claim_webhook_deliveries(now, now + 60_000, 10)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        assert_eq!(claimed[0].secret, "0123456789abcdef");
        // Claimed: not due again before the lease ends.
        assert!(
            store
                .claim_webhook_deliveries(now, now + 60_000, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let retry = AttemptFailure {
            response_status: Some(500),
            error: "HTTP 500",
            retry_at: Some(now),
        };
        assert_eq!(
            store
                .webhook_attempt_failed("a", 1, &retry, 2)
                .await
                .unwrap(),
            FailureOutcome::Retrying
        );
        // An outcome for an attempt that is not the delivery's latest is ignored.
        assert_eq!(
            store
                .webhook_attempt_failed("a", 7, &retry, 2)
                .await
                .unwrap(),
            FailureOutcome::Stale
        );
        let again = store
            .claim_webhook_deliveries(now, now + 60_000, 10)
            .await
            .unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].delivery.attempts, 2);
        let give_up = AttemptFailure {
            retry_at: None,
            ..retry
        };
        assert_eq!(
            store
                .webhook_attempt_failed("a", 2, &give_up, 2)
                .await
                .unwrap(),
            FailureOutcome::Failed {
                failures: 1,
                disabled: false
            }
        );
        assert_eq!(
            store
                .webhook_attempt_failed("b", 1, &give_up, 2)
                .await
                .unwrap(),
            FailureOutcome::Failed {
                failures: 2,
                disabled: true
            }
        );
        let disabled = store.webhook(h.id).await.unwrap();
        assert!(!disabled.enabled);
        assert!(
            disabled
                .disabled_reason
                .as_deref()
                .unwrap()
                .contains("HTTP 500"),
            "{disabled:?}"
        );
        // A disabled hook's pending deliveries wait.
        store
            .dispatch_webhook_events(2, 3, &[delivery("c", h.id)])
            .await
            .unwrap();
        let later = now_ms() + 1;
        assert!(
            store
                .claim_webhook_deliveries(later, later + 1, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let enabled = store.enable_webhook(h.id).await.unwrap();
        assert!(enabled.enabled);
        assert_eq!(enabled.consecutive_failures, 0);
        assert_eq!(enabled.disabled_reason, None);
        let c = store
            .claim_webhook_deliveries(later, later + 1, 10)
            .await
            .unwrap();
        assert_eq!(c.len(), 1);
        assert!(store.webhook_delivered("c", 1, 204).await.unwrap());
        let d = store.webhook_delivery(h.id, "c").await.unwrap();
        assert_eq!(d.status, DeliveryStatus::Delivered);
        assert_eq!(d.last_response_status, Some(204));
        assert_eq!(
            store.webhook(h.id).await.unwrap().last_status,
            Some(DeliveryStatus::Delivered)
        );

        // Pruning takes finished deliveries only; deleting the hook takes the rest.
        let (pruned, more) = store
            .prune_webhook_deliveries(now_ms() + 1, 10)
            .await
            .unwrap();
        assert_eq!((pruned, more), (3, false));
        let (failed, _) = store
            .list_webhook_deliveries(h.id, Some(DeliveryStatus::Failed), None, 10)
            .await
            .unwrap();
        assert!(failed.is_empty());
        store.delete_webhook(h.id).await.unwrap();
        assert!(matches!(
            store.webhook(h.id).await,
            Err(StoreError::NotFound { .. })
        ));
    }

    #[tokio::test]
    async fn deliveries_page_newest_first() {
        let (_dir, store) = open().await;
        let h = hook(&store).await;
        let all: Vec<NewDelivery> = (0..5).map(|i| delivery(&format!("d{i}"), h.id)).collect();
        store.dispatch_webhook_events(0, 1, &all).await.unwrap();
        let (page, next) = store
            .list_webhook_deliveries(h.id, None, None, 2)
            .await
            .unwrap();
        assert_eq!(
            page.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
            ["d4", "d3"]
        );
        let (rest, next) = store
            .list_webhook_deliveries(h.id, None, next, 10)
            .await
            .unwrap();
        assert_eq!(
            rest.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
            ["d2", "d1", "d0"]
        );
        assert_eq!(next, None);
    }
}
