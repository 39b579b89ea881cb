//! Policies: upload (`POST` with the `.wasm` as body), list, get, delete.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiPath, RawBody};
use super::timestamp;
use crate::audit::{self, action, kind};
use rebalancer_engine::PolicyMeta;
use rebalancer_store::{self as store, PolicyRecord, PutPolicyError};

/// A registered policy.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    #[serde(flatten)]
    pub meta: PolicyMeta,
    /// Shipped with the server (cannot be deleted or replaced).
    pub builtin: bool,
    /// Compiled and usable in runs (false only for a stored upload that no longer compiles).
    pub loaded: bool,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PolicyList {
    pub items: Vec<PolicyView>,
}

/// The raw bytes of a WebAssembly component.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct WasmModule(#[allow(dead_code)] Vec<u8>);

fn view(state: &AppState, record: PolicyRecord) -> Result<PolicyView, ApiError> {
    let meta: PolicyMeta = serde_json::from_value(record.metadata).map_err(|e| {
        ApiError::internal(&format!("stored metadata of policy {}", record.name), e)
    })?;
    let loaded = state
        .registry
        .get(&record.name)
        .is_some_and(|p| p.policy.meta.digest == record.digest);
    Ok(PolicyView {
        meta,
        builtin: record.builtin,
        loaded,
        created_at: timestamp(record.created_at),
        updated_at: timestamp(record.updated_at),
    })
}

/// Upload a policy module: a WebAssembly component built against the policy ABI. It is
/// validated, compiled and introspected (`info`) before it is stored; uploading a module with
/// the name of an existing upload replaces it.
#[utoipa::path(post, path = "/api/v1/policies", tag = "policies",
    request_body(description = "The .wasm file (any Content-Type is accepted)",
        content((WasmModule = "application/wasm"), (WasmModule = "application/octet-stream"))),
    responses(
        (status = 201, description = "Registered", body = PolicyView),
        (status = 200, description = "Replaced an earlier upload of the same name", body = PolicyView),
        (status = 409, description = "The name belongs to a built-in policy (`builtin_policy`)",
            body = ErrorBody),
        (status = 413, description = "Over the module size cap (`module_too_large`) or the \
            server's --body-limit (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "Not a usable policy (not wasm, core module, wrong ABI, \
            forbidden imports, missing exports, bad metadata); `code` says which", body = ErrorBody),
    ))]
pub async fn upload_policy(
    State(state): State<AppState>,
    actor: Actor,
    RawBody(wasm): RawBody,
) -> Result<(StatusCode, Json<PolicyView>), ApiError> {
    if wasm.is_empty() {
        return Err(ApiError::unprocessable(
            "not_wasm",
            "the body is empty: send the policy's .wasm file as the request body",
        ));
    }
    // Compiles wait for a compile slot of the engine's own, not for an evaluation permit: an
    // upload, however slow to compile, never holds up a run.
    let engine = state.engine.clone();
    let bytes = wasm.clone();
    let compiled = tokio::task::spawn_blocking(move || engine.compile(&bytes))
        .await
        .map_err(|e| ApiError::internal("policy compilation task failed", e))??;

    let register = {
        let state = state.clone();
        async move { register(&state, compiled, &wasm).await }
    };
    let (status, Json(policy)) = state
        .in_flight
        .detached(register)
        .await
        .map_err(|e| ApiError::internal("policy registration task failed", e))??;
    audit::record(
        &state.store,
        &actor,
        action::POLICY_UPLOAD,
        kind::POLICY,
        &policy.meta.name,
        Some(serde_json::json!({
            "version": policy.meta.version,
            "digest": policy.meta.digest,
            "created": status == StatusCode::CREATED,
        })),
    )
    .await;
    Ok((status, Json(policy)))
}

/// Store an uploaded policy and register it, under the catalogue lock.
async fn register(
    state: &AppState,
    compiled: std::sync::Arc<rebalancer_engine::CompiledPolicy>,
    wasm: &[u8],
) -> Result<(StatusCode, Json<PolicyView>), ApiError> {
    let meta = compiled.meta.clone();
    let _catalog = state.catalog_lock.lock().await;
    if state.registry.get(&meta.name).is_some_and(|p| p.builtin) {
        return Err(PutPolicyError::Builtin(meta.name.clone()).into());
    }
    let metadata = serde_json::to_value(&meta)
        .map_err(|e| ApiError::internal("serialising policy metadata", e))?;
    let (record, created) = state
        .store
        .put_user_policy(&store::NewPolicy {
            name: &meta.name,
            version: &meta.version,
            digest: &meta.digest,
            abi_version: &meta.abi_version,
            wasm,
            metadata: &metadata,
        })
        .await?;
    let replaced = state.registry.get(&meta.name);
    state.registry.insert(compiled, false);
    if let Some(old) = replaced.filter(|old| old.policy.meta.digest != meta.digest) {
        state.engine.forget(&old.policy.meta.digest);
    }
    tracing::info!(policy = %meta.name, version = %meta.version, digest = %meta.digest, created, "policy uploaded");
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view(state, record)?)))
}

/// List every policy, built-ins first by name.
#[utoipa::path(get, path = "/api/v1/policies", tag = "policies",
    responses((status = 200, description = "Every policy", body = PolicyList)))]
pub async fn list_policies(State(state): State<AppState>) -> Result<Json<PolicyList>, ApiError> {
    let mut items = state
        .store
        .list_policies()
        .await?
        .into_iter()
        .map(|r| view(&state, r))
        .collect::<Result<Vec<_>, _>>()?;
    items.sort_by(|a, b| {
        b.builtin
            .cmp(&a.builtin)
            .then(a.meta.name.cmp(&b.meta.name))
    });
    Ok(Json(PolicyList { items }))
}

/// One policy.
#[utoipa::path(get, path = "/api/v1/policies/{name}", tag = "policies",
    params(("name" = String, Path, description = "Plugin name, e.g. LowNodeUtilization")),
    responses(
        (status = 200, description = "The policy", body = PolicyView),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such policy (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_policy(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<PolicyView>, ApiError> {
    let record = state.store.get_policy(&name).await?;
    Ok(Json(view(&state, record)?))
}

/// Delete an uploaded policy. Built-ins cannot be deleted, and a policy a profile enables
/// cannot be deleted until the profile stops using it.
#[utoipa::path(delete, path = "/api/v1/policies/{name}", tag = "policies",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such policy (`not_found`)", body = ErrorBody),
        (status = 409, description = "Built-in (`builtin_policy`), or used by a profile \
            (`policy_in_use`, the profiles in `details.profiles`)", body = ErrorBody),
    ))]
pub async fn delete_policy(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let delete = {
        let (state, name) = (state.clone(), name.clone());
        async move { delete(&state, &name).await }
    };
    let status = state
        .in_flight
        .detached(delete)
        .await
        .map_err(|e| ApiError::internal("policy deletion task failed", e))??;
    audit::record(
        &state.store,
        &actor,
        action::POLICY_DELETE,
        kind::POLICY,
        &name,
        None,
    )
    .await;
    Ok(status)
}

async fn delete(state: &AppState, name: &str) -> Result<StatusCode, ApiError> {
    let _catalog = state.catalog_lock.lock().await;
    if state.registry.get(name).is_some_and(|p| p.builtin) {
        return Err(ApiError::conflict(
            "builtin_policy",
            format!(
                "\"{name}\" is a built-in policy and cannot be deleted; to stop using it, leave \
                 it out of your profiles"
            ),
        ));
    }
    let mut users = Vec::new();
    for profile in state.store.list_profiles().await? {
        let spec: rebalancer_engine::profile::ProfileSpec = serde_json::from_value(profile.spec)
            .map_err(|e| {
                ApiError::internal(&format!("stored spec of profile {}", profile.name), e)
            })?;
        let uses = spec
            .plugin_sets
            .iter()
            .flat_map(|s| s.deschedule.iter().chain(&s.balance))
            .any(|p| p.name == name);
        if uses {
            users.push(profile.name);
        }
    }
    if !users.is_empty() {
        return Err(ApiError::conflict(
            "policy_in_use",
            format!(
                "policy \"{name}\" is enabled by profile(s) {}; remove it from them first",
                users.join(", ")
            ),
        )
        .with_details(serde_json::json!({ "profiles": users })));
    }
    if !state.store.delete_user_policy(name).await? {
        return Err(ApiError::not_found(format!(
            "policy \"{name}\" does not exist"
        )));
    }
    if let Some(old) = state.registry.remove(name) {
        state.engine.forget(&old.policy.meta.digest);
    }
    tracing::info!(policy = %name, "policy deleted");
    Ok(StatusCode::NO_CONTENT)
}
