//! Webhooks for portals: create (checking the destination), list, get, delete, send a test
//! delivery, enable a hook again after it was disabled, and each hook's deliveries. Admin only.
//!
//! Owns: the request and answer shapes, validating a new hook (every bad field named), and the
//! destination check at creation ([`crate::webhooks::check_destination`]).
//! Must not: dispatch or send deliveries (`crate::webhooks`, in the background).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::auth::Actor;
use super::error::{ApiError, ErrorBody, FieldProblem, PayloadTooLarge, UnsupportedMediaType};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::page::Page;
use super::state::AppState;
use super::timestamp;
use crate::audit::{self, action, kind};
use crate::webhooks::{self as hooks, DestinationError};
use rebalancer_store::{DeliveryRecord, DeliveryStatus, NewDelivery, NewWebhook, WebhookRecord};

/// The shortest and longest secret (characters).
pub const SECRET_LENGTH: std::ops::RangeInclusive<usize> = 16..=256;
/// The longest description (characters).
pub const MAX_DESCRIPTION: usize = 500;

/// An event a hook may receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum WebhookEvent {
    /// Every event, present and future.
    #[serde(rename = "*")]
    All,
    /// A run succeeded or failed.
    #[serde(rename = "run.finished")]
    RunFinished,
    /// A run proposed decisions: one delivery per run, listing them.
    #[serde(rename = "decisions.proposed")]
    DecisionsProposed,
    #[serde(rename = "decision.approved")]
    DecisionApproved,
    #[serde(rename = "decision.rejected")]
    DecisionRejected,
    /// A newer run proposed the same pods again.
    #[serde(rename = "decision.superseded")]
    DecisionSuperseded,
    /// A pod migration changed phase.
    #[serde(rename = "migration.phase")]
    MigrationPhase,
    /// A Kubernetes cluster's connection was lost.
    #[serde(rename = "cluster.disconnected")]
    ClusterDisconnected,
    /// ... and recovered.
    #[serde(rename = "cluster.reconnected")]
    ClusterReconnected,
}

impl WebhookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::All => "*",
            WebhookEvent::RunFinished => hooks::RUN_FINISHED,
            WebhookEvent::DecisionsProposed => hooks::DECISIONS_PROPOSED,
            WebhookEvent::DecisionApproved => hooks::DECISION_APPROVED,
            WebhookEvent::DecisionRejected => hooks::DECISION_REJECTED,
            WebhookEvent::DecisionSuperseded => hooks::DECISION_SUPERSEDED,
            WebhookEvent::MigrationPhase => hooks::MIGRATION_PHASE,
            WebhookEvent::ClusterDisconnected => hooks::CLUSTER_DISCONNECTED,
            WebhookEvent::ClusterReconnected => hooks::CLUSTER_RECONNECTED,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateWebhook {
    /// Where deliveries are POSTed: an `http` or `https` URL without credentials or fragment.
    /// Its host must not be (or resolve to) a loopback, link-local, private, CGNAT,
    /// unspecified or multicast address unless the server allows private destinations.
    #[schema(
        example = "https://portal.example.com/hooks/rebalancer",
        max_length = 2048,
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#@]+([/?][^\\s#]*)?$"
    )]
    pub url: String,
    /// The events to deliver, each once; `["*"]`: every event.
    #[schema(min_items = 1, example = json!(["run.finished", "decisions.proposed"]))]
    pub events: Vec<WebhookEvent>,
    /// Signs every delivery (HMAC-SHA256); never shown again. 16 to 256 characters.
    #[schema(min_length = 16, max_length = 256, example = "whsec-8f2a61c0d4b9e7a3")]
    pub secret: String,
    /// What the hook is for (at most 500 characters).
    #[serde(default)]
    #[schema(max_length = 500, example = "capacity portal")]
    pub description: Option<String>,
}

/// A hook (never its secret).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub id: i64,
    pub url: String,
    #[schema(example = json!(["run.finished", "decisions.proposed"]))]
    pub events: Vec<WebhookEvent>,
    pub description: String,
    /// False once disabled after failed deliveries (`disabledReason`): it gets no new
    /// deliveries and its pending ones wait until it is enabled again.
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Deliveries in a row that failed for good.
    pub consecutive_failures: i64,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// The token that created it.
    pub created_by: String,
    /// When its last delivery finished (delivered or failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub last_delivery_at: Option<String>,
    /// How its last finished delivery ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<DeliveryStatus>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookList {
    pub items: Vec<Webhook>,
}

/// One delivery of one event to one hook.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// The same on every attempt (`Rebalancer-Delivery`): receivers dedupe on it.
    #[schema(format = "uuid")]
    pub id: String,
    pub webhook_id: i64,
    /// The event, or `webhook.test`.
    #[schema(example = "decisions.proposed")]
    pub event: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i64,
    /// When the next attempt is due (pending only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub next_attempt_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub last_attempt_at: Option<String>,
    /// The HTTP status of the last answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_response_status: Option<i64>,
    /// Why the last attempt failed (`destination-not-allowed: …` for a refused destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub delivered_at: Option<String>,
    /// The body every attempt sends: `{id, event, occurredAt, webhookId, data}`.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeliveryList {
    pub items: Vec<Delivery>,
    /// The cursor of the next (older) page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeliveryQuery {
    /// Only deliveries with this status.
    pub status: Option<DeliveryStatus>,
    /// Page size (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    #[param(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
}

fn view(hook: WebhookRecord) -> Webhook {
    let events = hook
        .events
        .iter()
        .filter_map(|e| serde_json::from_value(json!(e)).ok())
        .collect();
    Webhook {
        id: hook.id,
        url: hook.url,
        events,
        description: hook.description,
        enabled: hook.enabled,
        disabled_reason: hook.disabled_reason,
        consecutive_failures: hook.consecutive_failures,
        created_at: timestamp(hook.created_at),
        created_by: hook.created_by,
        last_delivery_at: hook.last_delivery_at.map(timestamp),
        last_status: hook.last_status,
    }
}

fn delivery(d: DeliveryRecord) -> Delivery {
    Delivery {
        payload: serde_json::from_str(&d.body).unwrap_or(serde_json::Value::Null),
        id: d.id,
        webhook_id: d.webhook_id,
        event: d.event,
        status: d.status,
        attempts: d.attempts,
        next_attempt_at: d
            .next_attempt_at
            .filter(|_| d.status == DeliveryStatus::Pending)
            .map(timestamp),
        last_attempt_at: d.last_attempt_at.map(timestamp),
        last_response_status: d.last_response_status,
        last_error: d.last_error,
        created_at: timestamp(d.created_at),
        delivered_at: d.delivered_at.map(timestamp),
    }
}

/// A field of a new hook that cannot be used.
#[derive(Debug, Serialize)]
struct Problem {
    field: &'static str,
    message: String,
}

impl FieldProblem for Problem {
    fn field(&self) -> &str {
        self.field
    }
    fn message(&self) -> &str {
        &self.message
    }
}

/// Every problem of `request` (but the destination's addresses), and its URL when it parses.
fn validate(request: &CreateWebhook) -> (Vec<Problem>, Option<reqwest::Url>) {
    let mut problems = Vec::new();
    let url = match hooks::parse_url(&request.url) {
        Ok(url) => Some(url),
        Err(message) => {
            problems.push(Problem {
                field: "url",
                message,
            });
            None
        }
    };
    let mut seen = Vec::new();
    for event in &request.events {
        if seen.contains(event) {
            problems.push(Problem {
                field: "events",
                message: format!("{} is listed twice", event.as_str()),
            });
        }
        seen.push(*event);
    }
    if request.events.is_empty() {
        problems.push(Problem {
            field: "events",
            message: format!(
                "is empty: list the events to deliver ({}), or [\"*\"] for all",
                hooks::EVENTS.join(", ")
            ),
        });
    } else if request.events.len() > 1 && request.events.contains(&WebhookEvent::All) {
        problems.push(Problem {
            field: "events",
            message: "\"*\" already means every event: give it alone".into(),
        });
    }
    let secret = request.secret.chars().count();
    if !SECRET_LENGTH.contains(&secret) {
        problems.push(Problem {
            field: "secret",
            message: format!(
                "is {secret} characters long: give {} to {} (e.g. 32 random bytes in hex)",
                SECRET_LENGTH.start(),
                SECRET_LENGTH.end()
            ),
        });
    }
    if let Some(d) = &request.description
        && d.chars().count() > MAX_DESCRIPTION
    {
        problems.push(Problem {
            field: "description",
            message: format!(
                "is {} characters long (at most {MAX_DESCRIPTION})",
                d.chars().count()
            ),
        });
    }
    (problems, url)
}

/// Register a hook. Its destination is checked now (and again at every delivery).
#[utoipa::path(post, path = "/api/v1/webhooks", tag = "webhooks",
    request_body = CreateWebhook,
    responses(
        (status = 201, description = "Created; `Location` is its URL", body = Webhook,
            headers(("Location" = String, description = "/api/v1/webhooks/{id}"))),
        (status = 400, description = "The body is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "A field cannot be used (`invalid_webhook`, each named in \
            `details.errors[].field`: `url`, `events`, `secret`, `description`); the URL's \
            host is or resolves to a loopback, link-local, private, CGNAT, unspecified or \
            multicast address and the server does not allow private destinations \
            (`destination-not-allowed`); or the body does not match the schema \
            (`invalid_request`, e.g. an unknown event)", body = ErrorBody),
    ))]
pub async fn create_webhook(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<CreateWebhook>,
) -> Result<(StatusCode, HeaderMap, Json<Webhook>), ApiError> {
    let (mut problems, url) = validate(&request);
    if let Some(url) = &url
        && problems.is_empty()
    {
        let allow = state.settings.webhooks.allow_private_destinations;
        if let Err(e) = hooks::check_destination(url, allow).await {
            match &e {
                DestinationError::NotAllowed { host, addr, range } => {
                    let details = json!({
                        "field": "url", "host": host, "address": addr.to_string(), "range": range,
                    });
                    return Err(
                        ApiError::unprocessable("destination-not-allowed", e.to_string())
                            .with_details(details),
                    );
                }
                DestinationError::Unresolvable { .. } => problems.push(Problem {
                    field: "url",
                    message: e.to_string(),
                }),
            }
        }
    }
    if !problems.is_empty() {
        return Err(ApiError::field_problems(
            "invalid_webhook",
            "the webhook",
            &problems,
        ));
    }
    let events: Vec<String> = request
        .events
        .iter()
        .map(|e| e.as_str().to_string())
        .collect();
    let record = state
        .store
        .insert_webhook(&NewWebhook {
            url: &request.url,
            events: &events,
            secret: &request.secret,
            description: request.description.as_deref().unwrap_or_default(),
            created_by: &actor.name,
        })
        .await?;
    audit::record(
        &state.store,
        &actor,
        action::WEBHOOK_CREATE,
        kind::WEBHOOK,
        &record.id.to_string(),
        Some(json!({"url": record.url, "events": record.events})),
    )
    .await;
    let mut headers = HeaderMap::new();
    let location = format!("/api/v1/webhooks/{}", record.id);
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(&location).expect("a path of digits"),
    );
    Ok((StatusCode::CREATED, headers, Json(view(record))))
}

/// Every hook, oldest first.
#[utoipa::path(get, path = "/api/v1/webhooks", tag = "webhooks",
    responses((status = 200, description = "Every hook", body = WebhookList)))]
pub async fn list_webhooks(State(state): State<AppState>) -> Result<Json<WebhookList>, ApiError> {
    let items = state
        .store
        .list_webhooks()
        .await?
        .into_iter()
        .map(view)
        .collect();
    Ok(Json(WebhookList { items }))
}

/// One hook.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = i64, Path, description = "Webhook id")),
    responses(
        (status = 200, description = "The hook", body = Webhook),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such hook (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_webhook(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Webhook>, ApiError> {
    Ok(Json(view(state.store.webhook(id).await?)))
}

/// Delete a hook with its deliveries; pending ones are never sent.
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = i64, Path, description = "Webhook id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such hook (`not_found`)", body = ErrorBody),
    ))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
) -> Result<StatusCode, ApiError> {
    let deleted = state.store.delete_webhook(id).await?;
    audit::record(
        &state.store,
        &actor,
        action::WEBHOOK_DELETE,
        kind::WEBHOOK,
        &deleted.id.to_string(),
        Some(json!({"url": deleted.url})),
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}

/// Queue a `webhook.test` delivery to the hook, sent and retried like any other (a disabled
/// hook's waits until it is enabled).
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/test", tag = "webhooks",
    params(("id" = i64, Path, description = "Webhook id")),
    responses(
        (status = 202, description = "Queued; follow it at \
            /api/v1/webhooks/{id}/deliveries/{deliveryId}", body = Delivery),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such hook (`not_found`)", body = ErrorBody),
    ))]
pub async fn test_webhook(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
) -> Result<(StatusCode, Json<Delivery>), ApiError> {
    let hook = state.store.webhook(id).await?;
    let delivery_id =
        hooks::delivery_id().map_err(|e| ApiError::internal("generating a delivery id", e))?;
    let data = json!({ "message": "a test delivery", "requestedBy": actor.name });
    let body = hooks::body(
        &delivery_id,
        hooks::TEST_EVENT,
        rebalancer_store::now_ms(),
        hook.id,
        &data,
    );
    let record = state
        .store
        .insert_webhook_delivery(&NewDelivery {
            id: delivery_id,
            webhook_id: hook.id,
            event: hooks::TEST_EVENT.to_string(),
            body,
        })
        .await?;
    state.webhooks_wake.notify_one();
    Ok((StatusCode::ACCEPTED, Json(delivery(record))))
}

/// Enable a hook again (after it was disabled for failed deliveries): its failure count
/// starts over and its pending deliveries are sent now.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/enable", tag = "webhooks",
    params(("id" = i64, Path, description = "Webhook id")),
    responses(
        (status = 200, description = "The hook, enabled", body = Webhook),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such hook (`not_found`)", body = ErrorBody),
    ))]
pub async fn enable_webhook(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Webhook>, ApiError> {
    let before = state.store.webhook(id).await?;
    let hook = state.store.enable_webhook(id).await?;
    audit::record(
        &state.store,
        &actor,
        action::WEBHOOK_ENABLE,
        kind::WEBHOOK,
        &hook.id.to_string(),
        Some(json!({"wasEnabled": before.enabled, "disabledReason": before.disabled_reason})),
    )
    .await;
    state.webhooks_wake.notify_one();
    Ok(Json(view(hook)))
}

/// A hook's deliveries, newest first.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = i64, Path, description = "Webhook id"), DeliveryQuery),
    responses(
        (status = 200, description = "One page of deliveries", body = DeliveryList),
        (status = 400, description = "`id` is not an integer (`invalid_path`), a query \
            parameter is not valid (`invalid_query`: an unknown `status`, a `limit` outside \
            1–1000), or the cursor is not one this API returned (`invalid_cursor`)",
            body = ErrorBody),
        (status = 404, description = "No such hook (`not_found`)", body = ErrorBody),
    ))]
pub async fn list_deliveries(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<DeliveryQuery>,
    page: Page,
) -> Result<Json<DeliveryList>, ApiError> {
    let before = page.id_cursor()?;
    let (items, next) = state
        .store
        .list_webhook_deliveries(id, query.status, before, page.limit)
        .await?;
    Ok(Json(DeliveryList {
        items: items.into_iter().map(delivery).collect(),
        next: next.map(|seq| seq.to_string()),
    }))
}

/// One delivery of a hook.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/deliveries/{deliveryId}", tag = "webhooks",
    params(
        ("id" = i64, Path, description = "Webhook id"),
        ("deliveryId" = String, Path, description = "Delivery id (a UUID)"),
    ),
    responses(
        (status = 200, description = "The delivery", body = Delivery),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such hook, or no such delivery of it (`not_found`)",
            body = ErrorBody),
    ))]
pub async fn get_delivery(
    State(state): State<AppState>,
    ApiPath((id, delivery_id)): ApiPath<(i64, String)>,
) -> Result<Json<Delivery>, ApiError> {
    Ok(Json(delivery(
        state.store.webhook_delivery(id, &delivery_id).await?,
    )))
}
