//! # Store
//!
//! Persistence: every SQL statement of Rebalancer lives in this crate.
//!
//! # Layout
//! One module per table group, in pipeline order: [`clusters`] (cluster state and its objects),
//! [`policies`], [`profiles`], [`schedules`], [`runs`], [`decisions`] (proposals and their
//! history), [`pod_migrations`] (records, events), [`arbitration`] (the knobs: global and per
//! cluster), [`transitions`] (every change that moves a decision and its pod migration together:
//! approve, reject, expire, steps), [`backend`] (the simulated backend's cluster writes),
//! [`tokens`], [`audit`], [`stats`], [`settings`] (run-time overrides of flags), [`events`] (the change feed the API streams, appended in
//! each change's own transaction), [`webhooks`] (hooks, their deliveries and the dispatch cursor), and [`retention`] (deleting history past its keep time,
//! batch by batch; the WAL checkpoint).
//!
//! Owns: the SQLite pool (WAL, busy timeout, foreign keys), the schema migrations
//! ([`MIGRATOR`], from the workspace's `migrations/`), and typed reads and writes per table.
//! Read-then-write transactions start with `BEGIN IMMEDIATE` so two writers never deadlock on the
//! lock upgrade.
//! Must not: know about HTTP, the engine or how snapshots are built; callers hand it plain rows.
//!
//! Queries use `sqlx::query`/`query_as` (no compile-time checking against a live database);
//! the tests in `tests.rs` run every one of them.

pub mod arbitration;
pub mod audit;
pub mod backend;
pub mod clusters;
pub mod decisions;
pub mod events;
pub mod pod_migrations;
pub mod policies;
pub mod profiles;
pub mod retention;
pub mod runs;
pub mod schedules;
pub mod settings;
pub mod state;
pub mod stats;
pub mod tokens;
pub mod transitions;
pub mod webhooks;

use std::path::Path;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub use audit::{AuditFilter, AuditRecord, NewAuditEntry};
pub use clusters::{
    ClusterDeletion, ClusterRecord, DeletedCluster, NewClusterState, ObjectRow, StoredObject,
};
pub use decisions::{
    CursorKey, CursorMismatch, DecisionCursor, DecisionEvent, DecisionFilter, DecisionRecord,
    DecisionSort, DecisionStatus, NewDecision,
};
pub use events::{EventBounds, EventKind, EventRecord};
pub use pod_migrations::{
    DecisionChange, MigrationChange, MigrationEvent, MigrationFilter, MigrationPhase, NewEvent,
    PodMigrationRecord,
};
pub use policies::{NewPolicy, PolicyRecord, PutPolicyError};
pub use profiles::{DeletedProfile, ProfileDeletion, ProfileRecord};
pub use retention::{Checkpoint, FileStats, PruneBatch, PruneCutoffs, PruneRule, Pruned};
pub use runs::{NewRun, RunEnd, RunFinished, RunRecord, RunStatus, RunTrigger, SUPERSEDE_ACTOR};
pub use schedules::{ScheduleRecord, ScheduleSpec};
pub use state::{StateWrite, StoredScope};
pub use stats::HistoryCounts;
pub use tokens::{DeleteTokenError, InsertTokenError, NewToken, Role, TokenOrigin, TokenRecord};
pub use transitions::{
    Approval, BULK_SAMPLE, BulkAction, BulkOutcome, MigrationTemplate, MigrationTemplates,
};
pub use webhooks::{
    AttemptFailure, ClaimedDelivery, DeliveryRecord, DeliveryStatus, FailureOutcome, NewDelivery,
    NewWebhook, WebhookRecord,
};

/// The schema migrations, shared by start-up and tests.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../../migrations");

/// SQLite page size of new databases.
const PAGE_SIZE: u32 = 16 << 10;

/// How long a connection waits for another writer before giving up with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Failures of the store that callers act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The row the caller asked for does not exist.
    #[error("{what} not found")]
    NotFound { what: String },
    /// The database file could not be opened or migrated.
    #[error("cannot open database {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("migrating the database failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored JSON column could not be read back (corruption or an incompatible build).
    #[error("stored {what} is not valid: {message}")]
    Corrupt { what: String, message: String },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A run's cluster was deleted (and perhaps created again) while the run was in progress;
    /// the run is recorded as failed, without its proposals and policy state.
    #[error(
        "cluster \"{cluster}\" was deleted while run {run} was in progress; the run's proposals \
         and policy state were not kept"
    )]
    ClusterGone { run: i64, cluster: String },
    /// Another pod migration of the cluster already took this pod as its replacement; the
    /// change that named it was not applied.
    #[error("pod {pod_uid} is already the replacement of pod migration {by}")]
    ReplacementClaimed { pod_uid: String, by: i64 },
}

impl StoreError {
    pub fn corrupt(what: impl Into<String>, err: impl std::fmt::Display) -> Self {
        StoreError::Corrupt {
            what: what.into(),
            message: err.to_string(),
        }
    }
}

/// The database: a pool of SQLite connections. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    /// Bumped after each commit that appended to the change feed ([`events`]).
    events: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
}

impl Store {
    /// Open (creating it when missing) and migrate the database file at `path`.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            // Set when the file is created (fixed afterwards in WAL mode). Cluster objects
            // are a few KB of JSON each: 16 KiB pages hold several per page, which makes
            // replacing a 150,000-object cluster about twice as fast as 4 KiB pages.
            .page_size(PAGE_SIZE)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: path.display().to_string(),
                source,
            })?;
        MIGRATOR.run(&pool).await?;
        Ok(Store {
            pool,
            events: std::sync::Arc::new(tokio::sync::watch::channel(0).0),
        })
    }

    /// The underlying pool (for tests and health checks).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Is the database answering?
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Close every connection (waits for in-flight queries).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// Parse a JSON column.
fn from_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::corrupt(what, e))
}

/// Render a value for a JSON column.
fn to_json<T: serde::Serialize>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::corrupt(what, e))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod queue_tests;
