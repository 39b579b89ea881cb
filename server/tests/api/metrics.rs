//! `/metrics`: Prometheus text, public, reflecting runs, policy evaluations, proposals and
//! decisions; descheduler's series after a run and an eviction, and the process's, read back
//! with a Prometheus text-format parser.

use prometheus_parse::{LineInfo, Sample, Scrape, Value as Metric};
use rebalancer_server::metrics::{LOOP_BUCKETS, STRATEGY_BUCKETS};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::migrations::{approve, decision_of, finished, wait_for};
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

/// `/metrics` parsed as a Prometheus server reads it. The parser skips what it does not
/// understand, so every line is first checked to be a HELP, TYPE or sample line.
fn parse(text: &str) -> Scrape {
    for line in text.lines() {
        assert!(
            !matches!(LineInfo::parse(line), LineInfo::Ignored | LineInfo::Empty),
            "not a line of the Prometheus text format: {line:?}"
        );
    }
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("the text parses")
}

/// The samples of `metric` (a histogram's under its family name).
fn samples<'a>(scrape: &'a Scrape, metric: &str) -> Vec<&'a Sample> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .collect()
}

/// The one sample of `metric` whose labels include `labels`.
fn one<'a>(scrape: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> &'a Sample {
    let matching: Vec<&Sample> = samples(scrape, metric)
        .into_iter()
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(matching.len(), 1, "{metric} {labels:?}: {matching:#?}");
    matching[0]
}

/// The value of an unlabelled or untyped sample (`_sum`, `_count`, a gauge, a counter).
fn number(sample: &Sample) -> f64 {
    match &sample.value {
        Metric::Counter(v) | Metric::Gauge(v) | Metric::Untyped(v) => *v,
        other => panic!("{}: not a number: {other:?}", sample.metric),
    }
}

/// A histogram's buckets: (upper bound, cumulative count), in order.
fn buckets(sample: &Sample) -> Vec<(f64, f64)> {
    match &sample.value {
        Metric::Histogram(buckets) => buckets.iter().map(|b| (b.less_than, b.count)).collect(),
        other => panic!("{}: not a histogram: {other:?}", sample.metric),
    }
}

#[tokio::test]
async fn descheduler_and_process_series_after_a_run_and_an_eviction() {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let server = TestServer::start().await;
    // The stored profile `lifetime`, whose DeschedulerPolicy profile is `everything-old`.
    let (run, decisions) = crate::approval::proposals(&server).await;
    let (status, run) = server.get(&format!("/api/v1/runs/{run}")).await;
    assert_eq!(status, StatusCode::OK, "{run:#}");
    let migration = approve(&server, decision_of(&decisions, "web-1")).await;
    let migration = wait_for(&server, migration, finished).await;
    assert_eq!(migration["phase"], "Succeeded", "{migration:#}");
    let node = migration["sourceNode"].as_str().unwrap();

    let text = scrape(&server).await;
    let scrape = parse(&text);
    for family in [
        "descheduler_pods_evicted_total counter",
        "descheduler_pods_evicted counter",
        "descheduler_loop_duration_seconds histogram",
        "descheduler_descheduler_loop_duration_seconds histogram",
        "descheduler_strategy_duration_seconds histogram",
        "descheduler_descheduler_strategy_duration_seconds histogram",
        "descheduler_build_info gauge",
        "process_cpu_seconds_total counter",
        "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge",
        "process_open_fds gauge",
        "process_max_fds gauge",
        "process_start_time_seconds gauge",
    ] {
        assert!(text.contains(&format!("\n# TYPE {family}\n")), "{family}");
        let name = family.split(' ').next().unwrap();
        assert!(scrape.docs.contains_key(name), "{name} has no HELP");
    }

    // The eviction, with descheduler's labels: the plugin, the DeschedulerPolicy profile.
    for name in ["descheduler_pods_evicted_total", "descheduler_pods_evicted"] {
        let evicted = samples(&scrape, name);
        assert_eq!(evicted.len(), 1, "{name}: {evicted:#?}");
        let labels = &evicted[0].labels;
        let mut names: Vec<&str> = labels.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["namespace", "node", "profile", "result", "strategy"]
        );
        assert_eq!(
            [
                labels.get("result"),
                labels.get("strategy"),
                labels.get("profile"),
                labels.get("namespace"),
                labels.get("node")
            ],
            [
                Some("success"),
                Some("PodLifeTime"),
                Some("everything-old"),
                Some("shop"),
                Some(node)
            ]
        );
        assert_eq!(evicted[0].value, Metric::Counter(1.0));
    }
    // Rebalancer's own series names the stored profile.
    let own = one(
        &scrape,
        "rebalancer_pods_evicted_total",
        &[("result", "success")],
    );
    assert_eq!(own.labels.get("profile"), Some("lifetime"));

    // One descheduling cycle: the run. No labels, descheduler's buckets.
    let report = &run["report"];
    let cycle_seconds = report["durationMs"].as_f64().unwrap() / 1000.0;
    for name in [
        "descheduler_loop_duration_seconds",
        "descheduler_descheduler_loop_duration_seconds",
    ] {
        let cycle = samples(&scrape, name);
        assert_eq!(cycle.len(), 1, "{name}: {cycle:#?}");
        assert!(cycle[0].labels.is_empty(), "{:?}", cycle[0].labels);
        let counts = buckets(cycle[0]);
        let bounds: Vec<f64> = counts.iter().map(|(le, _)| *le).collect();
        let mut expected = LOOP_BUCKETS.to_vec();
        expected.push(f64::INFINITY);
        assert_eq!(bounds, expected);
        assert!(counts.windows(2).all(|w| w[0].1 <= w[1].1), "{counts:?}");
        assert_eq!(counts.last().unwrap().1, 1.0);
        let count = one(&scrape, &format!("{name}_count"), &[]);
        assert_eq!(number(count), 1.0);
        let sum = number(one(&scrape, &format!("{name}_sum"), &[]));
        // The cycle is timed around the engine's run, which times itself from inside.
        assert!(
            sum >= cycle_seconds - 1e-9 && sum < cycle_seconds + 1.0,
            "{sum} vs the report's {cycle_seconds}"
        );
    }

    // One strategy per plugin of the run, timed as the report says.
    let policies = report["policies"].as_array().unwrap();
    assert!(!policies.is_empty(), "{report:#}");
    for policy in policies {
        let labels = [
            ("strategy", policy["plugin"].as_str().unwrap()),
            ("profile", policy["pluginSet"].as_str().unwrap()),
        ];
        assert_eq!(labels[1].1, "everything-old");
        for name in [
            "descheduler_strategy_duration_seconds",
            "descheduler_descheduler_strategy_duration_seconds",
        ] {
            let counts = buckets(one(&scrape, name, &labels));
            let bounds: Vec<f64> = counts.iter().map(|(le, _)| *le).collect();
            let mut expected = STRATEGY_BUCKETS.to_vec();
            expected.push(f64::INFINITY);
            assert_eq!(bounds, expected);
            assert_eq!(counts.last().unwrap().1, 1.0);
            let sum = number(one(&scrape, &format!("{name}_sum"), &labels));
            let reported = policy["durationMs"].as_f64().unwrap() / 1000.0;
            assert!((sum - reported).abs() < 1e-9, "{sum} vs {reported}");
        }
    }

    // Build info: a gauge of 1 that names this build.
    let info = samples(&scrape, "descheduler_build_info");
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].value, Metric::Gauge(1.0));
    let version = env!("CARGO_PKG_VERSION");
    let label = |name: &str| info[0].labels.get(name).unwrap_or_default().to_string();
    assert_eq!(label("AppVersion"), version);
    assert_eq!(label("DeschedulerVersion"), format!("v{version}"));
    assert!(
        label("RustVersion").starts_with("rustc 1."),
        "{:?}",
        info[0].labels
    );
    let sha = label("GitSha1");
    assert!(
        sha.is_empty() || (sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit())),
        "{sha}"
    );

    // The process: this test binary, which serves the server.
    let value = |name: &str| number(one(&scrape, name, &[]));
    assert!(matches!(
        one(&scrape, "process_cpu_seconds_total", &[]).value,
        Metric::Counter(v) if v > 0.0
    ));
    let resident = value("process_resident_memory_bytes");
    assert!(resident > f64::from(1 << 20), "{resident}");
    assert!(value("process_virtual_memory_bytes") >= resident);
    let open = value("process_open_fds");
    assert!(open >= 3.0 && open <= value("process_max_fds"), "{open}");
    let start = value("process_start_time_seconds");
    assert!(
        start <= started + 1.0 && start > started - 86_400.0,
        "{start} vs {started}"
    );
}
