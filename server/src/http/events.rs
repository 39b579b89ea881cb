//! `GET /api/v1/events`: the change feed as server-sent events — runs, decisions, pod
//! migrations and clusters, as the store appended them (`rebalancer_store::events`).
//!
//! Owns: where a stream starts (`Last-Event-ID` header, else `?lastEventId=`, else now), the
//! `reset` event when the feed no longer holds what followed that id, hiding events of clusters
//! the caller may not see, waking on this process's commits and polling the table every
//! [`POLL`] (so events of other replicas arrive too), the keep-alive comment, and ending every
//! stream when the server stops serving.
//! Must not: append events (the store does, in each change's transaction) or keep per-client
//! state beyond the open stream.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::{Deserialize, Serialize};

use super::auth::Actor;
use super::error::{ApiError, ErrorBody};
use super::extract::ApiQuery;
use super::state::AppState;
use crate::auth::Principal;
use rebalancer_store::{EventRecord, Store};

/// How often a stream reads the feed when nothing woke it (other replicas' events).
pub const POLL: Duration = Duration::from_secs(2);
/// How often an idle stream sends the `: keep-alive` comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Events read from the feed at a time (a run's `decisions` event lists every proposal: tens of
/// KB on a large cluster).
const READ_BATCH: u32 = 100;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this event id (for clients that cannot set the `Last-Event-ID` header,
    /// which wins when both are given).
    #[param(minimum = 0)]
    pub last_event_id: Option<i64>,
}

/// One server-sent event of the stream, as its fields (`id:`, `event:`, `data:`) read.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SseEvent {
    /// The event's id: resume after it with `Last-Event-ID`.
    #[schema(pattern = "^[0-9]{1,18}$", example = "118")]
    pub id: String,
    pub event: SseEventType,
    /// JSON: RunEventData, DecisionsEventData, MigrationEventData or ClusterEventData by
    /// `event`; `{}` for `reset`.
    #[schema(example = "{\"ids\":[40,41],\"cluster\":\"prod\",\"status\":\"approved\"}")]
    pub data: String,
}

/// What an event is about.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SseEventType {
    Run,
    Decisions,
    Migration,
    Cluster,
    /// The events after the id asked for are gone: refetch everything.
    Reset,
}

/// `event: run` — a run started (`running`) or finished (`succeeded`, `failed`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunEventData {
    pub id: i64,
    pub cluster: String,
    pub profile: String,
    #[schema(example = "succeeded")]
    pub status: rebalancer_store::RunStatus,
}

/// `event: decisions` — decisions of one cluster reached `status`, one event per batch (a
/// run's proposals, a bulk approval, an expiry sweep…).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DecisionsEventData {
    pub ids: Vec<i64>,
    pub cluster: String,
    pub status: rebalancer_store::DecisionStatus,
    /// The run whose end changed them (`proposed` and `superseded` only).
    pub run: Option<i64>,
    /// That run's profile.
    pub profile: Option<String>,
    /// Whether that run was a dry run.
    #[serde(rename = "dryRun")]
    pub dry_run: Option<bool>,
}

/// `event: migration` — a pod migration moved to another step or phase. A new pod migration
/// (phase `Pending`) is announced by the `decisions` event `approved` of its decision.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MigrationEventData {
    pub id: i64,
    /// Its decision.
    pub decision: i64,
    pub cluster: String,
    pub phase: rebalancer_store::MigrationPhase,
    /// The step it is at now (`Admitted`, `Reserving`, `Evicting`, … `Done`).
    pub step: String,
    /// Its phase before this change (the same as `phase` when only the step moved).
    pub from: Option<rebalancer_store::MigrationPhase>,
}

/// `event: cluster` — a cluster got a new revision, was deleted, or (a Kubernetes-backed one)
/// its connection changed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClusterEventData {
    pub name: String,
    /// Its new revision.
    pub revision: Option<i64>,
    /// Its connection state now: `connecting`, `synced` or `disconnected`.
    pub connection: Option<String>,
    /// Why the connection is in that state (the last error while not synced).
    pub message: Option<String>,
    /// The connection state announced before this one (absent for the first announcement
    /// of this server process).
    pub previous: Option<String>,
    /// Present (true) when the cluster was deleted.
    pub deleted: Option<bool>,
}

/// The change feed as server-sent events (`text/event-stream`), from now on or resumed.
///
/// Each event has `id: <integer>`, `event: <type>` and `data: <JSON>`; types: `run`
/// (RunEventData), `decisions` (DecisionsEventData), `migration` (MigrationEventData),
/// `cluster` (ClusterEventData), and `reset` (data `{}`): the events after the requested id are
/// no longer kept (or the id is unknown), so refetch everything; the stream goes on from the
/// reset's own id. A `: keep-alive` comment comes every 15 s. Resume with the `Last-Event-ID`
/// header (or `?lastEventId=`): only events after it are sent. Events of clusters the token may
/// not see are left out. The stream ends when the server stops; reconnect with the last id.
#[utoipa::path(get, path = "/api/v1/events", tag = "events",
    params(
        EventsQuery,
        ("Last-Event-ID" = Option<String>, Header, nullable = false,
            description = "Resume after this event id (a non-negative integer)",
            pattern = "^[0-9]{1,18}$"),
    ),
    responses(
        (status = 200, description = "The stream of events (never ends by itself); the schema \
            describes one event",
            content_type = "text/event-stream", body = SseEvent),
        (status = 400, description = "`Last-Event-ID` or `lastEventId` is not a non-negative \
            integer (`invalid_last_event_id`), or an unknown query parameter (`invalid_query`)",
            body = ErrorBody),
    ))]
pub async fn events(
    State(state): State<AppState>,
    actor: Actor,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // Checked even when the header wins: a bad parameter is an error wherever it is.
    if query.last_event_id.is_some_and(|id| id < 0) {
        return Err(ApiError::bad_request(
            "invalid_last_event_id",
            "lastEventId must be a non-negative integer",
        ));
    }
    let resume = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|id| *id >= 0)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_last_event_id",
                        format!(
                            "the Last-Event-ID header {value:?} is not an event id (a \
                             non-negative integer)"
                        ),
                    )
                })?,
        ),
        None => query.last_event_id,
    };
    let (after, reset) = start(&state.store, resume).await?;
    let feed = Feed {
        store: state.store.clone(),
        principal: actor.0,
        after,
        pending: reset.into_iter().collect(),
        woken: state.store.subscribe_events(),
        closing: state.closing.clone(),
    };
    Ok(Sse::new(futures::stream::unfold(feed, Feed::next))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// Where a stream starts: the id to read after, and the `reset` event to send first when the
/// feed no longer holds what followed `resume` (pruned, or an id this feed never gave).
async fn start(store: &Store, resume: Option<i64>) -> Result<(i64, Option<Event>), ApiError> {
    let bounds = store.event_bounds().await?;
    let now = bounds.last_assigned;
    let Some(resume) = resume else {
        return Ok((now, None));
    };
    let kept = match bounds.oldest {
        // Everything after `resume` is still here.
        Some(oldest) => resume >= oldest - 1 && resume <= now,
        None => resume == now,
    };
    if kept {
        return Ok((resume, None));
    }
    let reset = Event::default()
        .id(now.to_string())
        .event("reset")
        .data("{}");
    Ok((now, Some(reset)))
}

/// One open stream.
struct Feed {
    store: Store,
    principal: Principal,
    /// The last event id read from the feed (sent or hidden).
    after: i64,
    pending: VecDeque<Event>,
    woken: tokio::sync::watch::Receiver<u64>,
    closing: tokio::sync::watch::Receiver<bool>,
}

impl Feed {
    /// The next event to send; `None` ends the stream (the server stops, or the feed cannot be
    /// read: the client resumes from its last id).
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Feed)> {
        loop {
            if *self.closing.borrow() {
                return None;
            }
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            // Marked seen before reading, so a commit during the read wakes the next wait.
            self.woken.borrow_and_update();
            let batch = match self.store.events_after(self.after, READ_BATCH).await {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(error = %e, after = self.after, "reading the event feed failed; ending the stream");
                    return None;
                }
            };
            let full = batch.len() as u32 >= READ_BATCH;
            for record in batch {
                self.after = record.id;
                if visible(&self.principal, &record) {
                    self.pending.push_back(sse_event(&record));
                }
            }
            if !self.pending.is_empty() || full {
                continue;
            }
            tokio::select! {
                changed = self.woken.changed() => if changed.is_err() { return None },
                () = tokio::time::sleep(POLL) => {}
                _ = self.closing.wait_for(|closing| *closing) => return None,
            }
        }
    }
}

/// May `principal` see `event`? Events of a cluster only when it may see that cluster.
pub fn visible(principal: &Principal, event: &EventRecord) -> bool {
    event
        .cluster
        .as_deref()
        .is_none_or(|cluster| principal.sees(cluster))
}

fn sse_event(record: &EventRecord) -> Event {
    Event::default()
        .id(record.id.to_string())
        .event(record.kind.as_str())
        .data(record.data.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebalancer_store::{EventKind, Role};

    #[test]
    fn a_cluster_scoped_principal_sees_only_its_clusters() {
        let event = |cluster: Option<&str>| EventRecord {
            id: 1,
            time: 0,
            kind: EventKind::Cluster,
            cluster: cluster.map(str::to_string),
            data: serde_json::json!({}),
        };
        let everyone = Principal::system("test");
        let scoped = Principal {
            clusters: Some(vec!["a".into()]),
            role: Role::Viewer,
            ..Principal::system("scoped")
        };
        assert!(visible(&everyone, &event(Some("b"))));
        assert!(visible(&scoped, &event(Some("a"))));
        assert!(!visible(&scoped, &event(Some("b"))));
        assert!(visible(&scoped, &event(None)));
    }
}
