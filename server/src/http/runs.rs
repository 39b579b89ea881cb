//! Runs: evaluate a profile over a cluster's current snapshot, record the report and every
//! proposal as a `proposed` decision.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Instant;

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::{page_limit, timestamp};
use crate::app::AppState;
use crate::profile::ProfileSpec;
use crate::run::{self, RunError, RunReport};
use crate::store::{NewDecision, RunEnd, RunRecord, RunStatus};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    /// Cluster name.
    #[schema(example = "demo")]
    pub cluster: String,
    /// Profile name.
    #[schema(example = "default")]
    pub profile: String,
}

/// A run. `status` is `running` until it becomes `succeeded` or `failed`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub id: i64,
    pub status: RunStatus,
    pub cluster: String,
    /// The cluster revision (snapshot) the run evaluated.
    pub cluster_revision: i64,
    pub profile: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Proposals recorded as decisions (see `GET /api/v1/decisions?run={id}`).
    pub proposals: Option<usize>,
    /// Per-policy timing and outcome, and the proposals; present once finished successfully.
    pub report: Option<RunReport>,
    /// Why the run failed.
    pub error: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunList {
    pub items: Vec<RunView>,
    /// Pass as `cursor` to get the next (older) page; null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunListQuery {
    /// Page size (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    pub cursor: Option<String>,
}

fn view(record: RunRecord) -> Result<RunView, ApiError> {
    let report: Option<RunReport> = record
        .report
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| ApiError::internal(&format!("stored report of run {}", record.id), e))?;
    Ok(RunView {
        id: record.id,
        status: record.status,
        cluster: record.cluster,
        cluster_revision: record.cluster_revision,
        profile: record.profile,
        started_at: timestamp(record.started_at),
        finished_at: record.finished_at.map(timestamp),
        proposals: report.as_ref().map(|r| r.proposals.len()),
        report,
        error: record.error,
    })
}

/// Evaluate a profile over a cluster, the way one descheduler cycle does: the deschedule
/// plugins of every plugin set, then the balance plugins, sharing the limits. The response is
/// the finished run; every proposal is stored as a `proposed` decision.
#[utoipa::path(post, path = "/api/v1/runs", tag = "runs",
    request_body = CreateRun,
    responses(
        (status = 201, description = "The finished run, `succeeded`; a policy that failed \
            (timeout, trap, memory cap…) is recorded in its outcome in the report while the \
            run's other policies still run", body = RunView),
        (status = 404, description = "No such cluster or profile", body = ErrorBody),
        (status = 409, description = "The cluster's stored state is not loaded", body = ErrorBody),
        (status = 422, description = "The profile cannot run on this cluster (e.g. a \
            priorityThreshold naming a PriorityClass it does not have); the run is recorded \
            as failed, `details.run` is its id", body = ErrorBody),
    ))]
pub async fn create_run(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<CreateRun>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let record = state.store.get_cluster(&request.cluster).await?;
    let snapshot = state.clusters.get(&record.name).ok_or_else(|| {
        ApiError::conflict(
            "cluster_not_loaded",
            format!(
                "the stored state of cluster \"{}\" could not be loaded at start-up (see the \
                 server log); push a new snapshot",
                record.name
            ),
        )
    })?;
    let profile = state.store.get_profile(&request.profile).await?;
    let spec: ProfileSpec = serde_json::from_value(profile.spec)
        .map_err(|e| ApiError::internal(&format!("stored spec of profile {}", profile.name), e))?;

    let execute = {
        let state = state.clone();
        async move { execute(&state, record.name, profile.name, spec, snapshot).await }
    };
    state
        .detached(execute)
        .await
        .map_err(|e| ApiError::internal("run task failed", e))?
}

/// Record the run, evaluate it, record the outcome.
async fn execute(
    state: &AppState,
    cluster: String,
    profile: String,
    spec: ProfileSpec,
    snapshot: std::sync::Arc<crate::cluster::ClusterSnapshot>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let run = state
        .store
        .insert_run(&cluster, snapshot.revision as i64, &profile)
        .await?;
    let span = tracing::info_span!("run", run_id = run.id, cluster = %cluster, profile = %profile);
    let permit = state
        .evaluations
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| ApiError::internal("evaluation semaphore closed", e))?;
    let (engine, registry) = (state.engine.clone(), state.registry.clone());
    let outcome = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        span.in_scope(|| run::execute(&engine, &registry, &spec, &snapshot))
    })
    .await;

    match outcome {
        Ok(Ok(report)) => {
            let recording = Instant::now();
            let decisions: Vec<NewDecision<'_>> = report
                .proposals
                .iter()
                .map(|p| NewDecision {
                    plugin_set: &p.plugin_set,
                    plugin: &p.plugin,
                    pod_uid: &p.pod_uid,
                    pod_namespace: &p.namespace,
                    pod_name: &p.name,
                    node: &p.node,
                    reason: &p.reason,
                })
                .collect();
            let report_json = serde_json::to_string(&report)
                .map_err(|e| ApiError::internal("serialising a run report", e))?;
            let finished_at = state
                .store
                .finish_run(
                    run.id,
                    RunEnd::Succeeded {
                        report: &report_json,
                        decisions: &decisions,
                    },
                )
                .await?;
            drop(decisions);
            tracing::info!(
                run_id = run.id,
                proposals = report.proposals.len(),
                duration_ms = report.duration_ms,
                record_ms = recording.elapsed().as_secs_f64() * 1000.0,
                "run succeeded"
            );
            // The stored row holds exactly this; no need to read it back.
            Ok((
                StatusCode::CREATED,
                Json(RunView {
                    id: run.id,
                    status: RunStatus::Succeeded,
                    cluster: run.cluster,
                    cluster_revision: run.cluster_revision,
                    profile: run.profile,
                    started_at: timestamp(run.started_at),
                    finished_at: Some(timestamp(finished_at)),
                    proposals: Some(report.proposals.len()),
                    report: Some(report),
                    error: None,
                }),
            ))
        }
        Ok(Err(RunError::InvalidProfile(errors))) => {
            let summary = errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            let message =
                format!("profile \"{profile}\" cannot run on cluster \"{cluster}\": {summary}");
            state
                .store
                .finish_run(run.id, RunEnd::Failed { error: &message })
                .await?;
            tracing::warn!(run_id = run.id, "run failed: {message}");
            Err(ApiError::unprocessable("invalid_profile", message)
                .with_details(json!({ "run": run.id, "errors": errors })))
        }
        Err(join) => {
            let message = "internal error: the run crashed; the cause is in the server log";
            if let Err(e) = state
                .store
                .finish_run(run.id, RunEnd::Failed { error: message })
                .await
            {
                tracing::error!(run_id = run.id, error = %e, "could not record a crashed run");
            }
            Err(ApiError::internal(&format!("run {} crashed", run.id), join))
        }
    }
}

/// One run.
#[utoipa::path(get, path = "/api/v1/runs/{id}", tag = "runs",
    params(("id" = i64, Path, description = "Run id")),
    responses(
        (status = 200, body = RunView),
        (status = 404, body = ErrorBody),
    ))]
pub async fn get_run(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(view(state.store.get_run(id).await?)?))
}

/// Runs, newest first.
#[utoipa::path(get, path = "/api/v1/runs", tag = "runs",
    params(RunListQuery),
    responses(
        (status = 200, body = RunList),
        (status = 400, body = ErrorBody),
    ))]
pub async fn list_runs(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<RunListQuery>,
) -> Result<Json<RunList>, ApiError> {
    let limit = page_limit(query.limit)?;
    let before = query
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
    let runs = state.store.list_runs(limit + 1, before).await?;
    let more = runs.len() > limit as usize;
    let items = runs
        .into_iter()
        .take(limit as usize)
        .map(view)
        .collect::<Result<Vec<_>, _>>()?;
    let next = if more {
        items.last().map(|r| r.id.to_string())
    } else {
        None
    };
    Ok(Json(RunList { items, next }))
}
