//! What the server logs about requests: method and path, never the query string (clients put
//! tokens and other secrets there) nor the bearer token.

use std::io::Write;
use std::sync::{Arc, Mutex};

use reqwest::{Method, StatusCode};
use tracing_subscriber::fmt::format::FmtSpan;

use crate::support::{ADMIN_TOKEN, TestServer, client_with_token};

/// Where the test's subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

const SECRET: &str = "s3cr3t-in-the-query-7f1e";

// The default (current-thread) runtime: the server's tasks run on this thread, under the
// subscriber set here for this test alone.
#[tokio::test]
async fn query_strings_and_tokens_never_reach_the_log() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        // Everything the server side says, at every level; the test's own HTTP client is not
        // the server.
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "trace,reqwest=off,hyper_util::client=off",
        ))
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = TestServer::start().await;
    let viewer = server.create_token("dashboard", "viewer").await;
    let admin = client_with_token(ADMIN_TOKEN);
    let anonymous = reqwest::Client::new();
    let calls: [(&reqwest::Client, Method, String, StatusCode); 10] = [
        (
            &admin,
            Method::GET,
            format!("/api/v1/clusters?token={SECRET}"),
            StatusCode::OK,
        ),
        (
            &admin,
            Method::GET,
            format!("/api/v1/runs?limit={SECRET}"),
            StatusCode::BAD_REQUEST,
        ),
        (
            &admin,
            Method::GET,
            format!("/api/v1/decisions?status={SECRET}"),
            StatusCode::BAD_REQUEST,
        ),
        (
            &admin,
            Method::PUT,
            format!("/api/v1/clusters/east/snapshot?observedAt={SECRET}"),
            StatusCode::BAD_REQUEST,
        ),
        (
            &anonymous,
            Method::GET,
            format!("/api/v1/clusters?access_token={SECRET}"),
            StatusCode::UNAUTHORIZED,
        ),
        (
            &client_with_token(&viewer),
            Method::GET,
            format!("/api/v1/tokens?token={SECRET}"),
            StatusCode::FORBIDDEN,
        ),
        (
            &admin,
            Method::GET,
            format!("/api/v1/nothing?token={SECRET}"),
            StatusCode::NOT_FOUND,
        ),
        (
            &admin,
            Method::DELETE,
            format!("/api/v1/audit?token={SECRET}"),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            &anonymous,
            Method::GET,
            format!("/healthz?token={SECRET}"),
            StatusCode::OK,
        ),
        (
            &client_with_token(SECRET),
            Method::GET,
            format!("/api/v1/clusters?{SECRET}"),
            StatusCode::UNAUTHORIZED,
        ),
    ];
    for (client, method, path, expected) in calls {
        let response = client
            .request(method.clone(), server.url(&path))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), expected, "{method} {path}");
    }
    drop(server);

    let log = captured.text();
    // The capture works: the request spans are there, with their paths.
    for path in [
        "/api/v1/clusters",
        "/api/v1/runs",
        "/api/v1/audit",
        "/healthz",
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains("request{") && l.contains(path)),
            "no request span for {path} in the log:\n{log}"
        );
    }
    assert!(log.contains("request refused: insufficient role"), "{log}");
    for secret in [SECRET, ADMIN_TOKEN, viewer.as_str()] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(secret)).collect();
        assert!(lines.is_empty(), "{secret} is in the log: {lines:#?}");
    }
}
