//! Aggregate reads: gauges that are database state, read at scrape time for `/metrics`, and
//! the size of the history tables (for the soak benchmark and operators).

use super::{Store, StoreError};

impl Store {
    /// How many decisions are in each status (statuses with none are left out).
    pub async fn count_decisions_by_status(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT status, COUNT(*) FROM decisions GROUP BY status ORDER BY status",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}

/// Rows in the tables that grow with history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryCounts {
    pub runs: i64,
    pub decisions: i64,
    pub decision_events: i64,
    pub pod_migrations: i64,
    pub pod_migration_events: i64,
    pub simulated_events: i64,
    pub audit_log: i64,
}

impl Store {
    /// How many rows each history table holds (a full count: seconds on tens of millions of
    /// rows, so not for every scrape).
    pub async fn history_counts(&self) -> Result<HistoryCounts, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let mut counts = [0i64; 7];
        for (n, table) in counts.iter_mut().zip([
            "runs",
            "decisions",
            "decision_events",
            "pod_migrations",
            "pod_migration_events",
            "simulated_events",
            "audit_log",
        ]) {
            *n = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                .fetch_one(&mut *conn)
                .await?;
        }
        let [
            runs,
            decisions,
            decision_events,
            pod_migrations,
            pod_migration_events,
            simulated_events,
            audit_log,
        ] = counts;
        Ok(HistoryCounts {
            runs,
            decisions,
            decision_events,
            pod_migrations,
            pod_migration_events,
            simulated_events,
            audit_log,
        })
    }
}
