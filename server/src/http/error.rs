//! The one error shape of the API: `{"code", "message", "details"}`.
//!
//! Owns: [`ApiError`] and its conversion (`From`) from every error the handlers meet — the
//! extractors' rejections, the store's, and each stage's (ingest, run, engine, policy upload,
//! tokens, pod-migration abort, approval) — so handlers use `?` and map nothing by hand.
//! Server-side failures are answered with a generic message; their cause goes to the log,
//! never into a body.

use axum::Json;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::serve::BodyIdleTimeout;
use crate::approval::ApprovalError;
use crate::executor::AbortError;
use crate::ingest::IngestFailure;
use crate::trigger::RunFailure;
use rebalancer_cluster::IngestError;
use rebalancer_cluster::document::StructureError;
use rebalancer_engine::EngineError;
use rebalancer_store::{DeleteTokenError, InsertTokenError, PutPolicyError, StoreError};

/// The body of every error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Machine-readable, stable: `not_found`, `invalid_document`, `forbidden_import`, …
    #[schema(example = "not_found")]
    pub code: String,
    /// What is wrong and, where it helps, what to do about it.
    #[schema(example = "cluster \"prod\" does not exist")]
    pub message: String,
    /// Structured detail (e.g. every problem found in a document), or null.
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
}

// ---- Shared error responses of the OpenAPI document --------------------------------------------
// The answers many routes give for the same reason, as `components/responses`: a route lists
// them with `(status = 415, response = UnsupportedMediaType)`. Answers whose reasons differ per
// route (400, 404, 409, 422) are described at the route, naming each `code` it can give.

/// Content-Type is missing or not `application/json` (`unsupported_media_type`).
#[derive(utoipa::ToResponse)]
#[response(description = "Content-Type is missing or not application/json \
    (`unsupported_media_type`)")]
pub struct UnsupportedMediaType(#[allow(dead_code)] ErrorBody);

/// The body is over the route's size limit (`payload_too_large`).
#[derive(utoipa::ToResponse)]
#[response(description = "The body is larger than the server's --body-limit \
    (`payload_too_large`)")]
pub struct PayloadTooLarge(#[allow(dead_code)] ErrorBody);

/// Every `/api/v1` route during start-up (`not_ready`, with `Retry-After`).
#[derive(utoipa::ToResponse)]
#[response(
    description = "The server is starting (`not_ready`); retry after the Retry-After seconds",
    headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))
)]
pub struct NotReady(#[allow(dead_code)] ErrorBody);

/// A failure on the server's side (`internal`); the cause is in the server log.
#[derive(utoipa::ToResponse)]
#[response(description = "The server failed (`internal`); the cause is in the server log")]
pub struct Internal(#[allow(dead_code)] ErrorBody);

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Option<Value>,
    retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, code, message)
    }

    /// The server is not ready yet (start-up in progress).
    pub fn not_ready() -> Self {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "the server is starting (compiling built-in policies, loading clusters); \
                 retry shortly",
            )
        }
    }

    /// 503 with `Retry-After`: the server is at capacity for this kind of request.
    pub fn busy(code: &'static str, message: impl Into<String>, retry_after_secs: u32) -> Self {
        ApiError {
            retry_after: Some(retry_after_secs),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
        }
    }

    /// A failure on our side: logged with its cause, answered generically.
    pub fn internal(context: &str, cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "{context}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle this request; the cause is in the server log",
        )
    }

    /// 422 for a body with located problems: the message lists every one (`{what} cannot be
    /// used: field: message; …`), `details.errors` carries them as objects.
    pub fn field_problems<P: FieldProblem>(code: &'static str, what: &str, problems: &[P]) -> Self {
        let summary = problems
            .iter()
            .map(|p| format!("{}: {}", p.field(), p.message()))
            .collect::<Vec<_>>()
            .join("; ");
        ApiError::unprocessable(code, format!("{what} cannot be used: {summary}"))
            .with_details(serde_json::json!({ "errors": problems }))
    }

    /// 408: the client stopped sending the request body (`--body-idle-timeout`).
    pub fn body_timeout(cause: &(dyn std::error::Error + 'static)) -> Self {
        // The timeout's own message, without the layers of "failed to buffer the body" around it.
        let mut current = Some(cause);
        while let Some(error) = current {
            if error.is::<BodyIdleTimeout>() {
                break;
            }
            current = error.source();
        }
        let message = current.unwrap_or(cause).to_string();
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", message)
    }

    pub fn too_large(what: &str, limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the {what} is larger than this endpoint's limit of {limit} bytes (see the \
                 server's --body-limit / --snapshot-body-limit)"
            ),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_string(),
            message: self.message,
            details: self.details,
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// A problem located at a field of a request body, as [`ApiError::field_problems`] reports it.
pub trait FieldProblem: serde::Serialize {
    /// Where: e.g. `rules[1].podSelector`.
    fn field(&self) -> &str;
    fn message(&self) -> &str;
}

impl FieldProblem for crate::approval::RuleError {
    fn field(&self) -> &str {
        &self.field
    }
    fn message(&self) -> &str {
        &self.message
    }
}

impl FieldProblem for crate::executor::arbitration::KnobError {
    fn field(&self) -> &str {
        &self.field
    }
    fn message(&self) -> &str {
        &self.message
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { what } => ApiError::not_found(format!("{what} does not exist")),
            other => ApiError::internal("database failure", other),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        if BodyIdleTimeout::is_cause_of(&rejection) {
            return ApiError::body_timeout(&rejection);
        }
        let status = rejection.status();
        let code = match rejection {
            JsonRejection::MissingJsonContentType(_) => "unsupported_media_type",
            JsonRejection::JsonSyntaxError(_) => "invalid_json",
            JsonRejection::JsonDataError(_) => "invalid_request",
            _ => "invalid_body",
        };
        body_error(status, code, rejection.body_text())
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if BodyIdleTimeout::is_cause_of(&rejection) {
            return ApiError::body_timeout(&rejection);
        }
        body_error(rejection.status(), "invalid_body", rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::new(rejection.status(), "invalid_path", rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(rejection.status(), "invalid_query", rejection.body_text())
    }
}

/// A body nested too deep or with a repeated key (every JSON and YAML body is checked before
/// it is decoded).
impl From<StructureError> for ApiError {
    fn from(e: StructureError) -> Self {
        ApiError::bad_request(e.code(), e.to_string()).with_details(json!({
            "line": e.line,
            "column": e.column,
            "path": e.path,
        }))
    }
}

// ---- Stage errors -----------------------------------------------------------------------------
// Every error a stage returns converts here, so handlers use `?` and map nothing by hand.

impl From<IngestFailure> for ApiError {
    fn from(err: IngestFailure) -> Self {
        match err {
            IngestFailure::InvalidName { .. } => {
                ApiError::bad_request("invalid_name", err.to_string())
            }
            IngestFailure::Document(e) => e.into(),
            IngestFailure::Empty {
                ref name,
                objects,
                ref replaces,
            } => {
                let what = match replaces {
                    Some((nodes, pods)) => format!(
                        "pushing it would replace the state of cluster \"{name}\" ({nodes} \
                         node(s), {pods} pod(s)) with nothing"
                    ),
                    None => {
                        format!("pushing it would create cluster \"{name}\" with nothing in it")
                    }
                };
                ApiError::conflict(
                    "empty_snapshot",
                    format!(
                        "the snapshot holds no node and no pod ({objects} other object(s)); \
                         {what}. If that is intended, push it with ?allowEmpty=true"
                    ),
                )
                .with_details(json!({
                    "nodes": 0,
                    "pods": 0,
                    "objects": objects,
                    "previousStateKept": true,
                }))
            }
            IngestFailure::Store(e) => e.into(),
            IngestFailure::Task(e) => ApiError::internal("snapshot ingest task failed", e),
        }
    }
}

/// A refused document: the previous state of the cluster was kept.
impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        let (status, details) = match &e {
            IngestError::Malformed { line, column, .. }
            | IngestError::NotAList { line, column, .. } => (
                StatusCode::BAD_REQUEST,
                json!({ "line": line, "column": column, "previousStateKept": true }),
            ),
            IngestError::Structure(s) => (
                StatusCode::BAD_REQUEST,
                json!({
                    "line": s.line,
                    "column": s.column,
                    "path": s.path,
                    "previousStateKept": true,
                }),
            ),
            IngestError::InvalidObject {
                index,
                kind,
                namespace,
                name,
                field,
                ..
            } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({
                    "index": index,
                    "kind": kind,
                    "namespace": namespace,
                    "name": name,
                    "field": field,
                    "previousStateKept": true,
                }),
            ),
            IngestError::Archive(_) => {
                return ApiError::internal("building a snapshot archive", e);
            }
        };
        ApiError::new(status, e.code(), e.to_string()).with_details(details)
    }
}

/// A run that did not succeed.
impl From<RunFailure> for ApiError {
    fn from(failure: RunFailure) -> Self {
        match failure {
            RunFailure::Store(e) => e.into(),
            failure @ RunFailure::ClusterNotLoaded(_) => {
                ApiError::conflict("cluster_not_loaded", failure.to_string())
            }
            failure @ RunFailure::ClusterSyncing { .. } => {
                ApiError::busy("cluster_syncing", failure.to_string(), 2)
            }
            RunFailure::InvalidProfile {
                run,
                message,
                errors,
            } => ApiError::unprocessable("invalid_profile", message)
                .with_details(json!({ "run": run, "errors": errors })),
            RunFailure::Crashed { run, cause } => {
                ApiError::internal(&format!("run {run} crashed"), cause)
            }
            ref failure @ RunFailure::ClusterDeleted { run, .. } => {
                ApiError::conflict("cluster_deleted", failure.to_string())
                    .with_details(json!({ "run": run }))
            }
        }
    }
}

/// A policy module the engine refused.
impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> Self {
        let status = match err {
            EngineError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            EngineError::Internal(_) => {
                return ApiError::internal("policy engine failure", err);
            }
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, err.code(), err.to_string())
    }
}

/// An upload that would replace a built-in policy.
impl From<PutPolicyError> for ApiError {
    fn from(err: PutPolicyError) -> Self {
        match err {
            PutPolicyError::Builtin(name) => ApiError::conflict(
                "builtin_policy",
                format!(
                    "\"{name}\" is the name of a built-in policy; give your policy another name \
                     in its `info` (e.g. \"{name}Custom\")"
                ),
            ),
            PutPolicyError::Store(e) => e.into(),
        }
    }
}

impl From<InsertTokenError> for ApiError {
    fn from(err: InsertTokenError) -> Self {
        match err {
            InsertTokenError::NameTaken(name) => ApiError::conflict(
                "name_taken",
                format!("a token named \"{name}\" exists; pick another name or delete it first"),
            ),
            InsertTokenError::Store(e) => e.into(),
        }
    }
}

impl From<DeleteTokenError> for ApiError {
    fn from(err: DeleteTokenError) -> Self {
        match err {
            DeleteTokenError::FromEnvironment => ApiError::conflict(
                "token_from_environment",
                "this token is set by REBALANCER_ADMIN_TOKEN; change or unset the variable and \
                 restart the server to retire it",
            ),
            DeleteTokenError::LastAdmin => ApiError::conflict(
                "last_admin_token",
                "this is the last admin token that has not expired: create another admin token \
                 first, so the API is not left without an administrator",
            ),
            DeleteTokenError::Store(e) => e.into(),
        }
    }
}

/// A pod migration that cannot be aborted.
impl From<AbortError> for ApiError {
    fn from(err: AbortError) -> Self {
        match err {
            AbortError::Finished { id, phase } => ApiError::conflict(
                "already_finished",
                format!(
                    "pod migration {id} is already {phase}; only Pending or Running pod \
                     migrations can be aborted"
                ),
            )
            .with_details(json!({ "phase": phase })),
            AbortError::Store(e) => e.into(),
        }
    }
}

/// A decision that cannot be approved or rejected.
impl From<ApprovalError> for ApiError {
    fn from(err: ApprovalError) -> Self {
        match err {
            ApprovalError::NotProposed { ref decision, .. } => {
                let details =
                    json!({"status": decision.status, "statusReason": decision.status_reason});
                ApiError::conflict("not_proposed", err.to_string()).with_details(details)
            }
            ApprovalError::Superseded {
                ref decision,
                newer,
                ..
            } => {
                let details = json!({
                    "status": decision.status,
                    "statusReason": decision.status_reason,
                    "supersededBy": newer,
                });
                ApiError::conflict("superseded", err.to_string()).with_details(details)
            }
            ApprovalError::DryRun(ref decision) => {
                let details = json!({"status": decision.status, "run": decision.run_id});
                ApiError::conflict("dry_run", err.to_string()).with_details(details)
            }
            ApprovalError::Store(e) => e.into(),
        }
    }
}

fn body_error(status: StatusCode, code: &'static str, text: String) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            status,
            "payload_too_large",
            format!("{text} (see the server's --body-limit)"),
        )
    } else {
        ApiError::new(status, code, text)
    }
}

/// Answer for unknown paths.
/// A known path asked with a method it does not have: 405 in the API's error shape.
pub async fn method_not_allowed_fallback(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{method} is not allowed on {}; the API is described at /api-docs/openapi.json",
            uri.path()
        ),
    )
}

pub async fn not_found_fallback(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "no such endpoint: {}; the API is described at /api-docs/openapi.json",
        uri.path()
    ))
}
