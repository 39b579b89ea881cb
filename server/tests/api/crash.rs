//! Crash safety of pod migrations with a REAL server process: the binary is started with
//! `REBALANCER_FAULT=abort-after:<point>`, a decision is approved, the process aborts right
//! after that point of the pod migration, and a server started again on the same database
//! (without the fault) finishes the pod migration — with exactly one eviction of the pod in the
//! simulated backend's log.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;

use crate::process::{BINARY, Process};
use crate::support::{ADMIN_TOKEN, client_with_token, lifetime_profile, small_cluster};

/// Start the binary on `database`; wait until it is ready.
fn start(database: &Path, fault: Option<&str>) -> Process {
    start_env(database, fault, &[])
}

/// [`start`] with more environment variables (flags).
pub fn start_env(database: &Path, fault: Option<&str>, env: &[(&str, String)]) -> Process {
    let mut command = Command::new(BINARY);
    for (k, v) in env {
        command.env(k, v);
    }
    command
        .env("REBALANCER_DATABASE", database)
        .env("REBALANCER_NO_DEMO", "true")
        .env("REBALANCER_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("RUST_LOG", "info")
        .env_remove("REBALANCER_FAULT")
        .stdout(std::process::Stdio::null());
    if let Some(point) = fault {
        command.env("REBALANCER_FAULT", format!("abort-after:{point}"));
    }
    Process::start(command)
}

pub async fn call(base: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let client = client_with_token(ADMIN_TOKEN);
    let mut request = client.request(method, format!("{base}{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{path}: {status} {body:#}");
    body
}

/// Rows of the database, read directly (the server may be dead).
pub async fn query_one(database: &Path, sql: &str, uid: &str) -> (i64, String) {
    let url = format!("sqlite://{}", database.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let row: (i64, String) = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_string()))
        .bind(uid)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    row
}

async fn evictions_of(database: &Path, uid: &str) -> i64 {
    query_one(
        database,
        "SELECT COUNT(*), '' FROM simulated_events WHERE reason = 'Evicted' AND pod_uid = ?",
        uid,
    )
    .await
    .0
}

/// Store `profile` as `lifetime`, run it on `cluster`, approve the decision for pod `uid`
/// (the process may abort before answering: the approval is committed before the executor is
/// woken, so the pod migration exists either way; an answer that comes must be a success).
/// Returns the decision id.
pub async fn propose_and_approve(base: &str, cluster: &str, profile: Value, uid: &str) -> i64 {
    call(
        base,
        reqwest::Method::PUT,
        "/api/v1/profiles/lifetime",
        Some(profile),
    )
    .await;
    let run = call(
        base,
        reqwest::Method::POST,
        "/api/v1/runs",
        Some(json!({"cluster": cluster, "profile": "lifetime"})),
    )
    .await;
    let decisions = call(
        base,
        reqwest::Method::GET,
        &format!("/api/v1/decisions?run={}", run["id"]),
        None,
    )
    .await;
    let decision = decisions["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["pod"]["uid"] == uid)
        .unwrap_or_else(|| panic!("{uid} was not proposed: {decisions:#}"))["id"]
        .as_i64()
        .unwrap();
    let approve = client_with_token(ADMIN_TOKEN)
        .post(format!("{base}/api/v1/decisions/{decision}/approve"))
        .json(&json!({"comment": "crash test"}))
        .send()
        .await;
    if let Ok(response) = approve {
        let status = response.status();
        if let Ok(body) = response.json::<Value>().await {
            assert!(status.is_success(), "approve: {status} {body:#}");
        }
    }
    decision
}

/// Poll pod migration `id` (60 s) until it has finished; its last view.
pub async fn finished(base: &str, id: i64) -> Value {
    let mut last = Value::Null;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        last = call(
            base,
            reqwest::Method::GET,
            &format!("/api/v1/pod-migrations/{id}"),
            None,
        )
        .await;
        if matches!(
            last["phase"].as_str(),
            Some("Succeeded" | "Failed" | "Aborted")
        ) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

/// Approve web-1's decision under `fault`, let the process abort, check the step it stopped
/// at, restart, and check the pod migration completes with exactly one eviction.
async fn crash_and_resume(point: &str, expect_step: &str, evicted_at_crash: i64) {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("crash.db");
    let uid = "uid-shop-web-1";

    let mut first = start(&database, Some(point));
    let base = first.base.clone();
    call(
        &base,
        reqwest::Method::PUT,
        "/api/v1/clusters/east/snapshot",
        Some(small_cluster()),
    )
    .await;
    let decision = propose_and_approve(&base, "east", lifetime_profile(), uid).await;

    let status = first.wait_exit();
    assert!(
        !status.success(),
        "{point}: the process should have aborted: {status}"
    );
    let (migration, step) = query_one(
        &database,
        "SELECT id, step FROM pod_migrations WHERE pod_uid = ?",
        uid,
    )
    .await;
    assert_eq!(
        step, expect_step,
        "{point}: where the crash left the pod migration"
    );
    assert_eq!(
        evictions_of(&database, uid).await,
        evicted_at_crash,
        "{point}: evictions at the crash"
    );

    // Restart without the fault: it resumes and finishes.
    let second = start(&database, None);
    let last = finished(&second.base, migration).await;
    assert_eq!(last["phase"], "Succeeded", "{point}: {last:#}");
    assert_eq!(last["status"], "Complete", "{point}: {last:#}");
    assert_eq!(
        evictions_of(&database, uid).await,
        1,
        "{point}: evicted exactly once"
    );
    let decision = call(
        &second.base,
        reqwest::Method::GET,
        &format!("/api/v1/decisions/{decision}"),
        None,
    )
    .await;
    assert_eq!(decision["status"], "succeeded", "{point}: {decision:#}");
    // The replacement runs on the reservation's node.
    let target = last["targetNode"].as_str().unwrap();
    let pods = call(
        &second.base,
        reqwest::Method::GET,
        &format!("/api/v1/clusters/east/pods?node={target}"),
        None,
    )
    .await;
    let replacement = last["newPod"]["name"].as_str().unwrap();
    assert!(
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == replacement),
        "{point}: {pods:#}"
    );
    second.terminate();
}

#[tokio::test]
async fn crash_after_the_reservation_was_created() {
    crash_and_resume("ReservationCreated", "ReservationCreated", 0).await;
}

#[tokio::test]
async fn crash_after_evicting_was_persisted_before_the_eviction_call() {
    crash_and_resume("Evicting", "Evicting", 0).await;
}

#[tokio::test]
async fn crash_after_the_eviction_before_it_was_recorded() {
    crash_and_resume("EvictCalled", "Evicting", 1).await;
}

#[tokio::test]
async fn crash_before_complete() {
    crash_and_resume("BoundPodReady", "BoundPodReady", 1).await;
}
