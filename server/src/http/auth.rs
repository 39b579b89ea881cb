//! Authentication and authorization: the bearer-token middleware, the one table that says who
//! may call each route, and the [`Actor`] extractor handlers use to know who is calling (for
//! the audit log).
//!
//! Who may call what is declared in one place, [`ROUTE_ACCESS`]: one row per route template and
//! method, public or a minimum role. `HEAD` needs what `GET` needs (axum answers `HEAD` with the
//! `GET` handler). The one middleware, [`authorize`], sits on every documented route and consults
//! nothing else; a routed request without a row is refused to all but admins (and logged as the
//! bug it is), so a new route is never open by accident. The OpenAPI document states each
//! operation's access from the same table ([`document_roles`]), and `docs/api.md` carries the
//! table as rendered by [`access_table_markdown`].
//! Must not: decide anything from a path prefix or a method alone; unknown routes and methods are
//! not answered here (they keep their 404/405, which the router gives before this runs).

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};

use super::error::ApiError;
use crate::auth::{self, Authentication, Principal};
use rebalancer_store::{Role, Store};

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a token (health, readiness, metrics).
    Public,
    /// A bearer token with this role or a higher one.
    Role(Role),
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Public => f.write_str("public"),
            Access::Role(role) => role.fmt(f),
        }
    }
}

/// One row of [`ROUTE_ACCESS`].
#[derive(Debug)]
pub struct RouteAccess {
    /// `GET`, `PUT`, `POST`, `DELETE` or `PATCH` (`HEAD` is looked up as `GET`).
    pub method: Method,
    /// The route template as registered and documented (`/api/v1/decisions/{id}/approve`).
    pub route: &'static str,
    pub access: Access,
}

const fn row(method: Method, route: &'static str, access: Access) -> RouteAccess {
    RouteAccess {
        method,
        route,
        access,
    }
}

const PUBLIC: Access = Access::Public;
const VIEWER: Access = Access::Role(Role::Viewer);
const APPROVER: Access = Access::Role(Role::Approver);
const OPERATOR: Access = Access::Role(Role::Operator);
const ADMIN: Access = Access::Role(Role::Admin);

impl Access {
    /// Who may call a route with this access, in words: "no token", "any token", "the
    /// `operator` or `admin` role".
    fn who(self) -> String {
        match self {
            Access::Public => "no token".into(),
            Access::Role(Role::Viewer) => "any token".into(),
            Access::Role(needed) => format!("the {} role", roles_of(needed, "`")),
        }
    }
}

/// The roles that may call a route needing `needed`, quoted with `quote` and joined with
/// "or": `` `operator` or `admin` ``.
fn roles_of(needed: Role, quote: &str) -> String {
    let names: Vec<String> = Role::holders(needed)
        .map(|r| format!("{quote}{r}{quote}"))
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Every documented route × method and who may call it. Viewers read (but not the token
/// list); approvers also approve and reject decisions and abort pod migrations; operators
/// (not approvers: a CI job must not approve what its runs propose) also push snapshots, start
/// runs and manage schedules; admins do everything, including tokens, policies, profiles,
/// auto-approve rules, arbitration, retention and deleting clusters ([`Role::grants`]).
/// `http::whoami` derives what a token may do from rows of this table. The OpenAPI
/// document and this table must list the same operations (a test walks the document against
/// it).
pub const ROUTE_ACCESS: &[RouteAccess] = &[
    row(Method::GET, "/healthz", PUBLIC),
    row(Method::GET, "/readyz", PUBLIC),
    row(Method::GET, "/metrics", PUBLIC),
    row(Method::GET, "/api/v1/clusters", VIEWER),
    row(Method::GET, "/api/v1/clusters/{name}", VIEWER),
    row(Method::DELETE, "/api/v1/clusters/{name}", ADMIN),
    row(Method::PUT, "/api/v1/clusters/{name}/snapshot", OPERATOR),
    row(Method::GET, "/api/v1/clusters/{name}/nodes", VIEWER),
    row(Method::GET, "/api/v1/clusters/{name}/pods", VIEWER),
    row(Method::GET, "/api/v1/clusters/{name}/balance", VIEWER),
    // A read: what-if simulates, it changes nothing (POST only to carry the selection).
    row(Method::POST, "/api/v1/clusters/{name}/what-if", VIEWER),
    row(Method::GET, "/api/v1/policies", VIEWER),
    row(Method::POST, "/api/v1/policies", ADMIN),
    row(Method::GET, "/api/v1/policies/{name}", VIEWER),
    row(Method::DELETE, "/api/v1/policies/{name}", ADMIN),
    row(Method::GET, "/api/v1/profiles", VIEWER),
    row(Method::GET, "/api/v1/profiles/{name}", VIEWER),
    row(Method::PUT, "/api/v1/profiles/{name}", ADMIN),
    row(Method::DELETE, "/api/v1/profiles/{name}", ADMIN),
    row(Method::GET, "/api/v1/profiles/{name}/auto-approve", VIEWER),
    row(Method::PUT, "/api/v1/profiles/{name}/auto-approve", ADMIN),
    row(Method::GET, "/api/v1/runs", VIEWER),
    row(Method::POST, "/api/v1/runs", OPERATOR),
    row(Method::GET, "/api/v1/runs/{id}", VIEWER),
    row(Method::GET, "/api/v1/decisions", VIEWER),
    row(Method::GET, "/api/v1/decisions/{id}", VIEWER),
    row(Method::POST, "/api/v1/decisions/{id}/approve", APPROVER),
    row(Method::POST, "/api/v1/decisions/{id}/reject", APPROVER),
    row(Method::POST, "/api/v1/decisions/approve", APPROVER),
    row(Method::POST, "/api/v1/decisions/reject", APPROVER),
    row(Method::GET, "/api/v1/pod-migrations", VIEWER),
    row(Method::GET, "/api/v1/pod-migrations/{id}", VIEWER),
    row(Method::POST, "/api/v1/pod-migrations/{id}/abort", APPROVER),
    row(Method::GET, "/api/v1/arbitration", VIEWER),
    row(Method::PUT, "/api/v1/arbitration", ADMIN),
    row(Method::GET, "/api/v1/clusters/{name}/arbitration", VIEWER),
    row(Method::PUT, "/api/v1/clusters/{name}/arbitration", ADMIN),
    row(Method::DELETE, "/api/v1/clusters/{name}/arbitration", ADMIN),
    row(Method::GET, "/api/v1/schedules", VIEWER),
    row(Method::POST, "/api/v1/schedules", OPERATOR),
    row(Method::GET, "/api/v1/schedules/{id}", VIEWER),
    row(Method::PUT, "/api/v1/schedules/{id}", OPERATOR),
    row(Method::DELETE, "/api/v1/schedules/{id}", OPERATOR),
    row(Method::GET, "/api/v1/tokens", ADMIN),
    row(Method::POST, "/api/v1/tokens", ADMIN),
    row(Method::DELETE, "/api/v1/tokens/{id}", ADMIN),
    row(Method::GET, "/api/v1/audit", VIEWER),
    row(Method::GET, "/api/v1/whoami", VIEWER),
    row(Method::GET, "/api/v1/events", VIEWER),
    row(Method::GET, "/api/v1/retention", VIEWER),
    row(Method::PUT, "/api/v1/retention", ADMIN),
    row(Method::GET, "/api/v1/webhooks", ADMIN),
    row(Method::POST, "/api/v1/webhooks", ADMIN),
    row(Method::GET, "/api/v1/webhooks/{id}", ADMIN),
    row(Method::DELETE, "/api/v1/webhooks/{id}", ADMIN),
    row(Method::POST, "/api/v1/webhooks/{id}/test", ADMIN),
    row(Method::POST, "/api/v1/webhooks/{id}/enable", ADMIN),
    row(Method::GET, "/api/v1/webhooks/{id}/deliveries", ADMIN),
    row(
        Method::GET,
        "/api/v1/webhooks/{id}/deliveries/{deliveryId}",
        ADMIN,
    ),
];

/// The table's row for a method and route template (`HEAD` is asked as `GET`), if any.
pub fn route_access(method: &Method, route: &str) -> Option<Access> {
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    ROUTE_ACCESS
        .iter()
        .find(|r| r.method == method && r.route == route)
        .map(|r| r.access)
}

/// What the middleware and the OpenAPI document apply: the table's row, or admin only for a
/// route the table forgot (fail closed; the tests catch the omission).
fn enforced_access(method: &Method, route: &str) -> Access {
    route_access(method, route).unwrap_or(ADMIN)
}

/// Check the bearer token of a request against the access the table gives its route, and hand
/// the [`Principal`] to the handler (request extension, read by [`Actor`]). Public routes pass
/// without a token.
pub async fn authorize(
    State(store): State<Store>,
    mut request: Request,
    next: Next,
) -> Result<Response, Response> {
    // Set by the router for every routed request; this middleware only runs on routes.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string());
    let access = match route.as_deref() {
        Some(route) => {
            let access = enforced_access(request.method(), route);
            if route_access(request.method(), route).is_none() {
                tracing::error!(
                    method = %request.method(),
                    route,
                    "a route has no row in the access table (http::auth::ROUTE_ACCESS): only \
                     admins may call it until one is added"
                );
            }
            access
        }
        None => {
            tracing::error!(
                method = %request.method(),
                "a request reached the authorization middleware without a matched route: only \
                 admins may make it"
            );
            ADMIN
        }
    };
    let route = route.unwrap_or_else(|| request.uri().path().to_string());
    let needed = match access {
        Access::Public => return Ok(next.run(request).await),
        Access::Role(role) => role,
    };
    let token = bearer_token(request.headers().get(header::AUTHORIZATION))
        .map_err(|(code, message)| unauthorized(code, message))?;
    let principal = match auth::authenticate(&store, token)
        .await
        .map_err(|e| ApiError::from(e).into_response())?
    {
        Authentication::Valid(principal) => principal,
        Authentication::Unknown => {
            return Err(unauthorized(
                "invalid_token",
                "the bearer token is not valid (unknown, or deleted); ask an admin for a token",
            ));
        }
        Authentication::Expired { name, expires_at } => {
            tracing::info!(
                token = %name,
                method = %request.method(),
                route,
                "request refused: expired token"
            );
            return Err(unauthorized(
                "token_expired",
                &format!(
                    "the bearer token \"{name}\" expired at {}; ask an admin for a new token",
                    super::timestamp(expires_at)
                ),
            ));
        }
    };
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
                "{} {route} needs the {} role; token \"{}\" has the {} role",
                request.method(),
                roles_of(needed, ""),
                principal.name,
                principal.role
            ),
        )
        .with_details(serde_json::json!({
            "requiredRole": needed,
            "allowedRoles": Role::holders(needed).collect::<Vec<_>>(),
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

/// 401 with `WWW-Authenticate: Bearer` (RFC 6750; an expired token is an `invalid_token` there).
fn unauthorized(code: &'static str, message: &str) -> Response {
    let error = match code {
        "missing_token" => "Bearer realm=\"rebalancer\"",
        "token_expired" => {
            "Bearer realm=\"rebalancer\", error=\"invalid_token\", \
             error_description=\"the token expired\""
        }
        _ => "Bearer realm=\"rebalancer\", error=\"invalid_token\"",
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

/// State, in the OpenAPI document, the access the table gives every operation: public
/// operations need no token; the others name their role and document their 401/403 answers.
pub fn document_roles(openapi: &mut utoipa::openapi::OpenApi) {
    let error = || {
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorBody")))
            .build()
    };
    for (path, item) in openapi.paths.paths.iter_mut() {
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
            let access = enforced_access(&method, path);
            let role = match access {
                Access::Public => {
                    operation.security = Some(vec![SecurityRequirement::default()]);
                    continue;
                }
                Access::Role(role) => role,
            };
            let note = match role {
                Role::Viewer => format!(
                    "Requires a bearer token with any role ({}).",
                    roles_of(role, "`")
                ),
                _ => format!("Requires a bearer token with {}.", access.who()),
            };
            operation.description = Some(match operation.description.take() {
                Some(text) if !text.is_empty() => format!("{text}\n\n{note}"),
                _ => note,
            });
            let responses = &mut operation.responses.responses;
            responses.entry("401".into()).or_insert_with(|| {
                ResponseBuilder::new()
                    .description(
                        "No bearer token (`missing_token`), one that is not valid \
                         (`invalid_token`), or one that expired (`token_expired`)",
                    )
                    .content("application/json", error())
                    .build()
                    .into()
            });
            responses.entry("403".into()).or_insert_with(|| {
                ResponseBuilder::new()
                    .description(format!(
                        "The token's role is not {} (`forbidden`)",
                        roles_of(role, "`")
                    ))
                    .content("application/json", error())
                    .build()
                    .into()
            });
        }
    }
}

/// [`ROUTE_ACCESS`] as the Markdown table `docs/api.md` shows (a test keeps the two equal).
pub fn access_table_markdown() -> String {
    let mut out = String::from("| method | route | who may call it |\n|---|---|---|\n");
    for row in ROUTE_ACCESS {
        let methods = if row.method == Method::GET {
            "`GET`, `HEAD`".to_string()
        } else {
            format!("`{}`", row.method)
        };
        let who = match row.access {
            Access::Public | Access::Role(Role::Viewer) => row.access.who(),
            Access::Role(role) => roles_of(role, "`"),
        };
        out.push_str(&format!("| {methods} | `{}` | {who} |\n", row.route));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_by_method_and_route_template() {
        let cases = [
            (Method::GET, "/api/v1/clusters", VIEWER),
            (Method::HEAD, "/api/v1/clusters", VIEWER),
            (Method::GET, "/api/v1/audit", VIEWER),
            (Method::GET, "/api/v1/decisions/{id}", VIEWER),
            (Method::POST, "/api/v1/decisions/{id}/approve", APPROVER),
            (Method::POST, "/api/v1/decisions/{id}/reject", APPROVER),
            (Method::POST, "/api/v1/decisions/approve", APPROVER),
            (Method::POST, "/api/v1/decisions/reject", APPROVER),
            (Method::POST, "/api/v1/pod-migrations/{id}/abort", APPROVER),
            (Method::PUT, "/api/v1/clusters/{name}/snapshot", OPERATOR),
            (Method::POST, "/api/v1/runs", OPERATOR),
            // A simulation: viewers may ask, though it is a POST.
            (Method::POST, "/api/v1/clusters/{name}/what-if", VIEWER),
            (Method::GET, "/api/v1/clusters/{name}/balance", VIEWER),
            (Method::DELETE, "/api/v1/schedules/{id}", OPERATOR),
            (Method::DELETE, "/api/v1/clusters/{name}", ADMIN),
            (Method::PUT, "/api/v1/arbitration", ADMIN),
            (Method::PUT, "/api/v1/clusters/{name}/arbitration", ADMIN),
            (Method::GET, "/api/v1/clusters/{name}/arbitration", VIEWER),
            (Method::PUT, "/api/v1/profiles/{name}", ADMIN),
            (Method::POST, "/api/v1/policies", ADMIN),
            (Method::DELETE, "/api/v1/tokens/{id}", ADMIN),
            (Method::GET, "/api/v1/tokens", ADMIN),
            // HEAD needs what GET needs: the token list's size is not for viewers either.
            (Method::HEAD, "/api/v1/tokens", ADMIN),
            (Method::GET, "/healthz", PUBLIC),
            (Method::HEAD, "/metrics", PUBLIC),
        ];
        for (method, route, access) in cases {
            assert_eq!(
                route_access(&method, route),
                Some(access),
                "{method} {route}"
            );
        }
        // No row: no answer from the table, and admin only where it is enforced.
        for (method, route) in [
            (Method::POST, "/api/v1/something-new"),
            (Method::DELETE, "/api/v1/audit"),
            (Method::OPTIONS, "/api/v1/clusters"),
            (Method::GET, "/api/v1/decisions/{id}/approve"),
            (Method::GET, "/api/v1/clusters/"),
        ] {
            assert_eq!(route_access(&method, route), None, "{method} {route}");
            assert_eq!(enforced_access(&method, route), ADMIN, "{method} {route}");
        }
    }

    /// The table and the OpenAPI document list the same operations, once each.
    #[test]
    fn the_table_and_the_openapi_document_agree() {
        let doc = super::super::openapi();
        let mut documented = Vec::new();
        for (path, item) in &doc.paths.paths {
            for (method, operation) in [
                (Method::GET, &item.get),
                (Method::PUT, &item.put),
                (Method::POST, &item.post),
                (Method::DELETE, &item.delete),
                (Method::PATCH, &item.patch),
                (Method::HEAD, &item.head),
                (Method::OPTIONS, &item.options),
                (Method::TRACE, &item.trace),
            ] {
                if operation.is_some() {
                    assert!(
                        route_access(&method, path).is_some(),
                        "{method} {path} is documented but has no row in ROUTE_ACCESS"
                    );
                    documented.push((method, path.clone()));
                }
            }
        }
        for row in ROUTE_ACCESS {
            assert!(
                documented
                    .iter()
                    .any(|(m, p)| *m == row.method && p == row.route),
                "{} {} is in ROUTE_ACCESS but not in the OpenAPI document",
                row.method,
                row.route
            );
            let same = ROUTE_ACCESS
                .iter()
                .filter(|r| r.method == row.method && r.route == row.route)
                .count();
            assert_eq!(same, 1, "{} {} has {same} rows", row.method, row.route);
        }
        assert_eq!(documented.len(), ROUTE_ACCESS.len());
    }

    /// `docs/api.md` shows the table as the code has it.
    #[test]
    fn the_documented_table_is_the_code_s() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
        let doc = std::fs::read_to_string(path).expect("docs/api.md");
        let (begin, end) = ("<!-- access-table:begin -->\n", "<!-- access-table:end -->");
        let start = doc.find(begin).expect("the begin marker in docs/api.md") + begin.len();
        let stop = doc[start..]
            .find(end)
            .expect("the end marker in docs/api.md")
            + start;
        let expected = access_table_markdown();
        assert!(
            doc[start..stop] == expected,
            "docs/api.md's access table differs from http::auth::ROUTE_ACCESS; put this \
             between the markers:\n\n{expected}"
        );
    }
    #[test]
    fn who_may_call_in_words() {
        assert_eq!(PUBLIC.who(), "no token");
        assert_eq!(VIEWER.who(), "any token");
        assert_eq!(APPROVER.who(), "the `approver` or `admin` role");
        assert_eq!(OPERATOR.who(), "the `operator` or `admin` role");
        assert_eq!(ADMIN.who(), "the `admin` role");
        assert_eq!(
            roles_of(Role::Viewer, ""),
            "viewer, approver, operator or admin"
        );
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
