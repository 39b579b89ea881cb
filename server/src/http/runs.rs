//! Runs: evaluate a profile over a cluster's current snapshot, record the report and every
//! proposal as a `proposed` decision.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody, PayloadTooLarge, UnsupportedMediaType};
use super::extract::{ApiJson, ApiPath};
use super::page::{Page, PageParams};
use super::timestamp;
use crate::audit::{self, action, kind};
use crate::trigger::{self, FinishedRun, RunRequest};
use rebalancer_engine::run::RunReport;
use rebalancer_store::{RunRecord, RunStatus, RunTrigger, Store};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    /// Cluster name.
    #[schema(example = "demo")]
    pub cluster: String,
    /// Profile name.
    #[schema(example = "default")]
    pub profile: String,
    /// A dry run records its proposals as decisions that can never be approved or executed.
    #[serde(default, rename = "dryRun")]
    pub dry_run: bool,
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
    /// Per-policy timing and outcome; present once finished successfully. The proposals are
    /// the run's decisions.
    pub report: Option<RunReport>,
    /// Why the run failed.
    pub error: Option<String>,
    /// Its decisions can never be approved or executed.
    pub dry_run: bool,
    /// What started it: `manual` (this API), `schedule` (an interval) or `change` (the
    /// cluster changed).
    pub trigger: RunTrigger,
    /// The schedule that started it.
    pub schedule: Option<i64>,
    /// How many of its decisions retention deleted (proposals nobody acted on, after
    /// `--retain-proposals` or `--retain-dry-runs`; finished pod migrations' and rejected
    /// decisions after `--retain-history`). `GET /api/v1/decisions?run={id}` lists the others.
    pub decisions_pruned: i64,
    /// When the last of its decisions retention deletes went (null while some are left, or
    /// before any was due). Decisions someone acted on stay until `--retain-history`.
    pub decisions_pruned_at: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunList {
    pub items: Vec<RunView>,
    /// Pass as `cursor` to get the next (older) page; null on the last page.
    pub next: Option<String>,
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
        proposals: report.as_ref().map(|r| r.proposal_count),
        report,
        error: record.error,
        dry_run: record.dry_run,
        trigger: record.trigger,
        schedule: record.schedule_id,
        decisions_pruned: record.decisions_pruned,
        decisions_pruned_at: record.decisions_pruned_at.map(timestamp),
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
        (status = 400, description = "The body is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 404, description = "No such cluster or profile (`not_found`)", body = ErrorBody),
        (status = 409, description = "The cluster's stored state is not loaded \
            (`cluster_not_loaded`), or the cluster was deleted while the run was in progress \
            (`cluster_deleted`: the run is recorded as failed without its proposals and policy \
            state, `details.run` is its id)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "The profile cannot run on this cluster \
            (`invalid_profile`, e.g. a priorityThreshold naming a PriorityClass it does not \
            have; the run is recorded as failed, `details.run` is its id), or the body does \
            not match the schema (`invalid_request`)", body = ErrorBody),
        (status = 503, description = "The server is starting (`not_ready`), or a Kubernetes \
            cluster this server manages has no state yet (`cluster_syncing`: its first sync is under way, or its API server has not \
            answered since start-up; the message says which); retry after `Retry-After` \
            seconds. Nothing is recorded",
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying")),
            body = ErrorBody),
    ))]
pub async fn create_run(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<CreateRun>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let execute = trigger::execute_run(
        state.runs.clone(),
        RunRequest::manual(&request.cluster, &request.profile, request.dry_run),
    );
    let outcome = state
        .in_flight
        .detached(execute)
        .await
        .map_err(|e| ApiError::internal("run task failed", e))?;
    let audit_detail = |run: Option<i64>, status: &str| {
        json!({"run": run, "cluster": request.cluster, "profile": request.profile,
               "dryRun": request.dry_run, "status": status})
    };
    match outcome {
        Ok(FinishedRun { record, report }) => {
            audit::record(
                &state.store,
                &actor,
                action::RUN_CREATE,
                kind::RUN,
                &record.id.to_string(),
                Some(audit_detail(Some(record.id), "succeeded")),
            )
            .await;
            let mut run_view = view(record)?;
            run_view.proposals = Some(report.proposal_count);
            run_view.report = Some(report);
            Ok((StatusCode::CREATED, Json(run_view)))
        }
        Err(failure) => {
            if let Some(run) = failure.run_id() {
                audit::record(
                    &state.store,
                    &actor,
                    action::RUN_CREATE,
                    kind::RUN,
                    &run.to_string(),
                    Some(audit_detail(Some(run), "failed")),
                )
                .await;
            }
            Err(failure.into())
        }
    }
}

/// One run. A run outlives its proposals: once retention deleted them, `decisionsPruned` says
/// how many went.
#[utoipa::path(get, path = "/api/v1/runs/{id}", tag = "runs",
    params(("id" = i64, Path, description = "Run id")),
    responses(
        (status = 200, description = "The run", body = RunView),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such run, or retention deleted it (`not_found`)",
            body = ErrorBody),
    ))]
pub async fn get_run(
    State(store): State<Store>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(view(store.get_run(id).await?)?))
}

/// Runs, newest first.
#[utoipa::path(get, path = "/api/v1/runs", tag = "runs",
    params(PageParams),
    responses(
        (status = 200, description = "One page of runs, newest first", body = RunList),
        (status = 400, description = "A query parameter is not valid (`invalid_query`: e.g. a \
            `limit` outside 1–1000), or the cursor is not one this API returned \
            (`invalid_cursor`)", body = ErrorBody),
    ))]
pub async fn list_runs(State(store): State<Store>, page: Page) -> Result<Json<RunList>, ApiError> {
    let before = page.id_cursor()?;
    let limit = page.limit;
    let runs = store.list_runs(limit + 1, before).await?;
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
