//! `/metrics`: Prometheus text, public, reflecting runs, policy evaluations, proposals and
//! decisions.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, metric_sum as sum, small_cluster};

/// The value of the series `name{labels}` (labels exactly as rendered), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

async fn scrape(server: &TestServer) -> String {
    let response = reqwest::Client::new()
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn metrics_count_runs_evaluations_proposals_and_decisions() {
    let server = TestServer::start().await;
    let before = scrape(&server).await;
    for family in [
        "rebalancer_runs_total counter",
        "rebalancer_policy_evaluation_duration_seconds histogram",
        "rebalancer_policy_evaluations_total counter",
        "rebalancer_proposals_total counter",
        "rebalancer_decisions gauge",
        "rebalancer_pods_evicted_total counter",
        "rebalancer_pod_migrations_total counter",
    ] {
        assert!(
            before.contains(&format!("# TYPE {family}")),
            "{family}: {before}"
        );
    }
    assert_eq!(sum(&before, "rebalancer_runs_total", ""), 0.0);

    server.push("east", &small_cluster()).await;
    let (status, run) = server.run("east", "default").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (status, _) = server
        .post_json(
            "/api/v1/runs",
            &json!({"cluster": "east", "profile": "default", "dryRun": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = server.run("east", "no-such-profile").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let text = scrape(&server).await;
    assert_eq!(
        sample(
            &text,
            r#"rebalancer_runs_total{profile="default",status="succeeded",trigger="manual"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sum(&text, "rebalancer_runs_total", ""),
        2.0,
        "a run that never started is not counted"
    );

    // One evaluation per policy of the profile per run, each in the histogram.
    let policies = run["report"]["policies"].as_array().unwrap();
    assert!(!policies.is_empty());
    for policy in policies {
        let name = policy["plugin"].as_str().unwrap();
        let outcome = policy["error"]["kind"].as_str().unwrap_or("ok");
        assert_eq!(
            sample(
                &text,
                &format!(
                    r#"rebalancer_policy_evaluations_total{{policy="{name}",outcome="{outcome}"}}"#
                )
            ),
            Some(2.0),
            "{name}: {text}"
        );
        let count = format!(
            r#"rebalancer_policy_evaluation_duration_seconds_count{{policy="{name}",plugin_set="{}",profile="default",outcome="{outcome}"}}"#,
            policy["pluginSet"].as_str().unwrap()
        );
        assert_eq!(sample(&text, &count), Some(2.0), "{count}: {text}");
        let inf = count
            .replace("_count{", "_bucket{")
            .replace("\"}", "\",le=\"+Inf\"}");
        assert_eq!(sample(&text, &inf), Some(2.0), "{inf}");
    }

    // Proposals per plugin add up to what the two runs proposed; decisions by status likewise.
    let proposals = run["proposals"].as_u64().unwrap() as f64;
    assert!(proposals > 0.0, "the small cluster has duplicates: {run:#}");
    assert_eq!(
        sum(&text, "rebalancer_proposals_total", r#"profile="default""#),
        2.0 * proposals
    );
    let (_, decisions) = server.get("/api/v1/decisions?limit=1000").await;
    let total = decisions["items"].as_array().map_or(0, Vec::len) as f64;
    assert_eq!(sum(&text, "rebalancer_decisions", ""), total);
    assert!(total >= 2.0 * proposals, "{decisions:#}");
    let by_status = |status: &str| {
        decisions["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d: &&Value| d["status"] == status)
            .count() as f64
    };
    assert_eq!(
        sample(&text, r#"rebalancer_decisions{status="proposed"}"#).unwrap_or(0.0),
        by_status("proposed")
    );
}
