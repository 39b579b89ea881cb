//! Read timeouts: a client that sends its request head or body slowly, or not at all, is cut off
//! (`--header-read-timeout`, `--body-idle-timeout`) and the server goes on serving the others.
//! The timeouts are tiny here; the tests wait for the close with a generous bound and never
//! check how long anything took.

use std::time::Duration;

use rebalancer_server::config::Settings;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::{ADMIN_TOKEN, TestServer, until_closed};

fn tiny_timeouts(settings: &mut Settings) {
    settings.demo = false;
    settings.header_read_timeout = Duration::from_millis(200);
    settings.body_idle_timeout = Duration::from_millis(200);
}

/// An admin client that opens a connection per request: the server closes idle kept-alive
/// connections after the (tiny) head timeout, and a pooled client could pick one at that
/// moment.
fn unpooled_admin() -> reqwest::Client {
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {ADMIN_TOKEN}")).unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

async fn connect(server: &TestServer) -> TcpStream {
    let addr = server.base.trim_start_matches("http://");
    TcpStream::connect(addr).await.expect("a connection")
}

async fn still_serves(server: &TestServer) {
    let response = unpooled_admin()
        .get(server.url("/api/v1/clusters"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_request_head_that_does_not_arrive_in_time_closes_the_connection() {
    let server = TestServer::start_with(tiny_timeouts).await;

    // Connected, silent.
    let mut silent = connect(&server).await;
    let answer = String::from_utf8_lossy(&until_closed(&mut silent).await).into_owned();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    // Half a head, then nothing (one byte every few seconds would end the same way).
    let mut partial = connect(&server).await;
    partial
        .write_all(b"GET /api/v1/clusters HTTP/1.1\r\nHost: rebalancer\r\nAuthoriz")
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&until_closed(&mut partial).await).into_owned();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    // A kept-alive connection: answered, then closed when no next request comes.
    let mut kept = connect(&server).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: rebalancer\r\n\r\n")
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&until_closed(&mut kept).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains("\"status\":\"ok\""), "{answer}");

    still_serves(&server).await;
}

#[tokio::test]
async fn a_request_body_that_stalls_is_answered_408_and_the_connection_closed() {
    let server = TestServer::start_with(tiny_timeouts).await;
    // One route per way a handler reads its body: streamed under the snapshot limit, whole as
    // bytes, whole as JSON.
    for (method, path, start) in [
        (
            "PUT",
            "/api/v1/clusters/east/snapshot",
            "{\"kind\": \"List\", \"items\": [",
        ),
        (
            "PUT",
            "/api/v1/profiles/slow",
            "apiVersion: descheduler/v1alpha2\n",
        ),
        ("POST", "/api/v1/runs", "{\"cluster\": \"east\""),
    ] {
        let mut stream = connect(&server).await;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: rebalancer\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{start}"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let answer = String::from_utf8_lossy(&until_closed(&mut stream).await).into_owned();
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "{method} {path}: {answer}"
        );
        let body: Value = serde_json::from_str(
            answer
                .split_once("\r\n\r\n")
                .map(|(_, body)| body)
                .unwrap_or_default(),
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}: {answer}"));
        assert_eq!(body["code"], "body_timeout", "{body:#}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("--body-idle-timeout"), "{message}");
    }

    // Nothing was half-stored, and the server goes on.
    let client = unpooled_admin();
    let clusters: Value = client
        .get(server.url("/api/v1/clusters"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(clusters["items"], serde_json::json!([]), "{clusters:#}");
    let profile = client
        .get(server.url("/api/v1/profiles/slow"))
        .send()
        .await
        .unwrap();
    assert_eq!(profile.status(), StatusCode::NOT_FOUND);
    still_serves(&server).await;
}
