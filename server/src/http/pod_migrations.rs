//! Pod migrations (one per approved decision) with their events, abort, and the arbitration
//! knobs: the global ones, and those of a cluster that has its own.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody, PayloadTooLarge, UnsupportedMediaType};
use super::extract::{ApiJson, ApiPath, ApiQuery, RawBody};
use super::page::Page;
use super::timestamp;
use crate::audit::{self, action, kind};
use crate::executor::arbitration::{ArbitrationConfig, KnobError, MigrationMode};
use crate::executor::machine;
use rebalancer_store::{MigrationEvent, MigrationFilter, MigrationPhase, PodMigrationRecord};

/// A pod migration (Koordinator's PodMigrationJob).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodMigrationView {
    pub id: i64,
    /// The decision it executes.
    pub decision: i64,
    pub cluster: String,
    pub pod: super::decisions::PodIdentity,
    #[schema(value_type = String, example = "ReservationFirst")]
    pub mode: MigrationMode,
    /// `Pending` (waiting for arbitration) → `Running` → `Succeeded` | `Failed` | `Aborted`.
    pub phase: MigrationPhase,
    /// Koordinator's `status`: the type of the last condition reached (`ReservationCreated`,
    /// `ReservationScheduled`, `Eviction`, `PodBoundReservation`, `BoundPodReady`) or
    /// `Complete`.
    pub status: String,
    /// CamelCase reason of the last change: `Waiting`, `WaitingForLease` (another server
    /// holds the cluster's Lease, or this one cannot take it: the message names the Lease and
    /// its holder or the error), `BlockedByPdb`, `Unschedulable`,
    /// `Timeout`, `Stale`, `ReplacementElsewhere`, `Aborted`, …
    pub reason: String,
    /// What it is doing or waiting for, in words (e.g. "waiting: node n-3 already has 2
    /// migrating pods (maxMigratingPerNode=2)").
    pub message: String,
    pub source_node: String,
    /// The node of the reservation, once scheduled.
    pub target_node: Option<String>,
    /// The reservation's name, once created.
    pub reservation: Option<String>,
    /// What the reservation is: `Reservation` (Koordinator's, or the simulated backend's) or
    /// `placeholder pod`; null until one is made.
    #[schema(example = "placeholder pod")]
    pub reservation_kind: Option<String>,
    /// Whether the reservation has been released (abort, failure, replacement elsewhere).
    pub reservation_released: bool,
    /// The replacement pod, once known.
    pub new_pod: Option<NewPodView>,
    /// TTL in whole seconds (rounded up), counted from when it started (0: none). Always an
    /// integer, in every answer.
    pub ttl_seconds: i64,
    pub created_at: String,
    pub updated_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NewPodView {
    pub uid: String,
    pub name: Option<String>,
    pub node: Option<String>,
}

/// One event, in order.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EventView {
    pub time: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    pub message: String,
}

/// A pod migration with every event.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PodMigrationDetail {
    #[serde(flatten)]
    pub pod_migration: PodMigrationView,
    pub events: Vec<EventView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PodMigrationList {
    pub items: Vec<PodMigrationView>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PodMigrationQuery {
    /// Only the pod migration of this decision.
    pub decision: Option<i64>,
    /// Only pod migrations in this phase.
    pub phase: Option<MigrationPhase>,
    /// Only this cluster's pod migrations.
    pub cluster: Option<String>,
    /// Only pod migrations touching this node: the pod's source node, the reserved target or
    /// the node its replacement landed on.
    pub node: Option<String>,
    /// Page size (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    #[param(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
}

fn view(m: PodMigrationRecord) -> PodMigrationView {
    PodMigrationView {
        id: m.id,
        decision: m.decision_id,
        cluster: m.cluster,
        pod: super::decisions::PodIdentity {
            namespace: m.pod_namespace,
            name: m.pod_name,
            uid: m.pod_uid,
        },
        mode: MigrationMode::parse(&m.mode).unwrap_or_default(),
        phase: m.phase,
        status: m.status,
        reason: m.reason,
        message: m.message,
        source_node: m.source_node,
        target_node: m.target_node,
        reservation: m.reservation,
        reservation_kind: m.reservation_kind,
        reservation_released: m.reservation_released,
        new_pod: m.new_pod_uid.map(|uid| NewPodView {
            uid,
            name: m.new_pod_name,
            node: m.new_pod_node,
        }),
        ttl_seconds: (m.ttl_ms.max(0) + 999) / 1000,
        created_at: timestamp(m.created_at),
        updated_at: timestamp(m.updated_at),
        started_at: m.started_at.map(timestamp),
        finished_at: m.finished_at.map(timestamp),
    }
}

fn event(e: MigrationEvent) -> EventView {
    EventView {
        time: timestamp(e.time),
        kind: e.kind,
        reason: e.reason,
        message: e.message,
    }
}

async fn detail(state: &AppState, id: i64) -> Result<PodMigrationDetail, ApiError> {
    let m = state.store.get_pod_migration(id).await?;
    let events = state.store.pod_migration_events(id).await?;
    Ok(PodMigrationDetail {
        pod_migration: view(m),
        events: events.into_iter().map(event).collect(),
    })
}

/// Pod migrations in the order they were created.
#[utoipa::path(get, path = "/api/v1/pod-migrations", tag = "pod-migrations",
    params(PodMigrationQuery),
    responses(
        (status = 200, description = "One page of pod migrations", body = PodMigrationList),
        (status = 400, description = "A query parameter is not valid (`invalid_query`: e.g. an \
            unknown `phase`, a `limit` outside 1–1000), or the cursor is not one this API \
            returned (`invalid_cursor`)", body = ErrorBody),
    ))]
pub async fn list_pod_migrations(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PodMigrationQuery>,
    page: Page,
) -> Result<Json<PodMigrationList>, ApiError> {
    let after = page.id_cursor()?;
    let (items, next) = state
        .store
        .list_pod_migrations(
            &MigrationFilter {
                decision: query.decision,
                phase: query.phase,
                cluster: query.cluster,
                node: query.node,
                after,
            },
            page.limit,
        )
        .await?;
    Ok(Json(PodMigrationList {
        items: items.into_iter().map(view).collect(),
        next: next.map(|id| id.to_string()),
    }))
}

/// One pod migration with its events in order.
#[utoipa::path(get, path = "/api/v1/pod-migrations/{id}", tag = "pod-migrations",
    params(("id" = i64, Path, description = "Pod migration id")),
    responses(
        (status = 200, description = "The pod migration with its events", body = PodMigrationDetail),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such pod migration (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_pod_migration(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<PodMigrationDetail>, ApiError> {
    Ok(Json(detail(&state, id).await?))
}

/// Abort a pod migration that has not finished: it ends `Aborted`, its decision `failed`, and
/// its reservation is released. An eviction that already happened cannot be undone (the
/// message says so).
#[utoipa::path(post, path = "/api/v1/pod-migrations/{id}/abort", tag = "pod-migrations",
    params(("id" = i64, Path, description = "Pod migration id")),
    request_body(content = Option<super::decisions::DecisionComment>, description = "Optional \
        comment (any Content-Type; an empty body or null means none)"),
    responses(
        (status = 200, description = "Aborted", body = PodMigrationDetail),
        (status = 400, description = "`id` is not an integer (`invalid_path`), or the body is \
            not JSON (`invalid_json`) or not a comment object (`invalid_request`)", body = ErrorBody),
        (status = 404, description = "No such pod migration (`not_found`)", body = ErrorBody),
        (status = 409, description = "Already finished (`already_finished`, details.phase)",
            body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
    ))]
pub async fn abort_pod_migration(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
    RawBody(body): RawBody,
) -> Result<Json<PodMigrationDetail>, ApiError> {
    let comment = super::decisions::comment_body(&body)?;
    let work = {
        let state = state.clone();
        async move {
            machine::abort(&state.pod_migrations, id, &actor.name, comment.as_deref()).await?;
            audit::record(
                &state.store,
                &actor,
                action::POD_MIGRATION_ABORT,
                kind::POD_MIGRATION,
                &id.to_string(),
                Some(json!({"comment": comment})),
            )
            .await;
            Ok::<_, ApiError>(Json(detail(&state, id).await?))
        }
    };
    state
        .in_flight
        .detached(work)
        .await
        .map_err(|e| ApiError::internal("abort task failed", e))?
}

/// Audit object kind of the arbitration knobs.
const ARBITRATION_KIND: &str = "arbitration";

/// The arbitration knobs in force (Koordinator's MigrationControllerArgs names and defaults).
#[utoipa::path(get, path = "/api/v1/arbitration", tag = "pod-migrations",
    responses((status = 200, description = "The knobs in force", body = ArbitrationConfig)))]
pub async fn get_arbitration(State(state): State<AppState>) -> Json<ArbitrationConfig> {
    Json(state.pod_migrations.executor.config())
}

/// Replace the arbitration knobs; fields left out take Koordinator's defaults. Applies to pod
/// migrations not yet admitted and, for mode and TTL, to approvals from now on.
#[utoipa::path(put, path = "/api/v1/arbitration", tag = "pod-migrations",
    request_body = ArbitrationConfig,
    responses(
        (status = 200, description = "The knobs now in force", body = ArbitrationConfig),
        (status = 400, description = "The body is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "A knob cannot work (`invalid_config`: e.g. a zero limiter \
            duration; `details.errors` lists every problem), or the body does not match the \
            schema (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn put_arbitration(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(config): ApiJson<ArbitrationConfig>,
) -> Result<Json<ArbitrationConfig>, ApiError> {
    let json = checked(&config, "the arbitration config")?;
    let work = {
        let state = state.clone();
        async move {
            state.store.put_arbitration_config(&json).await?;
            state.pod_migrations.executor.set_config(config.clone());
            audit::record(
                &state.store,
                &actor,
                crate::audit::action::ARBITRATION_PUT,
                ARBITRATION_KIND,
                "arbitration",
                Some(json),
            )
            .await;
            Ok::<_, ApiError>(Json(config))
        }
    };
    state
        .in_flight
        .detached(work)
        .await
        .map_err(|e| ApiError::internal("arbitration config task failed", e))?
}

/// `config` as stored, once every knob of it can work: `invalid_config` naming `subject` and
/// every problem otherwise.
fn checked(config: &ArbitrationConfig, subject: &str) -> Result<serde_json::Value, ApiError> {
    let errors: Vec<KnobError> = config.validate();
    if !errors.is_empty() {
        return Err(ApiError::field_problems("invalid_config", subject, &errors));
    }
    serde_json::to_value(config)
        .map_err(|e| ApiError::internal("serialising the arbitration config", e))
}

/// Where a cluster's arbitration knobs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ArbitrationSource {
    /// The cluster's own knobs (`PUT /api/v1/clusters/{name}/arbitration`).
    Cluster,
    /// The global knobs (`GET /api/v1/arbitration`): the cluster has none of its own.
    Global,
}

/// The arbitration knobs in force for one cluster.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterArbitration {
    pub cluster: String,
    pub source: ArbitrationSource,
    /// The knobs its pod migrations are arbitrated, rate-limited and started with.
    pub config: ArbitrationConfig,
}

fn cluster_arbitration(state: &AppState, cluster: String) -> ClusterArbitration {
    let (config, own) = state.pod_migrations.executor.config_for(&cluster);
    ClusterArbitration {
        cluster,
        source: if own {
            ArbitrationSource::Cluster
        } else {
            ArbitrationSource::Global
        },
        config,
    }
}

/// The arbitration knobs in force for a cluster: its own, or else the global ones (`source`
/// says which).
#[utoipa::path(get, path = "/api/v1/clusters/{name}/arbitration", tag = "pod-migrations",
    params(("name" = String, Path, description = "Cluster name")),
    responses(
        (status = 200, description = "The knobs in force for the cluster", body = ClusterArbitration),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such cluster (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_cluster_arbitration(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ClusterArbitration>, ApiError> {
    state.store.cluster_arbitration_config(&name).await?;
    Ok(Json(cluster_arbitration(&state, name)))
}

/// Give a cluster its own arbitration knobs: a whole document, fields left out taking
/// Koordinator's defaults (not the global knobs'). Its pod migrations are then arbitrated and
/// rate-limited with these; other clusters keep theirs.
#[utoipa::path(put, path = "/api/v1/clusters/{name}/arbitration", tag = "pod-migrations",
    params(("name" = String, Path, description = "Cluster name")),
    request_body = ArbitrationConfig,
    responses(
        (status = 200, description = "The cluster's knobs now in force", body = ClusterArbitration),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`), or the body \
            is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 404, description = "No such cluster (`not_found`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "A knob cannot work (`invalid_config`: e.g. a zero limiter \
            duration; `details.errors` lists every problem), or the body does not match the \
            schema (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn put_cluster_arbitration(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
    ApiJson(config): ApiJson<ArbitrationConfig>,
) -> Result<Json<ClusterArbitration>, ApiError> {
    let json = checked(
        &config,
        &format!("the arbitration config of cluster \"{name}\""),
    )?;
    let work = {
        let state = state.clone();
        async move {
            let executor = &state.pod_migrations.executor;
            {
                // With a cluster deletion in between, the knobs stay gone in both places.
                let _knobs = executor.knobs_lock().await;
                state
                    .store
                    .put_cluster_arbitration_config(&name, &json)
                    .await?;
                executor.set_cluster_config(&name, Some(config));
            }
            audit::record(
                &state.store,
                &actor,
                crate::audit::action::ARBITRATION_PUT,
                ARBITRATION_KIND,
                &format!("clusters/{name}"),
                Some(json!({"cluster": name, "config": json})),
            )
            .await;
            Ok::<_, ApiError>(Json(cluster_arbitration(&state, name)))
        }
    };
    state
        .in_flight
        .detached(work)
        .await
        .map_err(|e| ApiError::internal("arbitration config task failed", e))?
}

/// Make a cluster follow the global arbitration knobs again (nothing to do when it has none of
/// its own). Answers the knobs now in force for it.
#[utoipa::path(delete, path = "/api/v1/clusters/{name}/arbitration", tag = "pod-migrations",
    params(("name" = String, Path, description = "Cluster name")),
    responses(
        (status = 200, description = "The knobs now in force for the cluster (the global ones)",
            body = ClusterArbitration),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such cluster (`not_found`)", body = ErrorBody),
    ))]
pub async fn delete_cluster_arbitration(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ClusterArbitration>, ApiError> {
    let work = {
        let state = state.clone();
        async move {
            let executor = &state.pod_migrations.executor;
            let had = {
                let _knobs = executor.knobs_lock().await;
                let had = state.store.delete_cluster_arbitration_config(&name).await?;
                executor.set_cluster_config(&name, None);
                had
            };
            if had {
                audit::record(
                    &state.store,
                    &actor,
                    crate::audit::action::ARBITRATION_DELETE,
                    ARBITRATION_KIND,
                    &format!("clusters/{name}"),
                    Some(json!({"cluster": name})),
                )
                .await;
            }
            Ok::<_, ApiError>(Json(cluster_arbitration(&state, name)))
        }
    };
    state
        .in_flight
        .detached(work)
        .await
        .map_err(|e| ApiError::internal("arbitration config task failed", e))?
}
