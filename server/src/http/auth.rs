//! Authentication and authorization of `/api/v1`: the bearer-token middleware, the one table
//! that says which role each route needs, and the [`Actor`] extractor handlers use to know who
//! is calling (for the audit log).
//!
//! The role a route needs is declared in one place, [`ROUTE_ROLES`], keyed on method and route
//! pattern; anything not listed needs `viewer` to read (`GET`) and `admin` to change. So a new
//! mutating route is admin-only until it is listed here — never open by accident. The OpenAPI
//! document states the role of every operation, derived from the same table
//! ([`document_roles`]).

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};

use super::error::ApiError;
use crate::auth::{self, Principal};
use rebalancer_store::{Role, Store};

/// One exception to the default (read: viewer, change: admin).
struct RouteRole {
    method: Method,
    /// A route pattern prefix, as registered (`/api/v1/decisions/{id}/approve`).
    prefix: &'static str,
    role: Role,
}

/// Routes whose role is not the default, first match wins. Approvers act on decisions
/// (approve, reject, bulk approve) and pod migrations (abort); token metadata is for admins.
const ROUTE_ROLES: &[RouteRole] = &[
    RouteRole {
        method: Method::GET,
        prefix: "/api/v1/tokens",
        role: Role::Admin,
    },
    RouteRole {
        method: Method::POST,
        prefix: "/api/v1/decisions",
        role: Role::Approver,
    },
    RouteRole {
        method: Method::POST,
        prefix: "/api/v1/pod-migrations",
        role: Role::Approver,
    },
];

/// The role a route needs.
pub fn required_role(method: &Method, route: &str) -> Role {
    if let Some(rule) = ROUTE_ROLES
        .iter()
        .find(|r| r.method == method && route.starts_with(r.prefix))
    {
        return rule.role;
    }
    if method == Method::GET || method == Method::HEAD {
        Role::Viewer
    } else {
        Role::Admin
    }
}

/// Check the bearer token of a `/api/v1` request against the role its route needs, and hand
/// the [`Principal`] to the handler (request extension, read by [`Actor`]).
pub async fn authorize(
    State(store): State<Store>,
    mut request: Request,
    next: Next,
) -> Result<Response, Response> {
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || request.uri().path().to_string(),
        |p| p.as_str().to_string(),
    );
    let needed = required_role(request.method(), &route);
    let token = bearer_token(request.headers().get(header::AUTHORIZATION))
        .map_err(|(code, message)| unauthorized(code, message))?;
    let principal = auth::authenticate(&store, token)
        .await
        .map_err(|e| ApiError::from(e).into_response())?
        .ok_or_else(|| {
            unauthorized(
                "invalid_token",
                "the bearer token is not valid (unknown, or deleted); ask an admin for a token",
            )
        })?;
    if !principal.has(needed) {
        tracing::info!(
            token = %principal.name,
            role = %principal.role,
            needed = %needed,
            method = %request.method(),
            route,
            "request refused: insufficient role"
        );
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} {route} needs the {needed} role; token \"{}\" has the {} role",
                request.method(),
                principal.name,
                principal.role
            ),
        )
        .with_details(serde_json::json!({
            "requiredRole": needed,
            "role": principal.role,
        }))
        .into_response());
    }
    request.extensions_mut().insert(principal);
    Ok(next.run(request).await)
}

/// The token of an `Authorization: Bearer <token>` header, or the error code and message.
fn bearer_token(value: Option<&HeaderValue>) -> Result<&str, (&'static str, &'static str)> {
    let Some(value) = value else {
        return Err((
            "missing_token",
            "this endpoint needs an API token: send `Authorization: Bearer <token>`",
        ));
    };
    let text = value.to_str().unwrap_or_default().trim();
    let token = text
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty());
    token.ok_or((
        "invalid_token",
        "the Authorization header must be `Bearer <token>`",
    ))
}

/// 401 with `WWW-Authenticate: Bearer` (RFC 6750).
fn unauthorized(code: &'static str, message: &str) -> Response {
    let error = if code == "missing_token" {
        "Bearer realm=\"rebalancer\""
    } else {
        "Bearer realm=\"rebalancer\", error=\"invalid_token\""
    };
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, code, message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(error));
    response
}

/// Who is calling: the principal the middleware authenticated. Use it in handlers of
/// mutating routes to record the audit log entry.
#[derive(Clone, Debug)]
pub struct Actor(pub Principal);

impl std::ops::Deref for Actor {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.0
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .map(Actor)
            .ok_or_else(|| {
                // Only reachable for a route outside the authorized `/api/v1` router.
                ApiError::internal(
                    "an Actor was asked for on a route without authentication",
                    parts.uri.path(),
                )
            })
    }
}

/// State, in the OpenAPI document, the role every `/api/v1` operation needs and its 401/403
/// answers, and mark the other operations (health, metrics) as needing no token.
pub fn document_roles(openapi: &mut utoipa::openapi::OpenApi) {
    let error = || {
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorBody")))
            .build()
    };
    for (path, item) in openapi.paths.paths.iter_mut() {
        let public = !path.starts_with("/api/v1");
        let operations = [
            (Method::GET, &mut item.get),
            (Method::PUT, &mut item.put),
            (Method::POST, &mut item.post),
            (Method::DELETE, &mut item.delete),
            (Method::PATCH, &mut item.patch),
        ];
        for (method, operation) in operations {
            let Some(operation) = operation.as_mut() else {
                continue;
            };
            if public {
                operation.security = Some(vec![SecurityRequirement::default()]);
                continue;
            }
            let role = required_role(&method, path);
            let note = format!("Requires a bearer token with the `{role}` role (or higher).");
            operation.description = Some(match operation.description.take() {
                Some(text) if !text.is_empty() => format!("{text}\n\n{note}"),
                _ => note,
            });
            let responses = &mut operation.responses.responses;
            responses.entry("401".into()).or_insert_with(|| {
                ResponseBuilder::new()
                    .description("No bearer token, or one that is not valid")
                    .content("application/json", error())
                    .build()
                    .into()
            });
            responses.entry("403".into()).or_insert_with(|| {
                ResponseBuilder::new()
                    .description(format!("The token's role is below `{role}`"))
                    .content("application/json", error())
                    .build()
                    .into()
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_by_method_and_route() {
        let cases = [
            (Method::GET, "/api/v1/clusters", Role::Viewer),
            (Method::GET, "/api/v1/audit", Role::Viewer),
            (Method::GET, "/api/v1/decisions/{id}", Role::Viewer),
            (
                Method::POST,
                "/api/v1/decisions/{id}/approve",
                Role::Approver,
            ),
            (
                Method::POST,
                "/api/v1/decisions/{id}/reject",
                Role::Approver,
            ),
            (Method::POST, "/api/v1/decisions/approve", Role::Approver),
            (
                Method::POST,
                "/api/v1/pod-migrations/{id}/abort",
                Role::Approver,
            ),
            (Method::PUT, "/api/v1/clusters/{name}/snapshot", Role::Admin),
            (Method::POST, "/api/v1/runs", Role::Admin),
            (Method::POST, "/api/v1/policies", Role::Admin),
            (Method::DELETE, "/api/v1/tokens/{id}", Role::Admin),
            (Method::GET, "/api/v1/tokens", Role::Admin),
            (Method::POST, "/api/v1/something-new", Role::Admin),
        ];
        for (method, route, role) in cases {
            assert_eq!(required_role(&method, route), role, "{method} {route}");
        }
    }

    #[test]
    fn bearer_header_parsing() {
        let ok = HeaderValue::from_static("Bearer rb_abc");
        assert_eq!(bearer_token(Some(&ok)).unwrap(), "rb_abc");
        let lower = HeaderValue::from_static("bearer  rb_abc ");
        assert_eq!(bearer_token(Some(&lower)).unwrap(), "rb_abc");
        for bad in ["Basic dXNlcg==", "Bearer", "Bearer ", "rb_abc"] {
            let value = HeaderValue::from_static(bad);
            assert_eq!(
                bearer_token(Some(&value)).unwrap_err().0,
                "invalid_token",
                "{bad}"
            );
        }
        assert_eq!(bearer_token(None).unwrap_err().0, "missing_token");
        let response = unauthorized("invalid_token", "x");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert!(
            response.headers()[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap()
                .contains("error=\"invalid_token\"")
        );
    }
}
