//! Schedules: runs of a profile over a cluster started periodically and/or after the cluster's
//! state changes (debounced). Create, list, get, replace, delete.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody, PayloadTooLarge, UnsupportedMediaType};
use super::extract::{ApiJson, ApiPath};
use super::timestamp;
use crate::audit::{self, action, kind};
use rebalancer_store::{ScheduleRecord, ScheduleSpec, Store};

/// Change-triggered runs wait this long after the latest change unless told otherwise.
pub const DEFAULT_DEBOUNCE_SECONDS: i64 = 30;
/// Longest interval or debounce accepted (one year). The `maximum` of both fields in the
/// OpenAPI document repeats it (an attribute takes no constant; `server/tests/api/docs.rs`
/// checks they agree).
pub const MAX_SECONDS: i64 = 366 * 24 * 3600;

/// What a schedule does. At least one of `intervalSeconds` and `onChange` must be set (the
/// document says so with an `anyOf`, added by `http::docs`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleRequest {
    #[schema(example = "demo")]
    pub cluster: String,
    #[schema(example = "default")]
    pub profile: String,
    /// Run every this many seconds (the first run starts right away). Omit or null for
    /// change-triggered runs only.
    #[schema(example = 300, minimum = 1, maximum = 31622400)]
    pub interval_seconds: Option<i64>,
    /// Also run after the cluster's state changes (snapshot push, pod migrations…).
    #[serde(default)]
    pub on_change: bool,
    /// With `onChange`: start the run once the cluster has had no change for this long, so a
    /// burst of changes gives one run. Default 30.
    #[schema(example = 30, minimum = 0, maximum = 31622400)]
    pub debounce_seconds: Option<i64>,
    /// Runs of this schedule are dry runs: their decisions can never be approved or executed.
    #[serde(default)]
    pub dry_run: bool,
    /// Default true.
    pub enabled: Option<bool>,
}

/// A schedule and what it last did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleView {
    pub id: i64,
    pub cluster: String,
    pub profile: String,
    pub interval_seconds: Option<i64>,
    pub on_change: bool,
    pub debounce_seconds: i64,
    pub dry_run: bool,
    pub enabled: bool,
    pub created_at: String,
    pub updated_at: String,
    /// When this schedule last started a run.
    pub last_triggered_at: Option<String>,
    /// The run it last started (see `GET /api/v1/runs/{id}`).
    pub last_run: Option<i64>,
    /// Why its last attempt failed (e.g. the profile was deleted), or null.
    pub last_error: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ScheduleList {
    pub items: Vec<ScheduleView>,
}

fn view(record: ScheduleRecord) -> ScheduleView {
    let spec = record.spec;
    ScheduleView {
        id: record.id,
        cluster: spec.cluster,
        profile: spec.profile,
        interval_seconds: spec.interval_seconds,
        on_change: spec.on_change,
        debounce_seconds: spec.debounce_seconds,
        dry_run: spec.dry_run,
        enabled: spec.enabled,
        created_at: timestamp(record.created_at),
        updated_at: timestamp(record.updated_at),
        last_triggered_at: record.last_triggered_at.map(timestamp),
        last_run: record.last_run_id,
        last_error: record.last_error,
    }
}

/// Check a request; the cluster and profile must exist. Returns the spec and the cluster's
/// current revision (a change-triggered run waits for the next change).
async fn check(
    state: &AppState,
    request: ScheduleRequest,
) -> Result<(ScheduleSpec, Option<i64>), ApiError> {
    let seconds = |field: &str, value: i64, min: i64| {
        if (min..=MAX_SECONDS).contains(&value) {
            Ok(value)
        } else {
            Err(ApiError::unprocessable(
                "invalid_schedule",
                format!("{field} must be between {min} and {MAX_SECONDS}, not {value}"),
            ))
        }
    };
    let interval_seconds = request
        .interval_seconds
        .map(|v| seconds("intervalSeconds", v, 1))
        .transpose()?;
    let debounce_seconds = seconds(
        "debounceSeconds",
        request.debounce_seconds.unwrap_or(DEFAULT_DEBOUNCE_SECONDS),
        0,
    )?;
    if interval_seconds.is_none() && !request.on_change {
        return Err(ApiError::unprocessable(
            "invalid_schedule",
            "a schedule needs intervalSeconds, onChange: true, or both",
        ));
    }
    let cluster = state.store.get_cluster(&request.cluster).await?;
    let profile = state.store.get_profile(&request.profile).await?;
    let revision = state
        .clusters
        .get(&cluster.name)
        .map_or(cluster.revision, |s| s.revision as i64);
    Ok((
        ScheduleSpec {
            cluster: cluster.name,
            profile: profile.name,
            interval_seconds,
            on_change: request.on_change,
            debounce_seconds,
            dry_run: request.dry_run,
            enabled: request.enabled.unwrap_or(true),
        },
        Some(revision),
    ))
}

fn audit_detail(spec: &ScheduleSpec) -> serde_json::Value {
    json!({
        "cluster": spec.cluster,
        "profile": spec.profile,
        "intervalSeconds": spec.interval_seconds,
        "onChange": spec.on_change,
        "debounceSeconds": spec.debounce_seconds,
        "dryRun": spec.dry_run,
        "enabled": spec.enabled,
    })
}

/// Create a schedule. A periodic schedule starts its first run right away; a change-triggered
/// one waits for the cluster's next change.
#[utoipa::path(post, path = "/api/v1/schedules", tag = "schedules",
    request_body = ScheduleRequest,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 400, description = "The body is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 404, description = "No such cluster or profile (`not_found`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "Neither an interval nor onChange, or a value out of \
            range (`invalid_schedule`), or the body does not match the schema \
            (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn create_schedule(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<ScheduleRequest>,
) -> Result<(StatusCode, Json<ScheduleView>), ApiError> {
    let (spec, revision) = check(&state, request).await?;
    let record = state.store.insert_schedule(&spec, revision).await?;
    state.schedules_changed.notify_one();
    audit::record(
        &state.store,
        &actor,
        action::SCHEDULE_CREATE,
        kind::SCHEDULE,
        &record.id.to_string(),
        Some(audit_detail(&record.spec)),
    )
    .await;
    Ok((StatusCode::CREATED, Json(view(record))))
}

/// Every schedule.
#[utoipa::path(get, path = "/api/v1/schedules", tag = "schedules",
    responses((status = 200, description = "Every schedule", body = ScheduleList)))]
pub async fn list_schedules(State(state): State<AppState>) -> Result<Json<ScheduleList>, ApiError> {
    let items = state
        .store
        .list_schedules()
        .await?
        .into_iter()
        .map(view)
        .collect();
    Ok(Json(ScheduleList { items }))
}

/// One schedule.
#[utoipa::path(get, path = "/api/v1/schedules/{id}", tag = "schedules",
    params(("id" = i64, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such schedule (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_schedule(
    State(store): State<Store>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<ScheduleView>, ApiError> {
    Ok(Json(view(store.get_schedule(id).await?)))
}

/// Replace what a schedule does (e.g. `enabled: false` to pause it). Its history is kept.
#[utoipa::path(put, path = "/api/v1/schedules/{id}", tag = "schedules",
    params(("id" = i64, Path, description = "Schedule id")),
    request_body = ScheduleRequest,
    responses(
        (status = 200, description = "Replaced", body = ScheduleView),
        (status = 400, description = "`id` is not an integer (`invalid_path`), or the body is \
            not JSON (`invalid_json`)", body = ErrorBody),
        (status = 404, description = "No such schedule, cluster or profile (`not_found`)",
            body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "Neither an interval nor onChange, or a value out of \
            range (`invalid_schedule`), or the body does not match the schema \
            (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn put_schedule(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
    ApiJson(request): ApiJson<ScheduleRequest>,
) -> Result<Json<ScheduleView>, ApiError> {
    state.store.get_schedule(id).await?;
    let (spec, revision) = check(&state, request).await?;
    let record = state.store.update_schedule(id, &spec, revision).await?;
    state.schedules_changed.notify_one();
    audit::record(
        &state.store,
        &actor,
        action::SCHEDULE_UPDATE,
        kind::SCHEDULE,
        &record.id.to_string(),
        Some(audit_detail(&record.spec)),
    )
    .await;
    Ok(Json(view(record)))
}

/// Delete a schedule. The runs it started are kept.
#[utoipa::path(delete, path = "/api/v1/schedules/{id}", tag = "schedules",
    params(("id" = i64, Path, description = "Schedule id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such schedule (`not_found`)", body = ErrorBody),
    ))]
pub async fn delete_schedule(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
) -> Result<StatusCode, ApiError> {
    let record = state.store.delete_schedule(id).await?;
    state.schedules_changed.notify_one();
    audit::record(
        &state.store,
        &actor,
        action::SCHEDULE_DELETE,
        kind::SCHEDULE,
        &record.id.to_string(),
        Some(audit_detail(&record.spec)),
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}
