//! Triggers: dry runs on demand, periodic schedules, debounced runs after a cluster change, and
//! schedules that pick up where they left off after a restart.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, small_cluster};

/// Runs a schedule started, oldest first.
async fn runs_of(server: &TestServer, schedule: i64) -> Vec<Value> {
    let (status, runs) = server.get("/api/v1/runs?limit=1000").await;
    assert_eq!(status, StatusCode::OK);
    let mut runs: Vec<Value> = runs["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["schedule"] == schedule)
        .cloned()
        .collect();
    runs.reverse();
    runs
}

/// Wait until `schedule` has started at least `count` runs that finished.
async fn wait_for_runs(server: &TestServer, schedule: i64, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = runs_of(server, schedule).await;
        if runs.iter().filter(|r| r["status"] != "running").count() >= count {
            return runs;
        }
        assert!(
            Instant::now() < deadline,
            "schedule {schedule} started {} run(s), waiting for {count}",
            runs.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_schedule(server: &TestServer, body: Value) -> Value {
    let (status, schedule) = server.post_json("/api/v1/schedules", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{schedule:#}");
    schedule
}

#[tokio::test]
async fn a_dry_run_is_recorded_as_such() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    let (status, dry) = server
        .post_json(
            "/api/v1/runs",
            &json!({"cluster": "east", "profile": "default", "dryRun": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{dry:#}");
    assert_eq!(dry["dryRun"], true);
    assert_eq!(dry["trigger"], "manual");
    assert_eq!(dry["schedule"], Value::Null);
    let (_, stored) = server.get(&format!("/api/v1/runs/{}", dry["id"])).await;
    assert_eq!(stored["dryRun"], true);
    let dry_run: bool = sqlx::query_scalar("SELECT dry_run FROM runs WHERE id = ?")
        .bind(dry["id"].as_i64().unwrap())
        .fetch_one(server.state().store.pool())
        .await
        .unwrap();
    assert!(dry_run, "the decision lifecycle reads runs.dry_run");

    let (status, real) = server.run("east", "default").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(real["dryRun"], false);

    let (status, body) = server
        .post_json(
            "/api/v1/runs",
            &json!({"cluster": "east", "profile": "default", "dry_run": true}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert!(assert_error(&body, "invalid_request").contains("dry_run"));
}

#[tokio::test]
async fn a_periodic_schedule_runs_every_interval_until_disabled() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    let schedule = create_schedule(
        &server,
        json!({"cluster": "east", "profile": "default", "intervalSeconds": 1, "dryRun": true}),
    )
    .await;
    assert_eq!(schedule["enabled"], true);
    assert_eq!(schedule["onChange"], false);
    assert_eq!(schedule["debounceSeconds"], 30);
    let id = schedule["id"].as_i64().unwrap();

    let runs = wait_for_runs(&server, id, 2).await;
    for run in &runs[..2] {
        assert_eq!(run["trigger"], "schedule", "{run:#}");
        assert_eq!(run["dryRun"], true);
        assert_eq!(run["status"], "succeeded", "{run:#}");
        assert_eq!(run["profile"], "default");
    }
    let (_, shown) = server.get(&format!("/api/v1/schedules/{id}")).await;
    assert!(shown["lastRun"].is_i64(), "{shown:#}");
    assert!(shown["lastTriggeredAt"].is_string());
    assert_eq!(shown["lastError"], Value::Null);

    // Paused: no new runs.
    let (status, paused) = server
        .put_json(
            &format!("/api/v1/schedules/{id}"),
            &json!({"cluster": "east", "profile": "default", "intervalSeconds": 1, "enabled": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{paused:#}");
    assert_eq!(paused["enabled"], false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = runs_of(&server, id).await.len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(runs_of(&server, id).await.len(), before);

    let (status, _) = server.delete(&format!("/api/v1/schedules/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = server.get(&format!("/api/v1/schedules/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(runs_of(&server, id).await.len(), before, "history is kept");
}

#[tokio::test]
async fn a_change_triggered_schedule_runs_once_after_a_burst_of_pushes() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    let schedule = create_schedule(
        &server,
        json!({"cluster": "east", "profile": "default", "onChange": true, "debounceSeconds": 2}),
    )
    .await;
    let id = schedule["id"].as_i64().unwrap();
    // Creating it is not a change.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(runs_of(&server, id).await.is_empty());

    server.push("east", &small_cluster()).await;
    let last = server.push("east", &small_cluster()).await;
    let runs = wait_for_runs(&server, id, 1).await;
    // Quiet for longer than the debounce: still one run.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let runs_after = runs_of(&server, id).await;
    assert_eq!(runs_after.len(), 1, "{runs_after:#?}");
    let run = &runs[0];
    assert_eq!(run["trigger"], "change");
    assert_eq!(run["dryRun"], false);
    assert_eq!(
        run["clusterRevision"], last["revision"],
        "the run evaluated the latest state"
    );
}

#[tokio::test]
async fn schedules_resume_from_the_database_after_a_restart() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    // Periodic, long interval: runs once now, and not again just because the server restarts.
    let periodic = create_schedule(
        &server,
        json!({"cluster": "east", "profile": "default", "intervalSeconds": 3600}),
    )
    .await;
    let periodic = periodic["id"].as_i64().unwrap();
    wait_for_runs(&server, periodic, 1).await;
    // On change, with a change pending when the server stops.
    let on_change = create_schedule(
        &server,
        json!({"cluster": "east", "profile": "default", "onChange": true, "debounceSeconds": 2}),
    )
    .await;
    let on_change = on_change["id"].as_i64().unwrap();
    server.push("east", &small_cluster()).await;
    let server = server.restart().await;

    let runs = wait_for_runs(&server, on_change, 1).await;
    assert_eq!(runs[0]["trigger"], "change");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(runs_of(&server, periodic).await.len(), 1);
    assert_eq!(runs_of(&server, on_change).await.len(), 1);
}

#[tokio::test]
async fn schedules_are_validated() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    for (body, status, code) in [
        (
            json!({"cluster": "east", "profile": "default"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
        ),
        (
            json!({"cluster": "east", "profile": "default", "intervalSeconds": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
        ),
        (
            json!({"cluster": "east", "profile": "default", "onChange": true, "debounceSeconds": -1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
        ),
        (
            json!({"cluster": "west", "profile": "default", "intervalSeconds": 60}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            json!({"cluster": "east", "profile": "nope", "intervalSeconds": 60}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            json!({"cluster": "east", "profile": "default", "every": 60}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
    ] {
        let (got, answer) = server.post_json("/api/v1/schedules", &body).await;
        assert_eq!(got, status, "{body}: {answer:#}");
        assert_error(&answer, code);
    }
    let (_, list) = server.get("/api/v1/schedules").await;
    assert_eq!(list["items"], json!([]));
}
