//! `GET`/`PUT /api/v1/retention`: the keep times in force (the `--retain-*` flags and
//! `--prune-interval`, with the overrides stored in the database on top), the overrides
//! themselves, and what the last retention pass did.
//!
//! Owns: the answer's shape and the PUT's validation errors (every bad field named).
//! Must not: prune or decide what a keep time deletes (`crate::retention`, `store::retention`);
//! a PUT takes effect at the next pass, it does not start one.

use axum::Json;
use axum::extract::State;

use super::auth::Actor;
use super::error::{ApiError, ErrorBody, FieldProblem, PayloadTooLarge, UnsupportedMediaType};
use super::extract::ApiJson;
use super::state::AppState;
use super::timestamp;
use crate::audit;
use crate::config::RetentionSettings;
use crate::retention::{
    self, EVENTS_KEEP, EVENTS_MAX, FieldError, LAST_PASS_KEY, LastPass, OVERRIDES_KEY, Overrides,
    render_duration, render_keep,
};

/// Keep times and interval, written as the flags are (`90d`, `12h`; `0`: forever).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionValues {
    #[schema(example = "1d")]
    pub proposals: String,
    #[schema(example = "6h")]
    pub dry_runs: String,
    #[schema(example = "90d")]
    pub history: String,
    #[schema(example = "30d")]
    pub runs: String,
    #[schema(example = "365d")]
    pub audit: String,
    #[schema(example = "10m")]
    pub interval: String,
}

impl From<&RetentionSettings> for RetentionValues {
    fn from(s: &RetentionSettings) -> Self {
        RetentionValues {
            proposals: render_keep(s.proposals),
            dry_runs: render_keep(s.dry_runs),
            history: render_keep(s.history),
            runs: render_keep(s.runs),
            audit: render_keep(s.audit),
            interval: render_duration(s.interval),
        }
    }
}

/// How long the change feed (`GET /api/v1/events`) keeps events (fixed).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsRetention {
    #[schema(example = "1d")]
    pub keep: String,
    /// The most events kept, whatever their age.
    #[schema(example = 100000)]
    pub max_events: u64,
}

/// The retention settings and the last pass.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionView {
    /// What the next pass uses: the flags with the overrides on top.
    pub effective: RetentionValues,
    /// The flags' values (what a field without an override gets).
    pub defaults: RetentionValues,
    /// The fields set over the API (`PUT`); the others follow their flag.
    pub overrides: Overrides,
    /// When the overrides were last set; null: never.
    #[schema(format = DateTime)]
    pub updated_at: Option<String>,
    pub events: EventsRetention,
    /// What the last pass did (whichever replica ran it); null before the first.
    pub last_pass: Option<LastPass>,
}

impl FieldProblem for FieldError {
    fn field(&self) -> &str {
        &self.field
    }
    fn message(&self) -> &str {
        &self.message
    }
}

async fn view(state: &AppState) -> Result<RetentionView, ApiError> {
    let flags = state.settings.retention;
    let (effective, overrides, updated_at) = retention::effective(&state.store, flags).await?;
    let last_pass = match state.store.setting(LAST_PASS_KEY).await? {
        Some((value, _)) => serde_json::from_value(value).ok(),
        None => None,
    };
    Ok(RetentionView {
        effective: (&effective).into(),
        defaults: (&flags).into(),
        overrides,
        updated_at: updated_at.map(timestamp),
        events: EventsRetention {
            keep: render_duration(EVENTS_KEEP),
            max_events: EVENTS_MAX,
        },
        last_pass,
    })
}

/// The retention settings in force (flags with the API's overrides on top) and the last pass.
#[utoipa::path(get, path = "/api/v1/retention", tag = "retention",
    responses((status = 200, description = "The settings and the last pass", body = RetentionView)))]
pub async fn get_retention(State(state): State<AppState>) -> Result<Json<RetentionView>, ApiError> {
    Ok(Json(view(&state).await?))
}

/// Replace the overrides: each field given (not null) overrides its flag, the others follow
/// their flag again. Takes effect at the next pass.
#[utoipa::path(put, path = "/api/v1/retention", tag = "retention",
    request_body = Overrides,
    responses(
        (status = 200, description = "The settings now in force", body = RetentionView),
        (status = 400, description = "The body is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "A value cannot be used (`invalid_retention`: e.g. `audit` \
            shorter than a day, an interval of 0; `details.errors` lists every field and why), \
            or the body does not match the schema (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn put_retention(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(overrides): ApiJson<Overrides>,
) -> Result<Json<RetentionView>, ApiError> {
    if let Err(errors) = overrides.apply(state.settings.retention) {
        return Err(ApiError::field_problems(
            "invalid_retention",
            "the retention settings",
            &errors,
        ));
    }
    let value = serde_json::to_value(&overrides)
        .map_err(|e| ApiError::internal("serialising the retention overrides", e))?;
    let work = {
        let state = state.clone();
        async move {
            state.store.put_setting(OVERRIDES_KEY, &value).await?;
            audit::record(
                &state.store,
                &actor,
                audit::action::RETENTION_PUT,
                audit::kind::RETENTION,
                "retention",
                Some(value),
            )
            .await;
            Ok::<_, ApiError>(Json(view(&state).await?))
        }
    };
    state
        .in_flight
        .detached(work)
        .await
        .map_err(|e| ApiError::internal("retention settings task failed", e))?
}
