//! `/healthz` (the process answers) and `/readyz` (start-up finished: built-in policies
//! compiled, stored state loaded).

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::AppState;
use super::error::{ApiError, ErrorBody};

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: &'static str,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Readiness {
    /// `ready`, or `degraded` when a managed Kubernetes cluster is not synced (the API still
    /// serves; that cluster's state is its last revision).
    #[schema(example = "ready")]
    pub status: &'static str,
    /// Registered policies.
    pub policies: usize,
    /// Clusters with a loaded snapshot.
    pub clusters: usize,
    /// Managed Kubernetes clusters that are not synced now, and why.
    pub unsynced: Vec<Unsynced>,
}

/// A managed cluster that is connecting or lost its connection.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Unsynced {
    pub cluster: String,
    /// `connecting: …` or `disconnected: …` with the last error.
    pub reason: String,
}

/// Liveness: the process is up and serving HTTP.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The server is alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Readiness: 503 until the built-in policies are compiled and stored state is loaded. A
/// managed cluster that is not synced does not make the server unready (the others are still
/// served): it is named under `unsynced`, with `status: degraded`.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready to serve the API", body = Readiness),
        (status = 503, description = "Still starting", body = ErrorBody),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    if !state.is_ready() {
        return Err(ApiError::not_ready());
    }
    let unsynced: Vec<Unsynced> = state
        .managed
        .not_synced()
        .into_iter()
        .map(|(cluster, reason)| Unsynced { cluster, reason })
        .collect();
    Ok(Json(Readiness {
        status: if unsynced.is_empty() {
            "ready"
        } else {
            "degraded"
        },
        policies: state.registry.list().len(),
        clusters: state.clusters.len(),
        unsynced,
    }))
}
