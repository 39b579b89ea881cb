//! The REST API (v1): axum routers, request/response types and the OpenAPI document.
//!
//! Owns: routes, status codes, the error shape ([`error::ApiError`]), body limits per route,
//! the readiness gate of `/api/v1`, `/healthz`, `/readyz`, `/api-docs/openapi.json` and the
//! Swagger UI at `/docs` (assets embedded, works offline), the request span (method and path,
//! never the query string), CORS for other origins' pages ([`cors`]), and serving connections
//! with read timeouts, over TLS when configured ([`serve`], [`tls`]). Every route is registered
//! through `utoipa_axum::routes!`, so none goes undocumented.
//! Must not: hold SQL or domain rules; handlers parse the request, call a stage (`ingest`,
//! `trigger`, `approval`, `executor`) or the store, and map the result. Nothing outside `http`
//! but `app` (which starts the router) imports this module.
//!
//! Every `/api/v1` route needs `Authorization: Bearer <token>` with the role [`auth`]'s table
//! assigns to its route and method (viewer reads, approver approves/rejects/aborts, admin
//! changes everything else); `/healthz`, `/readyz` and `/metrics` are public rows of the same
//! table; the docs and the web UI are outside the API.

pub mod audit;
pub mod auth;
pub mod clusters;
pub mod cors;
pub mod decisions;
pub mod docs;
pub mod error;
pub mod events;
pub mod extract;
pub mod health;
pub mod metrics;
pub mod page;
pub mod pod_migrations;
pub mod policies;
pub mod profiles;
pub mod pushes;
pub mod retention;
pub mod runs;
pub mod schedules;
pub mod serve;
pub mod state;
pub mod tls;
pub mod tokens;
pub mod ui;
pub mod webhooks;
pub mod whatif;
pub mod whoami;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use error::ApiError;

pub use error::ErrorBody;
pub use state::AppState;

/// Where the OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/api-docs/openapi.json";
/// Where the Swagger UI is served.
pub const DOCS_PATH: &str = "/docs";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Rebalancer API",
        description = "Keeps Kubernetes clusters balanced: push cluster snapshots, manage \
                       WebAssembly descheduling policies and DeschedulerPolicy profiles, run \
                       profiles and review the proposed pod moves (decisions). Errors always \
                       have the shape {\"code\", \"message\", \"details\"}."
    ),
    modifiers(&BearerAuth),
    components(schemas(
        ErrorBody,
        events::RunEventData,
        events::DecisionsEventData,
        events::MigrationEventData,
        events::ClusterEventData
    )),
    tags(
        (name = "health", description = "Liveness and readiness"),
        (name = "clusters", description = "Cluster state: snapshot push, nodes with utilization, pods, balance and what-if"),
        (name = "policies", description = "WebAssembly policy modules (built-in and uploaded)"),
        (name = "profiles", description = "Profiles: DeschedulerPolicy (descheduler/v1alpha2) documents"),
        (name = "runs", description = "Evaluations of a profile over a cluster"),
        (name = "decisions", description = "Proposed pod moves: approve, reject (one or in bulk), auto-approve rules"),
        (name = "pod-migrations", description = "Pod migrations of approved decisions: phases, events, abort; arbitration knobs"),
        (name = "schedules", description = "Runs started periodically or after cluster changes"),
        (name = "tokens", description = "API tokens and their roles (admin)"),
        (name = "audit", description = "Who did what to which object, when (append-only)"),
        (name = "events", description = "Live changes (server-sent events): runs, decisions, pod migrations, clusters"),
        (name = "retention", description = "How long history is kept, and what the last pruning pass did"),
        (name = "webhooks", description = "Signed HTTP deliveries of changes to portals (admin): hooks and their deliveries"),
    )
)]
struct ApiDoc;

/// Documents the bearer token: required on `/api/v1` with a role per operation, absent on the
/// public endpoints.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token (`rb_…`), required on every /api/v1 call. Roles: viewer \
                         (read), approver (viewer + approve/reject decisions, abort pod \
                         migrations), operator (viewer + push snapshots, start runs, manage \
                         schedules), admin (everything). Missing, invalid or expired → 401; \
                         role not allowed → 403. The first start prints an admin token (or set \
                         REBALANCER_ADMIN_TOKEN); create more with POST /api/v1/tokens.",
                    ))
                    .build(),
            ),
        );
        openapi.security = Some(vec![SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
    }
}

/// The `/api/v1` routes with their OpenAPI description, before state is attached.
fn api_routes(body_limit: usize) -> OpenApiRouter<AppState> {
    // The snapshot body is read by the handler under --snapshot-body-limit.
    let snapshot = OpenApiRouter::new()
        .routes(utoipa_axum::routes!(clusters::put_snapshot))
        .layer(DefaultBodyLimit::disable());
    let rest = OpenApiRouter::new()
        .routes(utoipa_axum::routes!(clusters::list_clusters))
        .routes(utoipa_axum::routes!(
            clusters::get_cluster,
            clusters::delete_cluster
        ))
        .routes(utoipa_axum::routes!(clusters::list_nodes))
        .routes(utoipa_axum::routes!(clusters::list_pods))
        .routes(utoipa_axum::routes!(whatif::get_balance))
        .routes(utoipa_axum::routes!(whatif::what_if))
        .routes(utoipa_axum::routes!(
            policies::upload_policy,
            policies::list_policies
        ))
        .routes(utoipa_axum::routes!(
            policies::get_policy,
            policies::delete_policy
        ))
        .routes(utoipa_axum::routes!(profiles::list_profiles))
        .routes(utoipa_axum::routes!(
            profiles::put_profile,
            profiles::get_profile,
            profiles::delete_profile
        ))
        .routes(utoipa_axum::routes!(runs::create_run, runs::list_runs))
        .routes(utoipa_axum::routes!(runs::get_run))
        .routes(utoipa_axum::routes!(decisions::list_decisions))
        .routes(utoipa_axum::routes!(decisions::get_decision))
        .routes(utoipa_axum::routes!(decisions::approve_decision))
        .routes(utoipa_axum::routes!(decisions::reject_decision))
        .routes(utoipa_axum::routes!(decisions::approve_decisions))
        .routes(utoipa_axum::routes!(decisions::reject_decisions))
        .routes(utoipa_axum::routes!(
            decisions::get_auto_approve,
            decisions::put_auto_approve
        ))
        .routes(utoipa_axum::routes!(pod_migrations::list_pod_migrations))
        .routes(utoipa_axum::routes!(pod_migrations::get_pod_migration))
        .routes(utoipa_axum::routes!(pod_migrations::abort_pod_migration))
        .routes(utoipa_axum::routes!(
            pod_migrations::get_arbitration,
            pod_migrations::put_arbitration
        ))
        .routes(utoipa_axum::routes!(
            pod_migrations::get_cluster_arbitration,
            pod_migrations::put_cluster_arbitration,
            pod_migrations::delete_cluster_arbitration
        ))
        .routes(utoipa_axum::routes!(
            schedules::create_schedule,
            schedules::list_schedules
        ))
        .routes(utoipa_axum::routes!(
            schedules::get_schedule,
            schedules::put_schedule,
            schedules::delete_schedule
        ))
        .routes(utoipa_axum::routes!(
            tokens::create_token,
            tokens::list_tokens
        ))
        .routes(utoipa_axum::routes!(tokens::delete_token))
        .routes(utoipa_axum::routes!(
            webhooks::create_webhook,
            webhooks::list_webhooks
        ))
        .routes(utoipa_axum::routes!(
            webhooks::get_webhook,
            webhooks::delete_webhook
        ))
        .routes(utoipa_axum::routes!(webhooks::test_webhook))
        .routes(utoipa_axum::routes!(webhooks::enable_webhook))
        .routes(utoipa_axum::routes!(webhooks::list_deliveries))
        .routes(utoipa_axum::routes!(webhooks::get_delivery))
        .routes(utoipa_axum::routes!(audit::list_audit))
        .routes(utoipa_axum::routes!(whoami::whoami))
        .routes(utoipa_axum::routes!(events::events))
        .routes(utoipa_axum::routes!(
            retention::get_retention,
            retention::put_retention
        ))
        .layer(DefaultBodyLimit::max(body_limit));
    snapshot.merge(rest)
}

fn all_routes(body_limit: usize) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(utoipa_axum::routes!(health::healthz))
        .routes(utoipa_axum::routes!(health::readyz))
        .routes(utoipa_axum::routes!(metrics::metrics))
        .merge(api_routes(body_limit))
}

/// The OpenAPI document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut openapi = all_routes(crate::config::DEFAULT_BODY_LIMIT.0 as usize).into_openapi();
    auth::document_roles(&mut openapi);
    document_body_timeouts(&mut openapi);
    docs::complete(&mut openapi);
    openapi
}

/// Every operation that takes a body may be answered 408 (`serve`'s body idle timeout).
fn document_body_timeouts(openapi: &mut utoipa::openapi::OpenApi) {
    for item in openapi.paths.paths.values_mut() {
        for operation in [&mut item.put, &mut item.post, &mut item.patch]
            .into_iter()
            .flatten()
        {
            let responses = &mut operation.responses.responses;
            responses.entry("408".into()).or_insert_with(|| {
                ResponseBuilder::new()
                    .description(
                        "The request body stopped arriving for longer than the server's \
                         --body-idle-timeout (code `body_timeout`); the connection is closed",
                    )
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ErrorBody")))
                            .build(),
                    )
                    .build()
                    .into()
            });
        }
    }
}

/// The whole HTTP application.
pub fn router(state: AppState) -> Router {
    // Every documented route goes through the one authorization middleware and its table
    // (`auth::ROUTE_ACCESS`), the public ones too.
    let health = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(utoipa_axum::routes!(health::healthz))
        .routes(utoipa_axum::routes!(health::readyz))
        .routes(utoipa_axum::routes!(metrics::metrics))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ));
    // Readiness first (503 during start-up, whatever the token), then the token and role.
    let api = api_routes(state.settings.body_limit)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_ready));
    let (router, mut openapi) = health.merge(api).split_for_parts();
    auth::document_roles(&mut openapi);
    document_body_timeouts(&mut openapi);
    docs::complete(&mut openapi);
    let origins = state.settings.cors_allow_origins.clone();
    let router = router
        .merge(SwaggerUi::new(DOCS_PATH).url(OPENAPI_PATH, openapi))
        // The web UI (`/`, `/ui/*`): public static files, outside `/api/v1` and its auth.
        .merge(ui::router())
        .method_not_allowed_fallback(error::method_not_allowed_fallback)
        .fallback(error::not_found_fallback)
        .layer(
            // A span per request (method, path) around the handler's own logs. Failures are
            // logged where they are understood (`ApiError::internal`), so the layer's own
            // failure lines stay at debug: a 503 during start-up is not an error.
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(DefaultOnResponse::new().level(Level::DEBUG))
                .on_failure(DefaultOnFailure::new().level(Level::DEBUG)),
        )
        .with_state(state);
    // Outermost: a preflight is answered before routing, readiness and authorization.
    cors::allow(router, &origins)
}

/// The span of a request: its method and path, never the query string (which may carry
/// secrets a client put there, such as a token) nor the headers.
fn request_span(request: &Request) -> tracing::Span {
    tracing::span!(
        Level::INFO,
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        version = ?request.version(),
    )
}

/// `/api/v1` answers 503 until start-up has finished.
async fn require_ready(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if state.is_ready() {
        Ok(next.run(request).await)
    } else {
        Err(ApiError::not_ready())
    }
}

/// RFC 3339 rendering of a stored millisecond timestamp.
pub(crate) fn timestamp(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn every_api_route_is_documented() {
        let doc = openapi();
        let paths: Vec<&String> = doc.paths.paths.keys().collect();
        for path in [
            "/healthz",
            "/readyz",
            "/api/v1/clusters",
            "/api/v1/clusters/{name}",
            "/api/v1/clusters/{name}/snapshot",
            "/api/v1/clusters/{name}/nodes",
            "/api/v1/clusters/{name}/pods",
            "/api/v1/clusters/{name}/balance",
            "/api/v1/clusters/{name}/what-if",
            "/api/v1/policies",
            "/api/v1/policies/{name}",
            "/api/v1/profiles",
            "/api/v1/profiles/{name}",
            "/api/v1/runs",
            "/api/v1/runs/{id}",
            "/api/v1/decisions",
            "/api/v1/decisions/{id}",
            "/api/v1/decisions/{id}/approve",
            "/api/v1/decisions/{id}/reject",
            "/api/v1/decisions/approve",
            "/api/v1/decisions/reject",
            "/api/v1/profiles/{name}/auto-approve",
            "/api/v1/pod-migrations",
            "/api/v1/pod-migrations/{id}",
            "/api/v1/pod-migrations/{id}/abort",
            "/api/v1/arbitration",
            "/api/v1/clusters/{name}/arbitration",
            "/metrics",
            "/api/v1/schedules",
            "/api/v1/schedules/{id}",
            "/api/v1/tokens",
            "/api/v1/tokens/{id}",
            "/api/v1/audit",
            "/api/v1/whoami",
            "/api/v1/events",
            "/api/v1/retention",
        ] {
            assert!(
                paths.iter().any(|p| *p == path),
                "{path} missing: {paths:?}"
            );
        }
        assert_eq!(paths.len(), 42, "{paths:?}");
    }
}
