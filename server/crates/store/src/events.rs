//! The change feed (`events`): a transactional outbox of what changed — runs, decisions,
//! pod migrations, clusters — read by the API's event stream.
//!
//! Owns: [`append_event`], which every change point of the store calls inside the transaction
//! of the change it describes (so a rolled-back change leaves no event and a committed one
//! always has its event, whichever replica made it); reading events after an id
//! ([`Store::events_after`]); the in-process wake-up ([`Store::subscribe_events`]), poked after
//! the commit; and pruning the feed ([`Store::prune_events`]).
//! Must not: decide who may see an event (the HTTP layer filters by the caller's clusters) or
//! hold one event per row of a bulk change: a bulk change is one event listing its ids.
//!
//! Readers page with `id > last seen`: that never skips an event because SQLite has one writer
//! at a time, so ids become visible in the order they were given. A database with concurrent
//! writers (Postgres sequences) would need more (e.g. re-reading a short window behind the
//! newest id, or ordering by commit).

use serde::Serialize;
use sqlx::Row;

use super::{Store, StoreError, now_ms, to_json};

/// What an event is about (the SSE `event:` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// A run started or finished: `{id, cluster, profile, status}`.
    Run,
    /// Decisions changed status, one event per batch: `{ids, cluster, status}`, with
    /// `{run, profile, dryRun}` when a run's end changed them (proposed, superseded).
    Decisions,
    /// A pod migration changed (phase or step): `{id, decision, cluster, phase, step, from}`
    /// (`from`: its phase before the change).
    Migration,
    /// A cluster's revision, connection or existence changed: `{name, revision?, connection?,
    /// previous?}` (`previous`: the connection state announced before, if any).
    Cluster,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Run => "run",
            EventKind::Decisions => "decisions",
            EventKind::Migration => "migration",
            EventKind::Cluster => "cluster",
        }
    }
}

impl std::str::FromStr for EventKind {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "run" => EventKind::Run,
            "decisions" => EventKind::Decisions,
            "migration" => EventKind::Migration,
            "cluster" => EventKind::Cluster,
            other => return Err(StoreError::corrupt("event type", format!("`{other}`"))),
        })
    }
}

/// One stored event.
#[derive(Clone, Debug, PartialEq)]
pub struct EventRecord {
    pub id: i64,
    /// When it was appended (ms since the epoch).
    pub time: i64,
    pub kind: EventKind,
    /// The cluster it concerns (`None`: none in particular).
    pub cluster: Option<String>,
    pub data: serde_json::Value,
}

/// Append an event in the caller's transaction (the change's own). Returns its id.
pub(crate) async fn append_event(
    conn: &mut sqlx::SqliteConnection,
    kind: EventKind,
    cluster: Option<&str>,
    data: &serde_json::Value,
) -> Result<i64, StoreError> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO events (time, type, cluster, data) VALUES (?, ?, ?, ?) RETURNING id",
    )
    .bind(now_ms())
    .bind(kind.as_str())
    .bind(cluster)
    .bind(to_json("event data", data)?)
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
}

/// A `decisions` event for `ids` (nothing when empty), all of `cluster`, now at `status`.
pub(crate) async fn append_decisions(
    conn: &mut sqlx::SqliteConnection,
    cluster: &str,
    status: &str,
    ids: &[i64],
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let data = serde_json::json!({ "ids": ids, "cluster": cluster, "status": status });
    append_event(conn, EventKind::Decisions, Some(cluster), &data).await?;
    Ok(())
}

/// The run whose end changed decisions (proposed them, or superseded older ones).
pub(crate) struct RunOf<'a> {
    pub id: i64,
    pub profile: &'a str,
    pub dry_run: bool,
}

/// A `decisions` event for `ids` (nothing when empty) that the end of `run` moved to `status`:
/// the event also names the run, its profile and whether it was a dry run.
pub(crate) async fn append_run_decisions(
    conn: &mut sqlx::SqliteConnection,
    cluster: &str,
    status: &str,
    ids: &[i64],
    run: &RunOf<'_>,
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let data = serde_json::json!({
        "ids": ids, "cluster": cluster, "status": status,
        "run": run.id, "profile": run.profile, "dryRun": run.dry_run,
    });
    append_event(conn, EventKind::Decisions, Some(cluster), &data).await?;
    Ok(())
}

/// `decisions` events for `(id, cluster)` pairs that all reached `status`: one per cluster, so
/// the stream can hide a cluster's ids from tokens that may not see it.
pub(crate) async fn append_decisions_by_cluster(
    conn: &mut sqlx::SqliteConnection,
    status: &str,
    changed: &[(i64, String)],
) -> Result<(), StoreError> {
    let mut by_cluster: std::collections::BTreeMap<&str, Vec<i64>> = Default::default();
    for (id, cluster) in changed {
        by_cluster.entry(cluster).or_default().push(*id);
    }
    for (cluster, mut ids) in by_cluster {
        ids.sort_unstable();
        append_decisions(conn, cluster, status, &ids).await?;
    }
    Ok(())
}

/// A `run` event.
pub(crate) async fn append_run(
    conn: &mut sqlx::SqliteConnection,
    id: i64,
    cluster: &str,
    profile: &str,
    status: &str,
) -> Result<(), StoreError> {
    let data =
        serde_json::json!({ "id": id, "cluster": cluster, "profile": profile, "status": status });
    append_event(conn, EventKind::Run, Some(cluster), &data).await?;
    Ok(())
}

/// A `cluster` event for a new revision.
pub(crate) async fn append_revision(
    conn: &mut sqlx::SqliteConnection,
    cluster: &str,
    revision: i64,
) -> Result<(), StoreError> {
    let data = serde_json::json!({ "name": cluster, "revision": revision });
    append_event(conn, EventKind::Cluster, Some(cluster), &data).await?;
    Ok(())
}

fn event_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<EventRecord, StoreError> {
    let id: i64 = row.try_get("id")?;
    let data: String = row.try_get("data")?;
    Ok(EventRecord {
        id,
        time: row.try_get("time")?,
        kind: row.try_get::<String, _>("type")?.parse()?,
        cluster: row.try_get("cluster")?,
        data: super::from_json(&format!("data of event {id}"), &data)?,
    })
}

/// The feed's extent: the oldest and newest ids kept (`None` when it is empty).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventBounds {
    pub oldest: Option<i64>,
    pub newest: Option<i64>,
    /// The highest id ever given (kept by AUTOINCREMENT even when the feed is empty).
    pub last_assigned: i64,
}

impl Store {
    /// Append an event outside any other change (a managed cluster's connection state, which
    /// is not in the database), and wake the stream.
    pub async fn append_event(
        &self,
        kind: EventKind,
        cluster: Option<&str>,
        data: &serde_json::Value,
    ) -> Result<i64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let id = append_event(&mut conn, kind, cluster, data).await?;
        drop(conn);
        self.events_committed();
        Ok(id)
    }

    /// Up to `limit` events with an id above `after`, oldest first.
    pub async fn events_after(
        &self,
        after: i64,
        limit: u32,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, time, type, cluster, data FROM events WHERE id > ? ORDER BY id LIMIT ?",
        )
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The oldest and newest ids kept, and the last id given.
    pub async fn event_bounds(&self) -> Result<EventBounds, StoreError> {
        let (oldest, newest): (Option<i64>, Option<i64>) =
            sqlx::query_as("SELECT MIN(id), MAX(id) FROM events")
                .fetch_one(&self.pool)
                .await?;
        let last_assigned: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
                .fetch_optional(&self.pool)
                .await?;
        Ok(EventBounds {
            oldest,
            newest,
            last_assigned: last_assigned.unwrap_or(0).max(newest.unwrap_or(0)),
        })
    }

    /// A receiver that changes after each commit of this process that appended events (the
    /// stream also polls the table, for other replicas' events).
    pub fn subscribe_events(&self) -> tokio::sync::watch::Receiver<u64> {
        self.events.subscribe()
    }

    /// Wake the streams: call after committing a transaction that appended events.
    pub(crate) fn events_committed(&self) {
        self.events.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Delete events appended before `before` (ms), and beyond the newest `keep` ones, at most
    /// `limit` at a time. Returns how many went, and whether more may be due.
    pub async fn prune_events(
        &self,
        before: Option<i64>,
        keep: Option<u64>,
        limit: u32,
    ) -> Result<(u64, bool), StoreError> {
        let newest: Option<i64> = sqlx::query_scalar("SELECT MAX(id) FROM events")
            .fetch_one(&self.pool)
            .await?;
        let Some(newest) = newest else {
            return Ok((0, false));
        };
        let below_id = keep.map_or(i64::MIN, |k| {
            newest.saturating_sub(i64::try_from(k).unwrap_or(i64::MAX)) + 1
        });
        let before = before.unwrap_or(i64::MIN);
        let deleted = sqlx::query(
            "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE id < ? OR time < ? \
             ORDER BY id LIMIT ?)",
        )
        .bind(below_id)
        .bind(before)
        .bind(i64::from(limit.max(1)))
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok((deleted, deleted >= u64::from(limit.max(1))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BulkAction;

    async fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("events.db")).await.unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn an_event_is_kept_only_when_its_transaction_commits() {
        let (_dir, store) = open().await;
        let data = serde_json::json!({"name": "c"});
        let mut tx = store.pool.begin().await.unwrap();
        append_event(&mut tx, EventKind::Cluster, Some("c"), &data)
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert!(store.events_after(0, 10).await.unwrap().is_empty());

        let mut tx = store.pool.begin().await.unwrap();
        let id = append_event(&mut tx, EventKind::Cluster, Some("c"), &data)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let events = store.events_after(0, 10).await.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].id, id);
        assert_eq!(events[0].kind, EventKind::Cluster);
        assert_eq!(events[0].data, data);
        // The rolled-back insert used no id that a reader could see later.
        assert!(store.events_after(id, 10).await.unwrap().is_empty());
    }

    /// Each change point appends in its own transaction: one event per batch, and nothing for
    /// a change that was refused and rolled back.
    #[tokio::test]
    async fn changes_append_one_event_per_batch_and_a_refused_change_none() {
        use crate::{
            DecisionFilter, MigrationChange, MigrationTemplate, MigrationTemplates, NewDecision,
            NewRun, RunEnd,
        };
        let (_dir, store) = open().await;
        let run = store
            .insert_run(&NewRun::manual("east", 1, "default"))
            .await
            .unwrap();
        let pods = ["a", "b", "c"];
        let decisions: Vec<NewDecision> = pods
            .iter()
            .map(|p| NewDecision {
                plugin_set: "default",
                plugin: "PodLifeTime",
                pod_uid: p,
                pod_namespace: "ns",
                pod_name: p,
                node: "n1",
                reason: "old",
            })
            .collect();
        store
            .finish_run(
                run.id,
                RunEnd::Succeeded {
                    report: &|_: &[usize]| "{}".to_string(),
                    decisions: &decisions,
                    state: &[],
                },
            )
            .await
            .unwrap();
        let events = store.events_after(0, 100).await.unwrap();
        let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [EventKind::Run, EventKind::Decisions, EventKind::Run]
        );
        assert_eq!(events[0].data["status"], "running");
        assert_eq!(events[1].data["status"], "proposed");
        assert_eq!(events[1].data["ids"].as_array().unwrap().len(), 3);
        assert_eq!(events[1].cluster.as_deref(), Some("east"));
        assert_eq!(events[2].data["status"], "succeeded");

        let templates = MigrationTemplates {
            default: MigrationTemplate {
                mode: "EvictDirectly".into(),
                ttl_ms: 0,
            },
            clusters: Default::default(),
        };
        let filter = DecisionFilter {
            run: Some(run.id),
            ..DecisionFilter::default()
        };
        let outcome = store
            .act_on_matching(
                &filter,
                BulkAction::Approve(&templates),
                "alice",
                None,
                0,
                false,
            )
            .await
            .unwrap();
        assert_eq!(outcome.acted.len(), 3);
        let after = events.last().unwrap().id;
        let approved = store.events_after(after, 100).await.unwrap();
        assert_eq!(approved.len(), 1, "one event for the batch: {approved:#?}");
        assert_eq!(approved[0].data["status"], "approved");
        let mut acted = outcome.acted.clone();
        acted.sort_unstable();
        assert_eq!(approved[0].data["ids"], serde_json::json!(acted));

        // Two pod migrations naming the same replacement: the second change is refused.
        let (migrations, _) = store
            .list_pod_migrations(&Default::default(), 10)
            .await
            .unwrap();
        let change = MigrationChange {
            step: Some("Admitted".into()),
            new_pod_uid: Some("replacement".into()),
            ..MigrationChange::default()
        };
        let first = &migrations[0];
        assert!(
            store
                .change_pod_migration(first.id, &first.step, &change)
                .await
                .unwrap()
        );
        let moved = store.events_after(approved[0].id, 100).await.unwrap();
        assert_eq!(moved.len(), 1, "{moved:#?}");
        assert_eq!(moved[0].kind, EventKind::Migration);
        assert_eq!(moved[0].data["id"], first.id);
        assert_eq!(moved[0].data["step"], "Admitted");
        let second = &migrations[1];
        let refused = store
            .change_pod_migration(second.id, &second.step, &change)
            .await;
        assert!(
            matches!(refused, Err(StoreError::ReplacementClaimed { .. })),
            "{refused:?}"
        );
        assert!(
            store
                .events_after(moved[0].id, 100)
                .await
                .unwrap()
                .is_empty(),
            "a rolled-back change appends nothing"
        );
    }

    #[tokio::test]
    async fn pruning_keeps_the_newest_and_ids_are_never_reused() {
        let (_dir, store) = open().await;
        let mut rx = store.subscribe_events();
        for i in 0..5 {
            store
                .append_event(EventKind::Cluster, Some("c"), &serde_json::json!({"i": i}))
                .await
                .unwrap();
        }
        assert!(rx.has_changed().unwrap(), "appending wakes the stream");
        rx.mark_unchanged();
        let (deleted, more) = store.prune_events(None, Some(2), 100).await.unwrap();
        assert_eq!((deleted, more), (3, false));
        let bounds = store.event_bounds().await.unwrap();
        assert_eq!((bounds.oldest, bounds.newest), (Some(4), Some(5)));
        // Everything older than now goes; the next id still follows the last one given.
        let (deleted, _) = store
            .prune_events(Some(now_ms() + 1), None, 100)
            .await
            .unwrap();
        assert_eq!(deleted, 2);
        let bounds = store.event_bounds().await.unwrap();
        assert_eq!(bounds.oldest, None);
        assert_eq!(bounds.last_assigned, 5);
        let id = store
            .append_event(EventKind::Cluster, None, &serde_json::json!({}))
            .await
            .unwrap();
        assert_eq!(id, 6);
    }
}
