//! API tokens: create (the secret is in this one response only; optionally with an expiry),
//! list, delete. Admin only.

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
use rebalancer_store::{NewToken, Role, Store, TokenOrigin, TokenRecord, now_ms};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The longest `expiresIn`: 100 years, in seconds.
pub const MAX_EXPIRES_IN_SECONDS: u64 = 100 * 365 * 24 * 3600;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
    /// Seconds from now until the token stops working (at most 100 years). Leave out (with
    /// `expiresAt`) for a token that never expires; not together with `expiresAt`.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3153600000_u64, example = 2592000)]
    pub expires_in: Option<u64>,
    /// When the token stops working (RFC 3339, in the future); not together with `expiresIn`.
    #[serde(default)]
    #[schema(format = DateTime, example = "2027-01-31T00:00:00Z")]
    pub expires_at: Option<String>,
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
    /// When it stops (or stopped) working; null: never.
    pub expires_at: Option<String>,
    /// Past `expiresAt`: refused with 401 `token_expired` (delete it, or leave it as a record).
    pub expired: bool,
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
    /// When it stops working; null: never.
    pub expires_at: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TokenList {
    pub items: Vec<TokenView>,
}

fn view(record: TokenRecord, now: i64) -> TokenView {
    TokenView {
        expired: record.is_expired(now),
        id: record.id,
        name: record.name,
        role: record.role,
        origin: record.origin,
        created_by: record.created_by,
        created_at: timestamp(record.created_at),
        expires_at: record.expires_at.map(timestamp),
    }
}

/// When a token asked for with `request` expires (ms), if ever: `expiresIn` seconds from `now`,
/// or `expiresAt`, which must be later than `now`.
fn expiry(request: &CreateToken, now: i64) -> Result<Option<i64>, ApiError> {
    let invalid = |message: String| ApiError::unprocessable("invalid_expiry", message);
    match (request.expires_in, request.expires_at.as_deref()) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(invalid("give expiresIn or expiresAt, not both".to_string())),
        (Some(seconds), None) => {
            if seconds == 0 || seconds > MAX_EXPIRES_IN_SECONDS {
                return Err(invalid(format!(
                    "expiresIn must be from 1 to {MAX_EXPIRES_IN_SECONDS} seconds (100 years), \
                     got {seconds}"
                )));
            }
            // At most 100 years: fits an i64 of milliseconds.
            Ok(Some(now + seconds as i64 * 1000))
        }
        (None, Some(text)) => {
            let at = OffsetDateTime::parse(text, &Rfc3339).map_err(|e| {
                invalid(format!(
                    "expiresAt {text:?} is not an RFC 3339 time ({e}), e.g. 2027-01-31T00:00:00Z"
                ))
            })?;
            let ms = i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX);
            if ms <= now {
                return Err(invalid(format!(
                    "expiresAt {text:?} is not in the future (now is {})",
                    timestamp(now)
                )));
            }
            Ok(Some(ms))
        }
    }
}

/// Create a token with a role, and optionally an expiry (`expiresIn` or `expiresAt`). The
/// response holds the token itself; it cannot be shown again.
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
        (status = 422, description = "Invalid name (`invalid_name`); an expiry that is not \
            one (`invalid_expiry`: both `expiresIn` and `expiresAt`, an `expiresAt` that is not \
            RFC 3339 or not in the future); or the body does not match the schema \
            (`invalid_request`, e.g. an unknown role)", body = ErrorBody),
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
    let expires_at = expiry(&request, now_ms())?;
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
            expires_at,
        })
        .await?;
    let expires_at = record.expires_at.map(timestamp);
    audit::record(
        &state.store,
        &actor,
        action::TOKEN_CREATE,
        kind::TOKEN,
        &record.id.to_string(),
        Some(json!({"name": record.name, "role": record.role, "expiresAt": expires_at})),
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
            expires_at,
        }),
    ))
}

/// Every token (never the secrets), expired ones included.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "tokens",
    responses((status = 200, description = "Every token", body = TokenList)))]
pub async fn list_tokens(State(state): State<AppState>) -> Result<Json<TokenList>, ApiError> {
    let now = now_ms();
    let items = state
        .store
        .list_tokens()
        .await?
        .into_iter()
        .map(|t| view(t, now))
        .collect();
    Ok(Json(TokenList { items }))
}

/// Delete a token: it stops working at once. The token of `REBALANCER_ADMIN_TOKEN` and the
/// last admin token that has not expired cannot be deleted.
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "tokens",
    params(("id" = i64, Path, description = "Token id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such token (`not_found`)", body = ErrorBody),
        (status = 409, description = "The environment's admin token \
            (`token_from_environment`), or the last admin token that has not expired \
            (`last_admin_token`)", body = ErrorBody),
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
