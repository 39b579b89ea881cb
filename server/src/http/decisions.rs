//! Decisions: every proposal of every run, filtered by run and status, paginated.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiPath, ApiQuery};
use super::{page_limit, timestamp};
use crate::app::AppState;
use crate::store::{DecisionFilter, DecisionRecord, DecisionStatus};

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PodIdentity {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// A proposed pod move and what has become of it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionView {
    pub id: i64,
    pub status: DecisionStatus,
    pub pod: PodIdentity,
    /// The node the pod was on when proposed.
    pub node: String,
    /// The policy (plugin) that proposed it.
    pub plugin: String,
    /// The DeschedulerPolicy `profiles[]` entry it came from.
    pub plugin_set: String,
    /// Our profile's name.
    pub profile: String,
    pub cluster: String,
    /// Why, in words.
    pub reason: String,
    /// The run that proposed it.
    pub run: i64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DecisionList {
    pub items: Vec<DecisionView>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DecisionQuery {
    /// Only the decisions of this run.
    pub run: Option<i64>,
    /// Only decisions in this status.
    pub status: Option<DecisionStatus>,
    /// Page size (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    pub cursor: Option<String>,
}

fn view(d: DecisionRecord) -> DecisionView {
    DecisionView {
        id: d.id,
        status: d.status,
        pod: PodIdentity {
            namespace: d.pod_namespace,
            name: d.pod_name,
            uid: d.pod_uid,
        },
        node: d.node,
        plugin: d.plugin,
        plugin_set: d.plugin_set,
        profile: d.profile,
        cluster: d.cluster,
        reason: d.reason,
        run: d.run_id,
        created_at: timestamp(d.created_at),
        updated_at: timestamp(d.updated_at),
    }
}

/// Decisions in the order they were proposed.
#[utoipa::path(get, path = "/api/v1/decisions", tag = "decisions",
    params(DecisionQuery),
    responses(
        (status = 200, body = DecisionList),
        (status = 400, body = ErrorBody),
    ))]
pub async fn list_decisions(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<DecisionQuery>,
) -> Result<Json<DecisionList>, ApiError> {
    let limit = page_limit(query.limit)?;
    let after = query
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<i64>().map_err(|_| {
                ApiError::bad_request(
                    "invalid_cursor",
                    format!("cursor {c:?} is not one this API returned"),
                )
            })
        })
        .transpose()?;
    let filter = DecisionFilter {
        run: query.run,
        status: query.status,
        after,
    };
    let (items, next) = state.store.list_decisions(&filter, limit).await?;
    Ok(Json(DecisionList {
        items: items.into_iter().map(view).collect(),
        next: next.map(|id| id.to_string()),
    }))
}

/// One decision.
#[utoipa::path(get, path = "/api/v1/decisions/{id}", tag = "decisions",
    params(("id" = i64, Path, description = "Decision id")),
    responses(
        (status = 200, body = DecisionView),
        (status = 404, body = ErrorBody),
    ))]
pub async fn get_decision(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<DecisionView>, ApiError> {
    Ok(Json(view(state.store.get_decision(id).await?)))
}
