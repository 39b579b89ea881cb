//! API tokens: create (the secret is in this one response only), list, delete. Admin only.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody, PayloadTooLarge, UnsupportedMediaType};
use super::extract::{ApiJson, ApiPath};
use super::timestamp;
use crate::audit::{self, action, kind};
use crate::auth;
use rebalancer_store::{NewToken, Role, Store, TokenOrigin, TokenRecord};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// Who or what uses the token (shown in the audit log): 1–100 ASCII letters, digits,
    /// spaces and `-._@/`, not only spaces; unique.
    #[schema(
        example = "portal",
        min_length = 1,
        max_length = 100,
        pattern = "^ *[A-Za-z0-9._@/-][A-Za-z0-9 ._@/-]*$"
    )]
    pub name: String,
    pub role: Role,
}

/// A token, without its secret.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// `api` (created here), `bootstrap` (printed at the first start) or `env`
    /// (`REBALANCER_ADMIN_TOKEN`).
    pub origin: TokenOrigin,
    /// The token that created this one.
    pub created_by: Option<String>,
    pub created_at: String,
}

/// A new token: `token` is the secret, shown this once (only its hash is stored).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedToken {
    /// Send as `Authorization: Bearer <token>`.
    #[schema(example = "rb_8kq2W0sXv1yZ3n4m5b6v7c8x9z0a1s2d3f4g5h6j7k8")]
    pub token: String,
    pub id: i64,
    pub name: String,
    pub role: Role,
    pub created_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TokenList {
    pub items: Vec<TokenView>,
}

fn view(record: TokenRecord) -> TokenView {
    TokenView {
        id: record.id,
        name: record.name,
        role: record.role,
        origin: record.origin,
        created_by: record.created_by,
        created_at: timestamp(record.created_at),
    }
}

/// Create a token with a role. The response holds the token itself; it cannot be shown again.
#[utoipa::path(post, path = "/api/v1/tokens", tag = "tokens",
    request_body = CreateToken,
    responses(
        (status = 201, description = "Created; `token` is the secret, shown this once",
            body = CreatedToken),
        (status = 400, description = "The body is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 409, description = "A token with this name exists (`name_taken`)",
            body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "Invalid name (`invalid_name`), or the body does not match \
            the schema (`invalid_request`, e.g. an unknown role)", body = ErrorBody),
    ))]
pub async fn create_token(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<CreateToken>,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    auth::check_token_name(&request.name).map_err(|reason| {
        ApiError::unprocessable(
            "invalid_name",
            format!("invalid token name {:?}: {reason}", request.name),
        )
    })?;
    let secret = auth::generate_token().map_err(|e| ApiError::internal("generating a token", e))?;
    let hash = auth::hash_token(&secret);
    let record = state
        .store
        .insert_token(&NewToken {
            name: &request.name,
            role: request.role,
            hash: &hash,
            origin: TokenOrigin::Api,
            created_by: Some(&actor.name),
        })
        .await?;
    audit::record(
        &state.store,
        &actor,
        action::TOKEN_CREATE,
        kind::TOKEN,
        &record.id.to_string(),
        Some(json!({"name": record.name, "role": record.role})),
    )
    .await;
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            token: secret,
            id: record.id,
            name: record.name,
            role: record.role,
            created_at: timestamp(record.created_at),
        }),
    ))
}

/// Every token (never the secrets).
#[utoipa::path(get, path = "/api/v1/tokens", tag = "tokens",
    responses((status = 200, description = "Every token", body = TokenList)))]
pub async fn list_tokens(State(state): State<AppState>) -> Result<Json<TokenList>, ApiError> {
    let items = state
        .store
        .list_tokens()
        .await?
        .into_iter()
        .map(view)
        .collect();
    Ok(Json(TokenList { items }))
}

/// Delete a token: it stops working at once. The token of `REBALANCER_ADMIN_TOKEN` and the
/// last admin token cannot be deleted.
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "tokens",
    params(("id" = i64, Path, description = "Token id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such token (`not_found`)", body = ErrorBody),
        (status = 409, description = "The environment's admin token \
            (`token_from_environment`), or the last admin token (`last_admin_token`)",
            body = ErrorBody),
    ))]
pub async fn delete_token(
    State(store): State<Store>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
) -> Result<StatusCode, ApiError> {
    let deleted = store.delete_token(id).await?;
    audit::record(
        &store,
        &actor,
        action::TOKEN_DELETE,
        kind::TOKEN,
        &deleted.id.to_string(),
        Some(json!({"name": deleted.name, "role": deleted.role})),
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}
