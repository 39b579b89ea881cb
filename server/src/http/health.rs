//! `/healthz` (the process answers) and `/readyz` (start-up finished: built-in policies
//! compiled, stored state loaded, and every managed cluster that answers listed once).
//!
//! Owns what readiness means, for a Kubernetes readinessProbe: not ready (503) until start-up
//! is over and no reachable managed cluster is still on its first sync (runs there would be
//! refused); ready but `degraded` (200) while a managed cluster cannot be reached or its Lease
//! cannot be taken (the API serves, that cluster is shown as it is). Must not: decide any of
//! these states itself (`managed` does).

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
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    /// `ready`, or `degraded` when a managed Kubernetes cluster is not synced (the API still
    /// serves; that cluster's state is its last revision) or its Lease cannot be taken.
    #[schema(example = "ready")]
    pub status: &'static str,
    /// Registered policies.
    pub policies: usize,
    /// Clusters with a loaded snapshot.
    pub clusters: usize,
    /// Managed Kubernetes clusters that are not synced now, and why.
    pub unsynced: Vec<Unsynced>,
    /// Managed Kubernetes clusters this server cannot act on because it cannot read or take
    /// their Lease, and why (`cannot take the lease rebalancer/rebalancer-east: create:
    /// Forbidden: … (403)`): their approved pod migrations wait.
    pub cannot_act: Vec<Unsynced>,
}

/// A managed cluster that is connecting, lost its connection, or cannot act.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Unsynced {
    pub cluster: String,
    /// `connecting: …` or `disconnected: …` with the last error, or why its Lease cannot be
    /// taken.
    pub reason: String,
}

/// Liveness: the process is up and serving HTTP.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The server is alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Readiness: 503 until the built-in policies are compiled and stored state is loaded
/// (`not_ready`), and while a managed Kubernetes cluster the server reaches is on its first
/// sync (`cluster_syncing`, naming it; runs there would be refused). A managed cluster that
/// cannot be reached, or whose Lease cannot be taken, does not make the server unready (the
/// others are still served): it is named under `unsynced` or `cannotAct`, with
/// `status: degraded`.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready to serve the API (`ready`), or serving with a \
            managed cluster unreachable or unable to act (`degraded`)", body = Readiness),
        (status = 503, description = "Still starting (`not_ready`), or a managed cluster is on \
            its first sync (`cluster_syncing`: `details.syncing` lists them with their state); \
            retry after `Retry-After` seconds",
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying")),
            body = ErrorBody),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    if !state.is_ready() {
        return Err(ApiError::not_ready());
    }
    let syncing = state.managed.first_sync();
    if !syncing.is_empty() {
        let names: Vec<String> = syncing
            .iter()
            .map(|(cluster, why)| format!("{cluster} ({why})"))
            .collect();
        let details: Vec<Unsynced> = syncing
            .into_iter()
            .map(|(cluster, reason)| Unsynced { cluster, reason })
            .collect();
        return Err(ApiError::busy(
            "cluster_syncing",
            format!(
                "managed Kubernetes cluster(s) on their first sync: {}; ready once they are \
                 listed",
                names.join(", ")
            ),
            1,
        )
        .with_details(serde_json::json!({ "syncing": details })));
    }
    let listed = |pairs: Vec<(String, String)>| -> Vec<Unsynced> {
        pairs
            .into_iter()
            .map(|(cluster, reason)| Unsynced { cluster, reason })
            .collect()
    };
    let unsynced = listed(state.managed.not_synced());
    let cannot_act = listed(state.managed.cannot_act());
    Ok(Json(Readiness {
        status: if unsynced.is_empty() && cannot_act.is_empty() {
            "ready"
        } else {
            "degraded"
        },
        policies: state.registry.list().len(),
        clusters: state.clusters.len(),
        unsynced,
        cannot_act,
    }))
}
