//! What the server logs about requests: method and path, never the query string (clients put
//! tokens and other secrets there) nor the bearer token.

use std::process::{Command, Stdio};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::process::{BINARY, Process};
use crate::support::{ADMIN_TOKEN, client_with_token, shared_compile_cache};

const SECRET: &str = "s3cr3t-in-the-query-7f1e";

/// The real binary, logging everything at every level (the way an operator debugging it would
/// run it) — its own process, so the log is exactly what it writes, with no other test's
/// subscriber in the way. The compiler's own trace output is left out: it never sees a request.
#[tokio::test]
async fn query_strings_and_tokens_never_reach_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(BINARY);
    command
        .args(["serve", "--no-demo", "--database"])
        .arg(dir.path().join("logs.db"))
        .arg("--policy-cache-dir")
        .arg(shared_compile_cache())
        .env("REBALANCER_ADMIN_TOKEN", ADMIN_TOKEN)
        .env(
            "RUST_LOG",
            "trace,cranelift_codegen=info,cranelift_frontend=info,regalloc2=info,wasmtime=info,\
             wasmtime_cranelift=info,wasmtime_environ=info",
        )
        .stdout(Stdio::null());
    let server = Process::start(command);
    let viewer: Value = client_with_token(ADMIN_TOKEN)
        .post(server.url("/api/v1/tokens"))
        .json(&json!({"name": "dashboard", "role": "viewer"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let viewer = viewer["token"].as_str().expect("a token").to_string();
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
    let log = server.terminate();

    // The capture works: the request spans are there, with their paths.
    let spans: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["span"]["name"] == "request")
        .collect();
    for path in [
        "/api/v1/clusters",
        "/api/v1/runs",
        "/api/v1/audit",
        "/healthz",
    ] {
        assert!(
            spans.iter().any(|l| l["span"]["path"] == path),
            "no request span for {path} in the log:\n{log}"
        );
    }
    assert!(log.contains("request refused: insufficient role"), "{log}");
    for secret in [SECRET, ADMIN_TOKEN, viewer.as_str()] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(secret)).collect();
        assert!(lines.is_empty(), "{secret} is in the log: {lines:#?}");
    }
}
