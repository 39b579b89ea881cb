//! Aggregate reads for `/metrics`: gauges that are database state, read at scrape time.

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
