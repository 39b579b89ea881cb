//! CORS (`--cors-allow-origin`): a portal on another origin calls the API from a browser. The
//! requests are the ones a browser makes: a preflight without a token, then the actual request
//! with it; from an allowed origin and from another one; and with CORS off.

use reqwest::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, ORIGIN, VARY,
};
use reqwest::{Method, Response, StatusCode};
use serde_json::json;

use crate::support::{ADMIN_TOKEN, TestServer};

const PORTAL: &str = "https://portal.example.com";
const ELSEWHERE: &str = "https://evil.example.net";

async fn with_cors() -> TestServer {
    TestServer::start_with(|settings| {
        settings.demo = false;
        // As `--cors-allow-origin` leaves them: checked and normalized.
        settings.cors_allow_origins = vec![PORTAL.into(), "http://localhost:3000".into()];
    })
    .await
}

/// A browser's preflight of `method path` with the Authorization and Content-Type headers.
async fn preflight(server: &TestServer, origin: &str, method: &str, path: &str) -> Response {
    reqwest::Client::new()
        .request(Method::OPTIONS, server.url(path))
        .header(ORIGIN, origin)
        .header(ACCESS_CONTROL_REQUEST_METHOD, method)
        .header(ACCESS_CONTROL_REQUEST_HEADERS, "authorization,content-type")
        .send()
        .await
        .unwrap()
}

/// The page at `origin` lists clusters with the admin token.
async fn list_clusters_from(server: &TestServer, origin: &str) -> Response {
    server
        .client
        .get(server.url("/api/v1/clusters"))
        .header(ORIGIN, origin)
        .send()
        .await
        .unwrap()
}

fn header<'a>(response: &'a Response, name: &reqwest::header::HeaderName) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

/// A header's comma-separated values, lower case.
fn values(response: &Response, name: &reqwest::header::HeaderName) -> Vec<String> {
    response
        .headers()
        .get_all(name)
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .collect()
}

#[tokio::test]
async fn a_portal_on_an_allowed_origin_preflights_without_a_token_then_calls_with_one() {
    let server = with_cors().await;
    for (method, path) in [
        ("GET", "/api/v1/clusters"),
        ("POST", "/api/v1/runs"),
        ("PUT", "/api/v1/profiles/mine"),
        ("DELETE", "/api/v1/tokens/1"),
        ("POST", "/api/v1/decisions/1/approve"),
    ] {
        let response = preflight(&server, PORTAL, method, path).await;
        assert_eq!(response.status(), StatusCode::OK, "{method} {path}");
        assert_eq!(
            header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN),
            Some(PORTAL)
        );
        let methods = values(&response, &ACCESS_CONTROL_ALLOW_METHODS);
        assert!(
            methods.contains(&method.to_ascii_lowercase()),
            "{methods:?}"
        );
        let headers = values(&response, &ACCESS_CONTROL_ALLOW_HEADERS);
        assert!(
            headers.contains(&"authorization".into()) && headers.contains(&"content-type".into()),
            "{headers:?}"
        );
        assert_eq!(header(&response, &ACCESS_CONTROL_MAX_AGE), Some("600"));
        assert!(values(&response, &VARY).contains(&"origin".into()));
        // No cookies: the token is a header the page sets.
        assert!(
            !response
                .headers()
                .contains_key("access-control-allow-credentials")
        );
    }
    // The second origin is allowed too, and only as configured.
    let response = preflight(&server, "http://localhost:3000", "GET", "/api/v1/clusters").await;
    assert_eq!(
        header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN),
        Some("http://localhost:3000")
    );

    // The actual requests: the answer names the origin, so the browser hands it to the page.
    let (status, _) = server
        .send(
            server
                .client
                .post(server.url("/api/v1/tokens"))
                .header(ORIGIN, PORTAL)
                .json(&json!({"name": "portal", "role": "viewer"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let response = list_clusters_from(&server, PORTAL).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN),
        Some(PORTAL)
    );
    assert!(values(&response, &VARY).contains(&"origin".into()));

    // Without a token: still 401 (CORS authorizes nothing), readable by the page with its
    // WWW-Authenticate.
    let response = reqwest::Client::new()
        .get(server.url("/api/v1/clusters"))
        .header(ORIGIN, PORTAL)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN),
        Some(PORTAL)
    );
    let exposed = values(&response, &ACCESS_CONTROL_EXPOSE_HEADERS);
    assert!(
        exposed.contains(&"www-authenticate".into()) && exposed.contains(&"retry-after".into()),
        "{exposed:?}"
    );
    assert!(response.headers().contains_key("www-authenticate"));
}

#[tokio::test]
async fn another_origin_gets_no_cors_headers() {
    let server = with_cors().await;
    let response = preflight(&server, ELSEWHERE, "POST", "/api/v1/runs").await;
    assert_eq!(header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN), None);
    // Nor does a near miss: origins match exactly (scheme, host and port).
    for near in [
        "http://portal.example.com",
        "https://portal.example.com:8443",
        "https://sub.portal.example.com",
    ] {
        let response = preflight(&server, near, "GET", "/api/v1/clusters").await;
        assert_eq!(
            header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN),
            None,
            "{near}"
        );
    }
    // The actual request is answered (a browser, not the server, withholds it from the page),
    // without the header that would let the page read it.
    let response = list_clusters_from(&server, ELSEWHERE).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN), None);
}

#[tokio::test]
async fn without_configured_origins_cors_is_off() {
    let server = TestServer::start().await;
    assert!(server.state().settings.cors_allow_origins.is_empty());
    let response = preflight(&server, PORTAL, "GET", "/api/v1/clusters").await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN), None);
    let response = list_clusters_from(&server, PORTAL).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, &ACCESS_CONTROL_ALLOW_ORIGIN), None);
}

#[tokio::test]
async fn with_cors_on_an_options_request_that_is_no_preflight_is_routed_as_before() {
    let server = with_cors().await;
    for token in [None, Some(ADMIN_TOKEN)] {
        let (status, _) = server
            .call(token, Method::OPTIONS, "/api/v1/clusters", None)
            .await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    }
    let (status, _) = server
        .call(None, Method::OPTIONS, "/api/v1/no-such-thing", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
