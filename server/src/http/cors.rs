//! CORS (`--cors-allow-origin`): lets web pages served from other origins — a team's portal —
//! call the API from a browser with a bearer token. Off unless origins are configured.
//!
//! Owns: the CORS policy (the configured origins exactly; the API's methods; the
//! `Authorization` and `Content-Type` request headers; `Retry-After` and `WWW-Authenticate`
//! readable by the page; no cookies or other credentials, the token is a header) and where it
//! sits: outside routing and authorization, so a preflight (`OPTIONS` with `Origin` and
//! `Access-Control-Request-Method`) is answered without a token and before the readiness gate.
//! An `OPTIONS` request that is not a preflight is routed as without CORS (`405`).
//! Must not: authorize — the actual request that follows a preflight needs its token as any
//! other; CORS only decides whether the browser lets the page read the answer.

use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::{self, Next};
use tower::ServiceExt as _;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The methods the API has (`HEAD` answers as `GET`).
pub const ALLOWED_METHODS: [Method; 5] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
];

/// How long a browser may reuse a preflight's answer.
pub const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// `router` answering CORS requests from `origins` (already normalized by `config`); `router`
/// unchanged when there are none.
pub fn allow(router: Router, origins: &[String]) -> Router {
    if origins.is_empty() {
        return router;
    }
    let origins: Vec<HeaderValue> = origins
        .iter()
        .map(|o| HeaderValue::from_str(o).expect("config checked that origins are ASCII"))
        .collect();
    let cors = CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods(ALLOWED_METHODS)
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .expose_headers([header::RETRY_AFTER, header::WWW_AUTHENTICATE])
        .max_age(PREFLIGHT_MAX_AGE);
    // tower-http answers every OPTIONS itself; only preflights should be.
    let without_cors = router.clone();
    router
        .layer(cors)
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            let without_cors = without_cors.clone();
            async move {
                if request.method() == Method::OPTIONS && !is_preflight(&request) {
                    without_cors
                        .oneshot(request)
                        .await
                        .unwrap_or_else(|never| match never {})
                } else {
                    next.run(request).await
                }
            }
        }))
}

/// `OPTIONS` with `Origin` and `Access-Control-Request-Method`: what a browser sends before a
/// request a page may not make without asking.
fn is_preflight(request: &Request) -> bool {
    let headers = request.headers();
    request.method() == Method::OPTIONS
        && headers.contains_key(header::ORIGIN)
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;

    fn app(origins: &[&str]) -> Router {
        let origins: Vec<String> = origins.iter().map(|o| o.to_string()).collect();
        allow(Router::new().route("/x", get(|| async { "x" })), &origins)
    }

    fn options(origin: Option<&str>, method: Option<&str>) -> Request {
        let mut request = Request::builder().method(Method::OPTIONS).uri("/x");
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        if let Some(method) = method {
            request = request.header(header::ACCESS_CONTROL_REQUEST_METHOD, method);
        }
        request.body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn only_preflights_are_answered_by_cors() {
        let on = app(&["https://portal.example"]);
        let response = on
            .clone()
            .oneshot(options(Some("https://portal.example"), Some("GET")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://portal.example"
        );
        // Not preflights: routed as without CORS.
        for request in [
            options(None, None),
            options(Some("https://portal.example"), None),
        ] {
            let response = on.clone().oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        }
        // CORS off: a preflight is an OPTIONS like any other.
        let off = app(&[]);
        let response = off
            .oneshot(options(Some("https://portal.example"), Some("GET")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert!(
            !response
                .headers()
                .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
        );
    }
}
