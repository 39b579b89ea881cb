//! Bounded history over HTTP: `DELETE /api/v1/profiles/{name}` and what it takes with it, the
//! pruning task on real runs (and what `GET /runs/{id}` then says), and pruning in batches while
//! the API keeps answering writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::lifetime_profile;
use crate::support::{TestServer, assert_error, metric_sum, metric_value, small_cluster};

async fn approve(server: &TestServer, decision: &Value) -> i64 {
    let (status, body) = server
        .post_json(
            &format!("/api/v1/decisions/{}/approve", decision["id"]),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    body["podMigration"].as_i64().unwrap()
}

/// Poll `path` until `done` holds (30 s at most).
async fn wait_until(server: &TestServer, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let (status, body) = server.get(path).await;
        if status == StatusCode::OK && done(&body) {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} never got there: {last:#}");
}

fn by_pod<'a>(decisions: &'a [Value], name: &str) -> &'a Value {
    decisions
        .iter()
        .find(|d| d["pod"]["name"] == name)
        .unwrap_or_else(|| panic!("no decision for {name}"))
}

#[tokio::test]
async fn deleting_a_profile_takes_its_rules_state_schedules_and_open_proposals() {
    let server = TestServer::start().await;
    // `lifetime` with a cooldown, so its run leaves policy state on the cluster.
    let mut document = lifetime_profile();
    document["profiles"][0]["pluginConfig"][1]["args"] = json!({"cooldown": "1h"});
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &document).await;
    let (status, run) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, list) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let decisions = list["items"].as_array().unwrap().clone();
    assert!(decisions.len() >= 4, "{list:#}");
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/lifetime/auto-approve",
            &json!({"rules": [{"name": "nothing", "namespaces": ["nowhere"]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let (status, schedule) = server
        .post_json(
            "/api/v1/schedules",
            &json!({"cluster": "east", "profile": "lifetime", "intervalSeconds": 3600,
                    "enabled": false}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{schedule:#}");

    // web-1 moves; web-2 then waits for the workload's eviction budget: in flight.
    let done = approve(&server, by_pod(&decisions, "web-1")).await;
    wait_until(&server, &format!("/api/v1/pod-migrations/{done}"), |m| {
        m["phase"] == "Succeeded"
    })
    .await;
    let waiting = approve(&server, by_pod(&decisions, "web-2")).await;
    let (status, body) = server.delete("/api/v1/profiles/lifetime").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body:#}");
    assert_error(&body, "pod_migrations_in_flight");
    assert_eq!(body["details"]["podMigrations"], json!([waiting]));
    server
        .get("/api/v1/profiles/lifetime")
        .await
        .0
        .is_success()
        .then_some(())
        .expect("refused: the profile stays");

    let (status, body) = server
        .post_json(
            &format!("/api/v1/pod-migrations/{waiting}/abort"),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let (status, deleted) = server.delete("/api/v1/profiles/lifetime").await;
    assert_eq!(status, StatusCode::OK, "{deleted:#}");
    let open = decisions.len() - 2;
    assert_eq!(
        deleted,
        json!({
            "name": "lifetime",
            "schedulesDeleted": [schedule["id"]],
            "policyStateScopes": 1,
            "autoApproveRules": true,
            "decisionsExpired": open,
        })
    );
    for path in [
        "/api/v1/profiles/lifetime".to_string(),
        "/api/v1/profiles/lifetime/auto-approve".to_string(),
        format!("/api/v1/schedules/{}", schedule["id"]),
    ] {
        let (status, body) = server.get(&path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body:#}");
    }
    // History stays: the run, the moved and the aborted decisions; the open ones expired.
    let (status, _) = server.get(&format!("/api/v1/runs/{}", run["id"])).await;
    assert_eq!(status, StatusCode::OK);
    let (_, after) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    for d in after["items"].as_array().unwrap() {
        let expected = match d["pod"]["name"].as_str().unwrap() {
            "web-1" => "succeeded",
            "web-2" => "failed",
            _ => "expired",
        };
        assert_eq!(d["status"], expected, "{d:#}");
        if expected == "expired" {
            assert_eq!(
                d["statusReason"],
                "expired: profile \"lifetime\" was deleted"
            );
        }
    }
    // Recreated, it starts afresh: no cooldown remembered (which would hold back every pod
    // proposed before), so the pods are proposed again (web-1 is gone).
    server.put_profile("lifetime", &document).await;
    let (_, again) = server.run("east", "lifetime").await;
    assert!(
        again["proposals"].as_u64().unwrap() >= decisions.len() as u64 - 1,
        "{again:#}"
    );

    let (_, log) = server.get("/api/v1/audit?action=profile.delete").await;
    let entries = log["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{log:#}");
    assert_eq!(
        entries[0]["object"],
        json!({"kind": "profile", "id": "lifetime"})
    );
    assert_eq!(entries[0]["detail"], deleted);

    let (status, body) = server.delete("/api/v1/profiles/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
    assert_error(&body, "not_found");
    let (status, body) = server.delete("/api/v1/profiles/default").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body:#}");
    assert_error(&body, "default_profile");
    let approver = server.create_token("alice", "approver").await;
    let (status, _) = server
        .call(
            Some(&approver),
            Method::DELETE,
            "/api/v1/profiles/lifetime",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn expired_proposals_are_pruned_the_run_says_how_many_and_dry_runs_keep_theirs() {
    let server = TestServer::start_with(|s| {
        s.demo = false;
        // Proposals expire within seconds; normal runs' go right after, dry runs' are kept.
        s.proposal_ttl_ms = 1500;
        s.retention.proposals = Some(Duration::from_millis(1));
        s.retention.dry_runs = None;
        s.retention.interval = Duration::from_millis(200);
    })
    .await;
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (status, run) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, listed) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let decisions = listed["items"].as_array().unwrap().clone();
    assert_eq!(decisions.len(), run["proposals"].as_u64().unwrap() as usize);
    assert!(decisions.len() >= 4, "{listed:#}");
    let (status, dry) = server
        .post_json(
            "/api/v1/runs",
            &json!({"cluster": "east", "profile": "lifetime", "dryRun": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{dry:#}");

    let pruned = wait_until(&server, &format!("/api/v1/runs/{}", run["id"]), |r| {
        !r["decisionsPrunedAt"].is_null()
    })
    .await;
    assert_eq!(pruned["decisionsPruned"], decisions.len(), "{pruned:#}");
    assert_eq!(
        pruned["proposals"],
        decisions.len(),
        "the report keeps the count"
    );
    // The policies' logs went with the proposals, counted as dropped.
    let lines = |run: &Value, key: &str| -> u64 {
        run["report"]["policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| match key {
                "logs" => p["logs"].as_array().unwrap().len() as u64,
                _ => p[key].as_u64().unwrap(),
            })
            .sum()
    };
    assert!(lines(&run, "logs") > 0, "{run:#}");
    assert_eq!(lines(&pruned, "logs"), 0, "{pruned:#}");
    assert_eq!(
        lines(&pruned, "logsDropped"),
        lines(&run, "logsDropped") + lines(&run, "logs")
    );
    let (_, left) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    assert_eq!(left["items"], json!([]));
    let (status, body) = server
        .get(&format!("/api/v1/decisions/{}", decisions[0]["id"]))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");

    // The dry run started after the first one, so its proposals may reach the TTL only now
    // (later still on a loaded machine): they expire, and stay.
    let kept = wait_until(
        &server,
        &format!("/api/v1/decisions?run={}", dry["id"]),
        |l| {
            l["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["status"] == "expired")
        },
    )
    .await;
    let kept = kept["items"].as_array().unwrap();
    assert_eq!(kept.len(), dry["proposals"].as_u64().unwrap() as usize);
    let (_, dry_now) = server.get(&format!("/api/v1/runs/{}", dry["id"])).await;
    assert_eq!(dry_now["decisionsPruned"], 0);
    assert_eq!(dry_now["decisionsPrunedAt"], Value::Null);

    // The pass counts its rows in the metrics when it ends, after the run above was marked:
    // wait for that (a loaded machine can take a moment).
    let mut text = String::new();
    for _ in 0..50 {
        let (_, body) = server.get("/metrics").await;
        text = body.as_str().unwrap().to_string();
        if metric_sum(&text, "rebalancer_pruned_rows_total", "table=\"decisions\"") > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = text.as_str();
    assert_eq!(
        metric_sum(text, "rebalancer_pruned_rows_total", "table=\"decisions\""),
        decisions.len() as f64
    );
    assert_eq!(
        metric_sum(
            text,
            "rebalancer_pruned_rows_total",
            "table=\"decision_events\""
        ),
        decisions.len() as f64,
        "each had its expiry in its history"
    );
    assert!(metric_value(text, "rebalancer_database_size_bytes") > 0.0);
}

/// Rows inserted straight into the store, as a long-running server accumulates them.
const DECISIONS: i64 = 60_000;

#[tokio::test]
async fn pruning_goes_in_batches_and_api_writes_go_on_meanwhile() {
    let prune = Arc::new(AtomicBool::new(false));
    let server = TestServer::start_with({
        let prune = prune.clone();
        move |s| {
            s.demo = false;
            s.retention.proposals = prune
                .load(Ordering::SeqCst)
                .then_some(Duration::from_millis(1));
        }
    })
    .await;
    // A run, then many more expired proposals of it, each with its expiry in its history.
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (status, run) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (run_id, proposed) = (
        run["id"].as_i64().unwrap(),
        run["proposals"].as_i64().unwrap(),
    );
    let store = server.state().store.clone();
    store.expire_proposals(i64::MAX).await.unwrap();
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) \
         INSERT INTO decisions (run_id, cluster, profile, plugin_set, plugin, pod_uid, \
           pod_namespace, pod_name, node, reason, status, status_reason, created_at, updated_at) \
         SELECT ?, 'east', 'default', 'default', 'PodLifeTime', 'uid-' || i, 'shop', 'pod-' || i, \
           'n1', 'old', 'expired', 'expired: not approved within the proposal TTL', 0, 0 FROM n",
    )
    .bind(DECISIONS)
    .bind(run_id)
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO decision_events (decision_id, from_status, to_status, actor, time) \
         SELECT id, 'proposed', 'expired', 'system:expiry', 0 FROM decisions \
         WHERE run_id = ? AND pod_name LIKE 'pod-%'",
    )
    .bind(run_id)
    .execute(store.pool())
    .await
    .unwrap();
    let total = DECISIONS + proposed;

    // With a keep time now, the first pass starts as soon as the server is ready.
    prune.store(true, Ordering::SeqCst);
    let server = server.restart().await;
    let run_path = format!("/api/v1/runs/{run_id}");
    let (mut writes, mut slowest) = (0, Duration::ZERO);
    let mut seen = Vec::new();
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "pruning never ended: {seen:?}"
        );
        let begun = Instant::now();
        let (status, body) = server
            .post_json(
                "/api/v1/tokens",
                &json!({"name": format!("t-{writes}"), "role": "viewer"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body:#}");
        slowest = slowest.max(begun.elapsed());
        writes += 1;
        let (status, r) = server.get(&run_path).await;
        assert_eq!(status, StatusCode::OK, "{r:#}");
        let pruned = r["decisionsPruned"].as_i64().unwrap();
        if seen.last() != Some(&pruned) {
            seen.push(pruned);
        }
        if !r["decisionsPrunedAt"].is_null() {
            assert_eq!(pruned, total, "{r:#}");
            break;
        }
    }
    // Committed a batch at a time (2,000 rows): several partial counts were visible, and
    // writes went through between them.
    let partial: Vec<i64> = seen
        .iter()
        .copied()
        .filter(|n| *n > 0 && *n < total)
        .collect();
    assert!(partial.len() >= 3, "{seen:?}");
    assert!(
        partial.iter().all(|n| n % 2000 == 0),
        "whole batches only: {seen:?}"
    );
    assert!(writes >= 5, "{writes} writes during the pass");
    assert!(
        slowest < Duration::from_secs(1),
        "a write waited {slowest:?} for the pruning"
    );
}
