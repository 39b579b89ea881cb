//! `GET /metrics`: Prometheus text exposition. Public, like `/healthz`.

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::{ApiError, Internal};
use crate::metrics::DatabaseGauges;

/// Content type of the Prometheus text format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Metrics in the Prometheus text format: runs, per-policy evaluation durations, proposals,
/// decisions by status, evictions, pod migrations and snapshot pushes in progress, rows retention
/// deleted and the database's size; descheduler v0.36's series (evictions, cycle and strategy
/// durations, build info); the process's CPU, memory and file descriptors.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String,
            content_type = "text/plain"),
        (status = 500, response = Internal),
    ))]
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let decisions = state.store.count_decisions_by_status().await?;
    let file = state.store.file_stats().await?;
    let page = u64::try_from(file.page_size).unwrap_or(0);
    let mut wal = state.settings.database.clone().into_os_string();
    wal.push("-wal");
    let mut text = state.metrics.render(&DatabaseGauges {
        decisions,
        file_bytes: u64::try_from(file.pages).unwrap_or(0) * page,
        free_bytes: u64::try_from(file.free_pages).unwrap_or(0) * page,
        wal_bytes: tokio::fs::metadata(&wal).await.map_or(0, |m| m.len()),
    });
    state.snapshot_pushes.render_metrics(&mut text);
    crate::metrics::process::render(&mut text);
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    Ok(response)
}
