//! Webhooks against a local receiver (an HTTP server on 127.0.0.1:0 that records every request
//! and answers as told): the admin API and its validation, the destination check, signatures
//! recomputed by the receiver, every event delivered once (runs, proposals batched per run,
//! approvals, rejections, supersessions, pod migration phases, a Kubernetes cluster's
//! connection lost and recovered), retries of a receiver that is down or failing, disabling and
//! enabling a hook, and a server process killed with deliveries pending.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use hmac::{Hmac, KeyInit, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, lifetime_profile, small_cluster};

const SECRET: &str = "receiver-secret-0123456789";

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub delivery: String,
    pub event: String,
    pub timestamp: i64,
    pub signature: String,
    pub body: Vec<u8>,
    pub json: Value,
    /// What the receiver answered.
    pub answered: u16,
}

/// An HTTP server recording every request; it answers with `status` (200 at first).
pub struct Receiver {
    pub port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    received: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
}

async fn record(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> AxumStatus {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let answered = shared.status.load(Ordering::SeqCst);
    shared.received.lock().unwrap().push(Received {
        delivery: header("rebalancer-delivery"),
        event: header("rebalancer-event"),
        timestamp: header("rebalancer-timestamp").parse().unwrap_or(-1),
        signature: header("rebalancer-signature"),
        json: serde_json::from_slice(&body).unwrap_or(Value::Null),
        body: body.to_vec(),
        answered,
    });
    assert_eq!(header("content-type"), "application/json");
    AxumStatus::from_u16(answered).unwrap()
}

impl Receiver {
    pub async fn start() -> Receiver {
        Receiver::start_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap())
    }

    /// A receiver on `port` (one that was down comes back).
    pub async fn start_on_port(port: u16) -> Receiver {
        Receiver::start_on(
            tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .unwrap(),
        )
    }

    fn start_on(listener: tokio::net::TcpListener) -> Receiver {
        let port = listener.local_addr().unwrap().port();
        let shared = Shared {
            received: Default::default(),
            status: Arc::new(AtomicU16::new(200)),
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(record))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver {
            port,
            received: shared.received,
            status: shared.status,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Wait (30 s) until `check` holds for what was received.
    pub async fn until(&self, what: &str, check: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let received = self.received();
            if check(&received) {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; received: {:#?}",
                received.iter().map(|r| &r.json).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port nothing listens on (bound, then closed).
pub async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// Check a request as a receiver must: the signature over `"<timestamp>.<body>"` with the
/// secret, a timestamp within 5 minutes, and the body's id and event matching the headers.
#[track_caller]
pub fn verify(r: &Received, secret: &str) {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{}.", r.timestamp).as_bytes());
    mac.update(&r.body);
    let expected = format!("v1={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(r.signature, expected, "signature of {:#}", r.json);
    let now = rebalancer_store::now_ms() / 1000;
    assert!((now - r.timestamp).abs() < 300, "timestamp {}", r.timestamp);
    assert_eq!(r.json["id"], r.delivery.as_str());
    assert_eq!(r.json["event"], r.event.as_str());
    assert!(r.json["occurredAt"].as_str().is_some(), "{:#}", r.json);
    assert!(r.json["webhookId"].is_i64(), "{:#}", r.json);
}

fn allow_private(s: &mut rebalancer_server::config::Settings) {
    s.demo = false;
    s.webhooks.allow_private_destinations = true;
    s.webhooks.retry_base = Duration::from_millis(100);
    s.webhooks.retry_max = Duration::from_millis(400);
    s.webhooks.timeout = Duration::from_secs(2);
}

async fn create(server: &TestServer, url: &str, events: Value) -> Value {
    let (status, hook) = server
        .post_json(
            "/api/v1/webhooks",
            &json!({"url": url, "events": events, "secret": SECRET, "description": "portal"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{hook:#}");
    hook
}

/// Poll a delivery (30 s) until `check` holds.
async fn delivery_until(
    server: &TestServer,
    hook: i64,
    id: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, d) = server
            .get(&format!("/api/v1/webhooks/{hook}/deliveries/{id}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{d:#}");
        if check(&d) {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {d:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn hooks_are_created_listed_tested_enabled_and_deleted() {
    let server = TestServer::start_with(allow_private).await;
    let receiver = Receiver::start().await;

    // Validation: every bad field named.
    let cases = [
        (
            json!({"url": "ftp://x.example/", "events": ["*"], "secret": SECRET}),
            "invalid_webhook",
            "url",
        ),
        (
            json!({"url": "not a url", "events": ["*"], "secret": SECRET}),
            "invalid_webhook",
            "url",
        ),
        (
            json!({"url": receiver.url(), "events": [], "secret": SECRET}),
            "invalid_webhook",
            "events",
        ),
        (
            json!({"url": receiver.url(), "events": ["run.finished", "run.finished"], "secret": SECRET}),
            "invalid_webhook",
            "events",
        ),
        (
            json!({"url": receiver.url(), "events": ["*", "run.finished"], "secret": SECRET}),
            "invalid_webhook",
            "events",
        ),
        (
            json!({"url": receiver.url(), "events": ["*"], "secret": "short"}),
            "invalid_webhook",
            "secret",
        ),
        (
            json!({"url": receiver.url(), "events": ["run.started"], "secret": SECRET}),
            "invalid_request",
            "events",
        ),
        (
            json!({"url": receiver.url(), "events": ["*"], "secret": SECRET, "extra": 1}),
            "invalid_request",
            "extra",
        ),
    ];
    for (body, code, field) in cases {
        let (status, error) = server.post_json("/api/v1/webhooks", &body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body:#} → {error:#}"
        );
        let message = assert_error(&error, code);
        assert!(message.contains(field), "{body:#}: {message}");
        if code == "invalid_webhook" {
            assert_eq!(error["details"]["errors"][0]["field"], field, "{error:#}");
        }
    }
    // Without a token's admin role: refused.
    let viewer = server.create_token("viewer", "viewer").await;
    let (status, _) = server
        .call(
            Some(&viewer),
            reqwest::Method::GET,
            "/api/v1/webhooks",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Create (a loopback destination: the server allows private destinations).
    let response = server
        .client
        .post(server.url("/api/v1/webhooks"))
        .json(&json!({"url": receiver.url(), "events": ["run.finished"], "secret": SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let location = response.headers()["location"].to_str().unwrap().to_string();
    let hook: Value = response.json().await.unwrap();
    let id = hook["id"].as_i64().unwrap();
    assert_eq!(location, format!("/api/v1/webhooks/{id}"));
    assert_eq!(hook["events"], json!(["run.finished"]));
    assert_eq!(hook["enabled"], true);
    assert_eq!(hook["consecutiveFailures"], 0);
    assert_eq!(hook["description"], "");
    assert!(
        hook.get("secret").is_none(),
        "the secret is never shown: {hook:#}"
    );
    let (_, list) = server.get("/api/v1/webhooks").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["id"], id);
    let (status, got) = server.get(&location).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["url"], receiver.url());
    assert!(got.get("secret").is_none());

    // A test delivery, signed, arrives once.
    let (status, queued) = server
        .post_json(&format!("{location}/test"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued:#}");
    assert_eq!(queued["event"], "webhook.test");
    assert_eq!(queued["status"], "pending");
    let delivery = queued["id"].as_str().unwrap().to_string();
    let received = receiver.until("the test delivery", |r| !r.is_empty()).await;
    verify(&received[0], SECRET);
    assert_eq!(received[0].delivery, delivery);
    assert_eq!(received[0].json["webhookId"], id);
    let done = delivery_until(&server, id, &delivery, "delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(done["attempts"], 1);
    assert_eq!(done["lastResponseStatus"], 200);
    assert_eq!(done["payload"]["id"], delivery.as_str());
    let (_, deliveries) = server.get(&format!("{location}/deliveries")).await;
    assert_eq!(deliveries["items"].as_array().unwrap().len(), 1);
    let (_, pending) = server
        .get(&format!("{location}/deliveries?status=pending"))
        .await;
    assert!(pending["items"].as_array().unwrap().is_empty());
    let (status, error) = server
        .get(&format!("{location}/deliveries?status=lost"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&error, "invalid_query");
    let (_, hook) = server.get(&location).await;
    assert_eq!(hook["lastStatus"], "delivered");
    assert!(hook["lastDeliveryAt"].is_string());

    // Enabling an enabled hook changes nothing; a missing one is 404.
    let (status, enabled) = server
        .post_json(&format!("{location}/enable"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(enabled["enabled"], true);
    let (status, _) = server
        .post_json("/api/v1/webhooks/999/enable", &json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Delete: gone, deliveries included.
    let (status, _) = server.delete(&location).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, error) = server.get(&location).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&error, "not_found");
    let (status, _) = server
        .get(&format!("{location}/deliveries/{delivery}"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, audit) = server.get("/api/v1/audit?kind=webhook").await;
    let actions: BTreeSet<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(
        actions.is_superset(&BTreeSet::from([
            "webhook.create",
            "webhook.delete",
            "webhook.enable"
        ])),
        "{audit:#}"
    );
}

#[tokio::test]
async fn private_destinations_are_refused_without_the_flag() {
    let server = TestServer::start().await;
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest",
        "http://100.64.0.1/",
        "http://[::1]/",
        "http://[::ffff:192.168.0.1]/",
        "http://[fd00::1]/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
    ] {
        let (status, error) = server
            .post_json(
                "/api/v1/webhooks",
                &json!({"url": url, "events": ["*"], "secret": SECRET}),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {error:#}");
        let message = assert_error(&error, "destination-not-allowed");
        assert!(
            message.contains("--webhook-allow-private-destinations"),
            "{message}"
        );
        assert_eq!(error["details"]["field"], "url");
    }
    let (_, list) = server.get("/api/v1/webhooks").await;
    assert!(list["items"].as_array().unwrap().is_empty());
}

/// The deliveries of `event` the receiver got, each verified, one per delivery id.
fn of(received: &[Received], event: &str) -> Vec<Value> {
    let mut seen = BTreeSet::new();
    received
        .iter()
        .filter(|r| r.event == event && r.answered == 200)
        .inspect(|r| verify(r, SECRET))
        .filter(|r| seen.insert(r.delivery.clone()))
        .map(|r| r.json["data"].clone())
        .collect()
}

#[tokio::test]
async fn every_event_is_delivered_once() {
    let server = TestServer::start_with(allow_private).await;
    let receiver = Receiver::start().await;
    create(&server, &receiver.url(), json!(["*"])).await;
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;

    // A run: run.finished, and its proposals in one decisions.proposed.
    let (status, run) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let decisions = decisions["items"].as_array().unwrap().clone();
    assert!(decisions.len() >= 3, "{decisions:#?}");
    let received = receiver
        .until("the run's events", |r| {
            !of(r, "run.finished").is_empty() && !of(r, "decisions.proposed").is_empty()
        })
        .await;
    let finished = of(&received, "run.finished");
    assert_eq!(finished.len(), 1, "{finished:#?}");
    assert_eq!(finished[0]["run"], run["id"]);
    assert_eq!(finished[0]["status"], "succeeded");
    assert_eq!(finished[0]["cluster"], "east");
    let proposed = of(&received, "decisions.proposed");
    assert_eq!(proposed.len(), 1, "one delivery per run: {proposed:#?}");
    assert_eq!(proposed[0]["run"], run["id"]);
    assert_eq!(proposed[0]["profile"], "lifetime");
    assert_eq!(proposed[0]["count"], decisions.len());
    let ids: BTreeSet<i64> = decisions
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect();
    let announced: BTreeSet<i64> = proposed[0]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect();
    assert_eq!(announced, ids);
    let web_1 = decisions
        .iter()
        .find(|d| d["pod"]["name"] == "web-1")
        .unwrap();
    let announced_web_1 = proposed[0]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == web_1["id"])
        .unwrap();
    assert_eq!(announced_web_1["namespace"], "shop");
    assert_eq!(announced_web_1["name"], "web-1");
    assert_eq!(announced_web_1["node"], "n1");

    // Approve one: decision.approved, then its pod migration's phases.
    let (status, body) = server
        .post_json(
            &format!("/api/v1/decisions/{}/approve", web_1["id"]),
            &json!({}),
        )
        .await;
    assert!(status.is_success(), "{body:#}");
    // Reject another: decision.rejected.
    let job = decisions
        .iter()
        .find(|d| d["pod"]["name"] != "web-1")
        .unwrap();
    let (status, body) = server
        .post_json(
            &format!("/api/v1/decisions/{}/reject", job["id"]),
            &json!({"comment": "not now"}),
        )
        .await;
    assert!(status.is_success(), "{body:#}");
    let received = receiver
        .until(
            "the approval, the rejection and the finished migration",
            |r| {
                !of(r, "decision.approved").is_empty()
                    && !of(r, "decision.rejected").is_empty()
                    && of(r, "migration.phase")
                        .iter()
                        .any(|m| m["phase"] == "Succeeded" || m["phase"] == "Failed")
            },
        )
        .await;
    let approved = of(&received, "decision.approved");
    assert_eq!(approved.len(), 1, "{approved:#?}");
    assert_eq!(approved[0]["ids"], json!([web_1["id"]]));
    assert_eq!(approved[0]["cluster"], "east");
    let rejected = of(&received, "decision.rejected");
    assert_eq!(rejected.len(), 1, "{rejected:#?}");
    assert_eq!(rejected[0]["ids"], json!([job["id"]]));
    let phases = of(&received, "migration.phase");
    let (_, migration) = server
        .get(&format!("/api/v1/pod-migrations?decision={}", web_1["id"]))
        .await;
    let migration = &migration["items"][0];
    let changes: Vec<(String, String)> = phases
        .iter()
        .map(|p| {
            assert_eq!(p["id"], migration["id"]);
            assert_eq!(p["decision"], web_1["id"]);
            (
                p["from"].as_str().unwrap().to_string(),
                p["phase"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // Each change once, each from the phase before it.
    assert_eq!(
        changes.first().map(|c| c.0.as_str()),
        Some("Pending"),
        "{changes:?}"
    );
    for pair in changes.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "{changes:?}");
    }
    assert_eq!(
        changes.last().map(|c| c.1.as_str()),
        migration["phase"].as_str(),
        "{changes:?}"
    );

    // A second run proposes the same pods again: the first run's remaining proposals are
    // superseded, in one delivery naming the new run.
    let (status, second) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{second:#}");
    let received = receiver
        .until("the supersession", |r| {
            !of(r, "decision.superseded").is_empty() && of(r, "run.finished").len() == 2
        })
        .await;
    let superseded = of(&received, "decision.superseded");
    assert_eq!(superseded.len(), 1, "{superseded:#?}");
    assert_eq!(superseded[0]["run"], second["id"]);
    let still_proposed: BTreeSet<i64> = decisions
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .filter(|id| *id != web_1["id"].as_i64().unwrap() && *id != job["id"].as_i64().unwrap())
        .collect();
    let superseded_ids: BTreeSet<i64> = superseded[0]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_i64().unwrap())
        .collect();
    assert_eq!(superseded_ids, still_proposed);
    assert_eq!(of(&received, "decisions.proposed").len(), 2);

    // Nothing arrived twice: every delivery id once (the receiver always answered 200).
    let mut by_id: BTreeMap<String, usize> = BTreeMap::new();
    for r in receiver.received() {
        *by_id.entry(r.delivery).or_default() += 1;
    }
    assert!(by_id.values().all(|n| *n == 1), "{by_id:?}");
}

#[tokio::test]
async fn a_hook_hears_only_its_events() {
    let server = TestServer::start_with(allow_private).await;
    let receiver = Receiver::start().await;
    create(&server, &receiver.url(), json!(["decision.rejected"])).await;
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (_, run) = server.run("east", "lifetime").await;
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let id = &decisions["items"][0]["id"];
    server
        .post_json(&format!("/api/v1/decisions/{id}/reject"), &json!({}))
        .await;
    let received = receiver.until("the rejection", |r| !r.is_empty()).await;
    // The run's events came first in the feed: had they been delivered, they would be here.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events: Vec<String> = receiver.received().into_iter().map(|r| r.event).collect();
    assert_eq!(events, ["decision.rejected"], "{received:#?}");
}

#[tokio::test]
async fn a_receiver_that_is_down_gets_the_same_delivery_when_it_is_back() {
    let server = TestServer::start_with(allow_private).await;
    // Down: nothing listens (connection refused).
    let port = closed_port().await;
    let url = format!("http://127.0.0.1:{port}/hook");
    let hook = create(&server, &url, json!(["*"])).await;
    let id = hook["id"].as_i64().unwrap();
    let (_, queued) = server
        .post_json(&format!("/api/v1/webhooks/{id}/test"), &json!({}))
        .await;
    let delivery = queued["id"].as_str().unwrap().to_string();
    let failing = delivery_until(&server, id, &delivery, "two failed attempts", |d| {
        d["attempts"].as_i64() >= Some(2)
    })
    .await;
    assert_eq!(failing["status"], "pending", "{failing:#}");
    assert!(failing["nextAttemptAt"].is_string());
    assert!(
        failing["lastError"].as_str().unwrap().contains("onnect"),
        "{failing:#}"
    );

    // Back, but failing: HTTP 500 is retried too.
    let receiver = Receiver::start_on_port(port).await;
    receiver.answer(500);
    receiver.until("a failed attempt", |r| !r.is_empty()).await;
    let answered = delivery_until(&server, id, &delivery, "the 500 recorded", |d| {
        d["lastResponseStatus"] == 500
    })
    .await;
    assert_eq!(answered["status"], "pending");
    assert_eq!(answered["lastError"], "the receiver answered HTTP 500");

    // Healthy: delivered, with the same delivery id on every attempt.
    receiver.answer(204);
    let done = delivery_until(&server, id, &delivery, "delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(done["lastResponseStatus"], 204);
    assert!(done.get("lastError").is_none(), "{done:#}");
    let received = receiver.received();
    assert!(received.len() >= 2, "{received:#?}");
    for r in &received {
        assert_eq!(r.delivery, delivery);
        verify(r, SECRET);
    }
    assert_eq!(received.last().unwrap().answered, 204);
    // Same body on every attempt; only the timestamp and signature change.
    assert!(received.iter().all(|r| r.body == received[0].body));
}

#[tokio::test]
async fn a_hook_is_disabled_after_failed_deliveries_and_enabled_again() {
    let server = TestServer::start_with(|s| {
        allow_private(s);
        s.webhooks.max_attempts = 2;
        s.webhooks.disable_after = 2;
    })
    .await;
    let receiver = Receiver::start().await;
    receiver.answer(500);
    let hook = create(&server, &receiver.url(), json!(["*"])).await;
    let id = hook["id"].as_i64().unwrap();
    let path = format!("/api/v1/webhooks/{id}");
    let mut failed = Vec::new();
    for _ in 0..2 {
        let (_, queued) = server.post_json(&format!("{path}/test"), &json!({})).await;
        let delivery = queued["id"].as_str().unwrap().to_string();
        let d = delivery_until(&server, id, &delivery, "failure", |d| {
            d["status"] == "failed"
        })
        .await;
        assert_eq!(d["attempts"], 2, "max attempts: {d:#}");
        failed.push(delivery);
    }
    let (_, disabled) = server.get(&path).await;
    assert_eq!(disabled["enabled"], false, "{disabled:#}");
    assert_eq!(disabled["consecutiveFailures"], 2);
    assert_eq!(disabled["lastStatus"], "failed");
    assert!(
        disabled["disabledReason"]
            .as_str()
            .unwrap()
            .contains("HTTP 500"),
        "{disabled:#}"
    );
    // While disabled, a test delivery waits.
    let (_, queued) = server.post_json(&format!("{path}/test"), &json!({})).await;
    let waiting = queued["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (_, d) = server.get(&format!("{path}/deliveries/{waiting}")).await;
    assert_eq!(
        (d["status"].as_str(), d["attempts"].as_i64()),
        (Some("pending"), Some(0))
    );
    let (_, failures) = server
        .get(&format!("{path}/deliveries?status=failed&limit=1"))
        .await;
    assert_eq!(failures["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        failures["items"][0]["id"],
        failed[1].as_str(),
        "newest first"
    );
    let (_, rest) = server
        .get(&format!(
            "{path}/deliveries?status=failed&limit=1&cursor={}",
            failures["next"].as_str().unwrap()
        ))
        .await;
    assert_eq!(rest["items"][0]["id"], failed[0].as_str());
    assert!(rest.get("next").is_none(), "{rest:#}");

    // Enabled again (the receiver healthy): the count starts over, the waiting one goes.
    receiver.answer(200);
    let (status, enabled) = server
        .post_json(&format!("{path}/enable"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(enabled["enabled"], true);
    assert_eq!(enabled["consecutiveFailures"], 0);
    assert!(enabled.get("disabledReason").is_none(), "{enabled:#}");
    delivery_until(&server, id, &waiting, "delivered after enabling", |d| {
        d["status"] == "delivered"
    })
    .await;
}

#[tokio::test]
async fn a_clusters_lost_and_recovered_connection_is_delivered_once_each() {
    use crate::kube::{EAST, cluster, managing, wait_synced};
    let cluster = cluster(&[]).await;
    let managed = managing(&cluster, "server-a");
    let server = TestServer::start_with(move |s| {
        managed(s);
        allow_private(s);
    })
    .await;
    let receiver = Receiver::start().await;
    create(
        &server,
        &receiver.url(),
        json!(["cluster.disconnected", "cluster.reconnected"]),
    )
    .await;
    wait_synced(&server).await;
    cluster.fake.set_down(true);
    let received = receiver
        .until("the loss", |r| !of(r, "cluster.disconnected").is_empty())
        .await;
    let lost = of(&received, "cluster.disconnected");
    assert_eq!(lost[0]["cluster"], EAST);
    assert!(lost[0]["message"].is_string(), "{lost:#?}");
    cluster.fake.set_down(false);
    receiver
        .until("the recovery", |r| !of(r, "cluster.reconnected").is_empty())
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = receiver.received();
    assert_eq!(of(&received, "cluster.disconnected").len(), 1, "one loss");
    assert_eq!(
        of(&received, "cluster.reconnected").len(),
        1,
        "one recovery"
    );
    assert_eq!(of(&received, "cluster.reconnected")[0]["cluster"], EAST);
}

/// A real server process killed (SIGKILL) with deliveries pending — every one attempted and
/// refused (503) at least once, some perhaps in the middle of an attempt — and started again:
/// every delivery arrives, none is lost or invented, and each arrives again with the same
/// delivery id.
#[tokio::test]
async fn a_server_killed_with_deliveries_pending_delivers_them_all_after_a_restart() {
    use crate::crash::{call, start_env};
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("rebalancer.db");
    let env = [
        (
            "REBALANCER_WEBHOOK_ALLOW_PRIVATE_DESTINATIONS",
            "true".to_string(),
        ),
        ("REBALANCER_WEBHOOK_RETRY_BASE", "200ms".to_string()),
        ("REBALANCER_WEBHOOK_RETRY_MAX", "1s".to_string()),
        ("REBALANCER_WEBHOOK_TIMEOUT", "1s".to_string()),
        ("REBALANCER_WEBHOOK_MAX_ATTEMPTS", "1000".to_string()),
    ];
    let receiver = Receiver::start().await;
    receiver.answer(503);
    let process = start_env(&database, None, &env);
    let base = process.base.clone();
    let hook = call(
        &base,
        reqwest::Method::POST,
        "/api/v1/webhooks",
        Some(json!({"url": receiver.url(), "events": ["*"], "secret": SECRET})),
    )
    .await;
    let id = hook["id"].as_i64().unwrap();
    let mut queued = BTreeSet::new();
    for _ in 0..5 {
        let d = call(
            &base,
            reqwest::Method::POST,
            &format!("/api/v1/webhooks/{id}/test"),
            None,
        )
        .await;
        queued.insert(d["id"].as_str().unwrap().to_string());
    }
    // Events of the change feed too: a run's.
    call(
        &base,
        reqwest::Method::PUT,
        "/api/v1/clusters/east/snapshot",
        Some(small_cluster()),
    )
    .await;
    call(
        &base,
        reqwest::Method::PUT,
        "/api/v1/profiles/lifetime",
        Some(lifetime_profile()),
    )
    .await;
    call(
        &base,
        reqwest::Method::POST,
        "/api/v1/runs",
        Some(json!({"cluster": "east", "profile": "lifetime"})),
    )
    .await;
    // Every test delivery and the run's deliveries attempted (and refused with 503) at least
    // once before the kill.
    let refused = receiver
        .until("an attempt of every test delivery and of the run's", |r| {
            let seen: BTreeSet<&String> = r.iter().map(|r| &r.delivery).collect();
            queued.iter().all(|q| seen.contains(q))
                && r.iter().any(|r| r.event == "run.finished")
                && r.iter().any(|r| r.event == "decisions.proposed")
        })
        .await;
    for r in &refused {
        verify(r, SECRET);
    }
    // Dropping the process kills it with SIGKILL: no shutdown, nothing released.
    drop(process);

    // The server is dead: what the database holds is what must arrive.
    let url = format!("sqlite://{}", database.display());
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let stored: Vec<(String, String)> =
        sqlx::query_as("SELECT id, status FROM webhook_deliveries ORDER BY seq")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    drop(conn);
    let all: BTreeSet<String> = stored.iter().map(|(id, _)| id.clone()).collect();
    assert!(all.is_superset(&queued), "{stored:?}");
    assert!(
        stored.iter().all(|(_, status)| status == "pending"),
        "nothing could be delivered before the kill: {stored:?}"
    );
    assert!(
        stored.len() > queued.len(),
        "the run's events were dispatched too: {stored:?}"
    );

    receiver.answer(200);
    let restarted = start_env(&database, None, &env);
    let received = receiver
        .until("every stored delivery", |r| {
            let ok: BTreeSet<&String> = r
                .iter()
                .filter(|r| r.answered == 200)
                .map(|r| &r.delivery)
                .collect();
            all.iter().all(|id| ok.contains(id))
        })
        .await;
    // Nothing new was invented, and each test delivery came again with its own id.
    let ids: BTreeSet<String> = received.iter().map(|r| r.delivery.clone()).collect();
    assert_eq!(ids, all);
    for q in &queued {
        let answers: Vec<u16> = received
            .iter()
            .filter(|r| &r.delivery == q)
            .map(|r| r.answered)
            .collect();
        assert!(answers.len() >= 2 && answers.contains(&503) && answers.ends_with(&[200]));
    }
    for r in &received {
        verify(r, SECRET);
    }
    let listed = call(
        &restarted.base,
        reqwest::Method::GET,
        &format!("/api/v1/webhooks/{id}/deliveries?status=delivered&limit=1000"),
        None,
    )
    .await;
    assert_eq!(listed["items"].as_array().unwrap().len(), all.len());
}
