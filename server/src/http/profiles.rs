//! Profiles: `PUT` a DeschedulerPolicy document (JSON or YAML) under a name, list, get, delete.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody, PayloadTooLarge};
use super::extract::{ApiPath, DocumentFormat, RawBody, decode_json, document_format};
use super::timestamp;
use crate::audit::{self, action, kind};
use crate::ingest::check_name;
use rebalancer_engine::profile::{self, ProfileError, ProfileSpec};
use rebalancer_store::{ProfileDeletion, ProfileRecord, Store};

/// A profile: the document as sent, what it was parsed into, and what in it has no effect.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileView {
    pub name: String,
    /// The DeschedulerPolicy document (as JSON, also when it was sent as YAML).
    #[schema(value_type = Object)]
    pub document: Value,
    /// The normalised form runs evaluate (DefaultEvictor added, args defaulted to `{}`).
    pub spec: ProfileSpec,
    /// Fields accepted that have no effect here (e.g. `gracePeriodSeconds`).
    pub warnings: Vec<ProfileError>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProfileList {
    pub items: Vec<ProfileView>,
}

fn view(record: ProfileRecord) -> Result<ProfileView, ApiError> {
    let spec: ProfileSpec = serde_json::from_value(record.spec)
        .map_err(|e| ApiError::internal(&format!("stored spec of profile {}", record.name), e))?;
    let warnings = profile::parse_with_warnings(&record.document)
        .map(|p| p.warnings)
        .unwrap_or_default();
    Ok(ProfileView {
        name: record.name,
        document: record.document,
        spec,
        warnings,
        created_at: timestamp(record.created_at),
        updated_at: timestamp(record.updated_at),
    })
}

/// A DeschedulerPolicy (`descheduler/v1alpha2`) as the OpenAPI document describes it: the
/// shape `profile::parse_all` reads (which reads the body itself and says which rule failed;
/// this type only documents it). What a schema cannot say is checked there: every enabled
/// plugin must be a registered policy, its args must pass that policy's validation, and profile
/// and plugin names must be unique.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)] // only describes the document
pub struct DeschedulerPolicy {
    #[schema(value_type = String, pattern = "^descheduler/v1alpha2$", example = "descheduler/v1alpha2")]
    api_version: String,
    #[schema(value_type = String, pattern = "^DeschedulerPolicy$", example = "DeschedulerPolicy")]
    kind: String,
    profiles: Vec<DeschedulerProfile>,
    /// Only nodes matching this label selector (`pool=batch,zone!=a`); empty: every node.
    #[schema(nullable)]
    node_selector: Option<String>,
    #[schema(nullable, maximum = 4294967295_u32)]
    max_no_of_pods_to_evict_per_node: Option<u32>,
    #[schema(nullable, maximum = 4294967295_u32)]
    max_no_of_pods_to_evict_per_namespace: Option<u32>,
    #[schema(nullable, maximum = 4294967295_u32)]
    max_no_of_pods_to_evict_total: Option<u32>,
    /// Accepted, without effect (runs write no Kubernetes events).
    #[schema(nullable)]
    eviction_failure_event_notification: Option<bool>,
    /// Applied to the evictions of this profile's decisions by the Kubernetes backend.
    #[schema(nullable, maximum = 9223372036854775807_i64)]
    grace_period_seconds: Option<u64>,
    /// Accepted whatever it holds, without effect.
    metrics_collector: Option<Value>,
    /// Accepted whatever it holds, without effect.
    metrics_providers: Option<Value>,
}

/// One `profiles[]` entry of a DeschedulerPolicy.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)] // only describes the document
pub struct DeschedulerProfile {
    /// Unique within the document; not only blanks.
    #[schema(pattern = "\\S", example = "default")]
    name: String,
    #[schema(nullable)]
    plugin_config: Option<Vec<PluginConfigEntry>>,
    /// Per extension point (`deschedule`, `balance`, `filter`, `preEvictionFilter`, `sort`,
    /// `presort`): `{enabled: [plugin…], disabled: [plugin…]}`.
    #[schema(value_type = Option<Object>, example = json!({"balance": {"enabled": ["LowNodeUtilization"]}}))]
    plugins: Option<Value>,
}

/// One `pluginConfig[]` entry: a plugin's args.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // only describes the document
pub struct PluginConfigEntry {
    /// A registered policy's name; not only blanks.
    #[schema(pattern = "\\S", example = "LowNodeUtilization")]
    name: String,
    /// Validated by that policy.
    #[schema(value_type = Option<Object>)]
    args: Option<Value>,
}

/// Problems a 422 lists in `details.errors`; the rest are counted in one more entry. Each
/// plugin's arg errors are already capped by the engine, but a document may enable a plugin in
/// any number of plugin sets.
const MAX_LISTED_PROBLEMS: usize = 100;

fn invalid(mut errors: Vec<ProfileError>) -> ApiError {
    let total = errors.len();
    let first = errors.first().map(ToString::to_string).unwrap_or_default();
    let message = if total == 1 {
        format!("the DeschedulerPolicy is not valid: {first}")
    } else {
        format!("the DeschedulerPolicy has {total} problems; the first: {first}")
    };
    if total > MAX_LISTED_PROBLEMS {
        errors.truncate(MAX_LISTED_PROBLEMS);
        errors.push(ProfileError::new(
            "",
            format!(
                "… and {} more problems ({total} in all; the first {MAX_LISTED_PROBLEMS} are \
                 listed)",
                total - MAX_LISTED_PROBLEMS
            ),
        ));
    }
    ApiError::unprocessable("invalid_profile", message).with_details(json!({ "errors": errors }))
}

/// Parse a document body as JSON or YAML (its structure checked first: see `extract`), its
/// integral floats read as integers (`maxNoOfPodsToEvictPerNode: 5.0` is 5, as JSON Schema
/// counts it; see `strict_json::integers`), in the policy-wide fields and the plugins' args
/// alike.
pub(crate) fn parse_document(format: DocumentFormat, body: &[u8]) -> Result<Value, ApiError> {
    let mut document = match format {
        DocumentFormat::Json => decode_json(body, |e| {
            ApiError::bad_request("invalid_json", format!("the body is not valid JSON: {e}"))
        })?,
        // Integers beyond 64 bits read as floats, as they do in JSON; the structure (depth,
        // repeated keys, one document) is checked first.
        DocumentFormat::Yaml => crate::http::extract::decode_yaml(body, |e| {
            ApiError::bad_request("invalid_yaml", format!("the body is not valid YAML: {e}"))
        })?,
    };
    crate::strict_json::integers(&mut document);
    Ok(document)
}

/// Create or replace a profile from a DeschedulerPolicy (`descheduler/v1alpha2`) document, as
/// descheduler reads it: `profiles[]` with `pluginConfig` and `plugins`, plus the policy-wide
/// limits and `nodeSelector`. Every enabled plugin must be a registered policy implementing
/// that extension point, and its args must validate. Unknown or misplaced fields are errors.
#[utoipa::path(put, path = "/api/v1/profiles/{name}", tag = "profiles",
    params(("name" = String, Path, description = "Profile name (1–63 of a-z 0-9 - . _, starting \
        and ending with a letter or digit)", min_length = 1, max_length = 63,
        pattern = "^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")),
    request_body(description = "A DeschedulerPolicy document",
        content((DeschedulerPolicy = "application/json"), (DeschedulerPolicy = "application/yaml"))),
    responses(
        (status = 201, description = "Created", body = ProfileView),
        (status = 200, description = "Replaced", body = ProfileView),
        (status = 400, description = "Not JSON (`invalid_json`) or YAML (`invalid_yaml`), or a \
            bad name (`invalid_name`, `invalid_path`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, description = "Neither JSON nor YAML (`unsupported_media_type`)",
            body = ErrorBody),
        (status = 422, description = "Not a valid DeschedulerPolicy for this server; \
            `details.errors` lists every problem with its field path (the first 100, then one \
            entry counting the rest)", body = ErrorBody),
    ))]
pub async fn put_profile(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<ProfileView>), ApiError> {
    check_name(&name).map_err(|reason| {
        ApiError::bad_request(
            "invalid_name",
            format!("invalid profile name {name:?}: {reason}"),
        )
    })?;
    let document = parse_document(document_format(&headers)?, &body)?;
    // Read to the end even past errors: the plugins of the parts that parsed are checked too,
    // and the answer lists every problem at once.
    let outcome = profile::parse_all(&document);

    let store = {
        let state = state.clone();
        async move { store_profile(&state, &name, document, outcome).await }
    };
    let (status, Json(profile)) = state
        .in_flight
        .detached(store)
        .await
        .map_err(|e| ApiError::internal("profile storage task failed", e))??;
    audit::record(
        &state.store,
        &actor,
        action::PROFILE_PUT,
        kind::PROFILE,
        &profile.name,
        Some(json!({"created": status == StatusCode::CREATED})),
    )
    .await;
    Ok((status, Json(profile)))
}

/// Check a parsed profile against the registered policies and store it, under the catalogue
/// lock (so no policy it uses can be deleted meanwhile).
async fn store_profile(
    state: &AppState,
    name: &str,
    document: Value,
    outcome: profile::ParseOutcome,
) -> Result<(StatusCode, Json<ProfileView>), ApiError> {
    let spec = outcome.parsed.spec;
    let _catalog = state.catalog_lock.lock().await;
    let (engine, registry, doc, checked) = (
        state.engine.clone(),
        state.registry.clone(),
        document.clone(),
        spec.clone(),
    );
    let problems = tokio::task::spawn_blocking(move || {
        profile::check_plugins(&checked, &doc, &engine, &registry)
    })
    .await
    .map_err(|e| ApiError::internal("profile check task failed", e))?;
    let problems = profile::merge_errors(outcome.errors, problems);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    let spec_json = serde_json::to_value(&spec)
        .map_err(|e| ApiError::internal("serialising a profile spec", e))?;
    let (record, created) = state.store.put_profile(name, &document, &spec_json).await?;
    tracing::info!(profile = %name, created, "profile stored");
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view(record)?)))
}

/// List every profile.
#[utoipa::path(get, path = "/api/v1/profiles", tag = "profiles",
    responses((status = 200, description = "Every profile", body = ProfileList)))]
pub async fn list_profiles(State(state): State<AppState>) -> Result<Json<ProfileList>, ApiError> {
    let items = state
        .store
        .list_profiles()
        .await?
        .into_iter()
        .map(view)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(ProfileList { items }))
}

/// What deleting a profile removed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileDeleted {
    pub name: String,
    /// Ids of the schedules that ran it, deleted.
    pub schedules_deleted: Vec<i64>,
    /// Its policy state scopes on every cluster (cooldowns, LowNodeLoad's detectors…), deleted.
    pub policy_state_scopes: u64,
    /// It had auto-approve rules, deleted with it.
    pub auto_approve_rules: bool,
    /// Its open proposals, marked expired.
    pub decisions_expired: u64,
}

/// Delete a profile with its auto-approve rules, its policy state on every cluster and the
/// schedules that run it; its open proposals are marked expired. Runs, decisions and pod
/// migrations stay, as history under the profile's name (kept as long as retention keeps them).
/// Refused for `default` (start-up creates it again; replace it with `PUT` instead) and while a
/// pod migration of one of its decisions is unfinished.
#[utoipa::path(delete, path = "/api/v1/profiles/{name}", tag = "profiles",
    params(("name" = String, Path, description = "Profile name")),
    responses(
        (status = 200, description = "Deleted", body = ProfileDeleted),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such profile (`not_found`)", body = ErrorBody),
        (status = 409, description = "The `default` profile (`default_profile`), or pod \
            migrations in flight (`pod_migrations_in_flight`, their ids in \
            `details.podMigrations`)", body = ErrorBody),
    ))]
pub async fn delete_profile(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ProfileDeleted>, ApiError> {
    if name == profile::DEFAULT_PROFILE {
        return Err(ApiError::conflict(
            "default_profile",
            format!(
                "profile \"{name}\" cannot be deleted: the server creates it again at every \
                 start; replace its document with PUT instead"
            ),
        ));
    }
    let delete = {
        let (store, name, actor) = (state.store.clone(), name.clone(), actor.name.clone());
        async move { store.delete_profile(&name, &actor).await }
    };
    let outcome = state
        .in_flight
        .detached(delete)
        .await
        .map_err(|e| ApiError::internal("profile deletion task failed", e))??;
    let deleted = match outcome {
        ProfileDeletion::Deleted(d) => d,
        ProfileDeletion::MigrationsInFlight(ids) => {
            return Err(ApiError::conflict(
                "pod_migrations_in_flight",
                format!(
                    "profile \"{name}\" has {} unfinished pod migration(s) ({}); wait for them \
                     or abort them first",
                    ids.len(),
                    ids.iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .with_details(json!({ "podMigrations": ids })));
        }
    };
    tracing::info!(profile = %name, schedules = ?deleted.schedules, decisions_expired = deleted.expired_decisions, "profile deleted");
    if !deleted.schedules.is_empty() {
        state.schedules_changed.notify_one();
    }
    let body = ProfileDeleted {
        name: name.clone(),
        schedules_deleted: deleted.schedules,
        policy_state_scopes: deleted.policy_state_scopes,
        auto_approve_rules: deleted.auto_approve_rules,
        decisions_expired: deleted.expired_decisions,
    };
    audit::record(
        &state.store,
        &actor,
        action::PROFILE_DELETE,
        kind::PROFILE,
        &name,
        Some(serde_json::to_value(&body).unwrap_or_default()),
    )
    .await;
    Ok(Json(body))
}

/// One profile. With `Accept: application/yaml` the answer is the DeschedulerPolicy document
/// itself, as YAML, ready for descheduler or for `PUT` elsewhere.
#[utoipa::path(get, path = "/api/v1/profiles/{name}", tag = "profiles",
    params(("name" = String, Path, description = "Profile name")),
    responses(
        (status = 200, description = "The profile (JSON), or its DeschedulerPolicy document \
            (YAML) when `Accept` asks for application/yaml",
            content((ProfileView = "application/json"), (Object = "application/yaml"))),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such profile (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_profile(
    State(store): State<Store>,
    headers: HeaderMap,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, ApiError> {
    let record = store.get_profile(&name).await?;
    if wants_yaml(&headers) {
        let yaml = serde_yaml::to_string(&record.document)
            .map_err(|e| ApiError::internal(&format!("rendering profile {name} as YAML"), e))?;
        return Ok(([(header::CONTENT_TYPE, "application/yaml")], yaml).into_response());
    }
    Ok(Json(view(record)?).into_response())
}

/// Whether `Accept` prefers YAML to JSON: the first YAML media range comes before any JSON one
/// (quality values are rare in practice and not weighed).
fn wants_yaml(headers: &HeaderMap) -> bool {
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|range| {
            range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        });
    for range in accept {
        match range.as_str() {
            "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => {
                return true;
            }
            r if r.ends_with("+yaml") => return true,
            "application/json" | "text/json" => return false,
            r if r.ends_with("+json") => return false,
            _ => {}
        }
    }
    false
}
