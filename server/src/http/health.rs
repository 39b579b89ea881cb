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
    #[schema(example = "ready")]
    pub status: &'static str,
    /// Registered policies.
    pub policies: usize,
    /// Clusters with a loaded snapshot.
    pub clusters: usize,
}

/// Liveness: the process is up and serving HTTP.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The server is alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Readiness: 503 until the built-in policies are compiled and stored state is loaded.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready to serve the API", body = Readiness),
        (status = 503, description = "Still starting", body = ErrorBody),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    if !state.is_ready() {
        return Err(ApiError::not_ready());
    }
    Ok(Json(Readiness {
        status: "ready",
        policies: state.registry.list().len(),
        clusters: state.clusters.len(),
    }))
}
