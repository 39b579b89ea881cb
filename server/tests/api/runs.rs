//! Runs and decisions.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, policy_module, small_cluster};

#[tokio::test]
async fn the_default_profile_proposes_moves_on_the_demo_cluster() {
    let server = TestServer::start_with_demo().await;
    let (status, run) = server.run("demo", "default").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(
        (&run["cluster"], &run["profile"]),
        (&json!("demo"), &json!("default"))
    );
    assert!(run["finishedAt"].is_string() && run["startedAt"].is_string());
    let id = run["id"].as_i64().unwrap();
    let report = &run["report"];
    let plugins: Vec<&str> = report["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["plugin"].as_str().unwrap())
        .collect();
    // Deschedule plugins first, then balance: the Helm chart's default profile.
    assert_eq!(
        plugins,
        [
            "RemovePodsHavingTooManyRestarts",
            "RemovePodsViolatingNodeTaints",
            "RemovePodsViolatingNodeAffinity",
            "RemovePodsViolatingInterPodAntiAffinity",
            "RemoveDuplicates",
            "RemovePodsViolatingTopologySpreadConstraint",
            "LowNodeUtilization"
        ]
    );
    for outcome in report["policies"].as_array().unwrap() {
        assert!(outcome["error"].is_null(), "{outcome:#}");
        assert!(outcome["durationMs"].as_f64().unwrap() >= 0.0);
    }
    let proposals = report["proposalCount"].as_u64().unwrap() as usize;
    assert!(proposals > 0, "the demo cluster is unbalanced: {report:#}");
    assert_eq!(run["proposals"], proposals);
    // The proposals themselves are the decisions, not part of the run object.
    assert!(report.get("proposals").is_none(), "{report:#}");
    let per_policy: u64 = report["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["proposals"].as_u64().unwrap())
        .sum();
    assert_eq!(per_policy as usize, proposals);

    // GET returns the same object.
    let (status, again) = server.get(&format!("/api/v1/runs/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, run);

    // Decisions: one per proposal, paginated.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            None => format!("/api/v1/decisions?run={id}&limit=3"),
            Some(c) => format!("/api/v1/decisions?run={id}&limit=3&cursor={c}"),
        };
        let (status, page) = server.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page:#}");
        pages += 1;
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 3);
        seen.extend(items.iter().cloned());
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => {
                assert!(page["next"].is_null());
                break;
            }
        }
    }
    assert_eq!(seen.len(), proposals);
    assert_eq!(pages, proposals.div_ceil(3).max(1));
    let ids: BTreeSet<i64> = seen.iter().map(|d| d["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), proposals, "no decision twice");
    let mut per_plugin: std::collections::BTreeMap<String, u64> = Default::default();
    for decision in &seen {
        *per_plugin
            .entry(decision["plugin"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    for policy in report["policies"].as_array().unwrap() {
        let plugin = policy["plugin"].as_str().unwrap();
        assert_eq!(
            per_plugin.get(plugin).copied().unwrap_or(0),
            policy["proposals"].as_u64().unwrap(),
            "decisions of {plugin}"
        );
    }
    let demo_pods: BTreeSet<(String, String, String, String)> = {
        let (_, nodes) = server.get("/api/v1/clusters/demo/nodes").await;
        let mut pods = BTreeSet::new();
        for node in nodes["items"].as_array().unwrap() {
            let name = node["name"].as_str().unwrap();
            let (_, on_node) = server
                .get(&format!(
                    "/api/v1/clusters/demo/pods?node={name}&limit=1000"
                ))
                .await;
            for p in on_node["items"].as_array().unwrap() {
                pods.insert((
                    p["uid"].as_str().unwrap_or_default().to_string(),
                    p["namespace"].as_str().unwrap().to_string(),
                    p["name"].as_str().unwrap().to_string(),
                    name.to_string(),
                ));
            }
        }
        pods
    };
    for decision in &seen {
        // Every decision names a pod of the cluster, on the node it was on.
        let pod = (
            decision["pod"]["uid"].as_str().unwrap().to_string(),
            decision["pod"]["namespace"].as_str().unwrap().to_string(),
            decision["pod"]["name"].as_str().unwrap().to_string(),
            decision["node"].as_str().unwrap().to_string(),
        );
        assert!(demo_pods.contains(&pod), "{decision:#}");
        assert_eq!(decision["status"], "proposed");
        assert_eq!(decision["run"], id);
        assert_eq!(decision["profile"], "default");
        assert_eq!(decision["pluginSet"], "default");
        assert_eq!(decision["cluster"], "demo");
        assert!(!decision["reason"].as_str().unwrap().is_empty());
        assert!(decision["createdAt"].is_string());
    }

    let first = seen[0]["id"].as_i64().unwrap();
    let (status, one) = server.get(&format!("/api/v1/decisions/{first}")).await;
    assert_eq!(status, StatusCode::OK);
    // The detail is the list item plus its history and pod migration.
    for (key, value) in seen[0].as_object().unwrap() {
        assert_eq!(&one[key], value, "{key}");
    }
    assert_eq!(one["history"], serde_json::json!([]));
    assert!(one["podMigration"].is_null());

    let (_, proposed) = server
        .get(&format!(
            "/api/v1/decisions?run={id}&status=proposed&limit=1000"
        ))
        .await;
    assert_eq!(proposed["items"].as_array().unwrap().len(), proposals);
    let (_, approved) = server.get("/api/v1/decisions?status=approved").await;
    assert_eq!(approved["items"], json!([]));

    let (status, runs) = server.get("/api/v1/runs").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(runs["items"][0]["id"], id);
    assert!(runs["next"].is_null());
}

#[tokio::test]
async fn run_and_decision_errors() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;

    let (status, body) = server.run("west", "default").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(assert_error(&body, "not_found").contains("cluster \"west\""));
    let (status, body) = server.run("east", "nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(assert_error(&body, "not_found").contains("profile \"nope\""));

    let (status, body) = server
        .post_json("/api/v1/runs", &json!({"cluster": "east"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(assert_error(&body, "invalid_request").contains("profile"));
    let (status, body) = server
        .post_json(
            "/api/v1/runs",
            &json!({"cluster": "east", "profile": "default", "dryrun": true}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(assert_error(&body, "invalid_request").contains("dryrun"));
    let (status, body) = server
        .send(
            server
                .client
                .post(server.url("/api/v1/runs"))
                .header("content-type", "application/json")
                .body("{"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_json");

    let (status, body) = server.get("/api/v1/runs/999").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "not_found");
    let (status, body) = server.get("/api/v1/decisions/999").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "not_found");
    let (status, body) = server.get("/api/v1/decisions?cursor=abc").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_cursor");
    let (status, body) = server.get("/api/v1/decisions?status=done").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_query");
    let (status, body) = server.get("/api/v1/decisions?limit=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_query");

    // A profile that parses but cannot run on this cluster: the run is recorded as failed.
    server
        .put_profile(
            "strict",
            &json!({
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "profiles": [{
                    "name": "p",
                    "pluginConfig": [
                        {"name": "DefaultEvictor", "args": {"priorityThreshold": {"name": "no-such-class"}}},
                        {"name": "RemoveDuplicates"}
                    ],
                    "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}
                }]
            }),
        )
        .await;
    let (status, body) = server.run("east", "strict").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert!(assert_error(&body, "invalid_profile").contains("no-such-class"));
    let failed_id = body["details"]["run"].as_i64().unwrap();
    let (_, failed) = server.get(&format!("/api/v1/runs/{failed_id}")).await;
    assert_eq!(failed["status"], "failed");
    assert!(failed["error"].as_str().unwrap().contains("no-such-class"));
    assert!(failed["report"].is_null());
}

fn chaos_profile(deschedule_behaviour: &str, count: u32) -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "chaos",
            "pluginConfig": [
                {"name": "TestMisbehaving", "args": {"behaviour": deschedule_behaviour, "count": count}},
                {"name": "RemoveDuplicates"}
            ],
            "plugins": {
                "deschedule": {"enabled": ["TestMisbehaving"]},
                "balance": {"enabled": ["RemoveDuplicates"]}
            }
        }]
    })
}

#[tokio::test]
async fn a_misbehaving_policy_fails_alone_and_the_server_keeps_serving() {
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.sandbox.timeout_ms = 500;
    })
    .await;
    server.push("east", &small_cluster()).await;
    server.upload(policy_module("test_misbehaving.wasm")).await;

    for (behaviour, kind) in [("trap", "trap"), ("infinite-loop", "timeout")] {
        server
            .put_profile("chaos", &chaos_profile(behaviour, 1))
            .await;
        let (status, run) = server.run("east", "chaos").await;
        assert_eq!(status, StatusCode::CREATED, "{run:#}");
        assert_eq!(run["status"], "succeeded");
        let outcomes = run["report"]["policies"].as_array().unwrap();
        assert_eq!(outcomes[0]["plugin"], "TestMisbehaving");
        assert_eq!(outcomes[0]["error"]["kind"], kind, "{:#}", outcomes[0]);
        // The other policy of the run still ran: web has three replicas on n1.
        assert_eq!(outcomes[1]["plugin"], "RemoveDuplicates");
        assert!(outcomes[1]["error"].is_null());
        assert_eq!(outcomes[1]["proposals"], 2, "{:#}", outcomes[1]);
    }
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);

    // A well-behaved uploaded policy: its proposals are decisions like any other, and a pod it
    // proposed is not proposed again by the next plugin of the run.
    server
        .put_profile("chaos", &chaos_profile("propose", 4))
        .await;
    let (status, run) = server.run("east", "chaos").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let id = run["id"].as_i64().unwrap();
    let (_, decisions) = server.get(&format!("/api/v1/decisions?run={id}")).await;
    let items = decisions["items"].as_array().unwrap();
    let by_plugin = |plugin: &str| items.iter().filter(|d| d["plugin"] == plugin).count();
    assert_eq!(by_plugin("TestMisbehaving"), 4, "{decisions:#}");
    let pods: BTreeSet<&str> = items
        .iter()
        .map(|d| d["pod"]["uid"].as_str().unwrap())
        .collect();
    assert_eq!(pods.len(), items.len(), "a pod is proposed once per run");

    // A client that gives up half-way does not leave the run behind: it finishes and is
    // recorded (the policy spins until its 500 ms deadline).
    server
        .put_profile("chaos", &chaos_profile("infinite-loop", 1))
        .await;
    let gave_up = server
        .client
        .post(server.url("/api/v1/runs"))
        .json(&json!({"cluster": "east", "profile": "chaos"}))
        .timeout(Duration::from_millis(150))
        .send()
        .await;
    assert!(gave_up.is_err(), "the request should time out");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, runs) = server.get("/api/v1/runs?limit=1").await;
        let newest = &runs["items"][0];
        if newest["id"].as_i64().unwrap() > id && newest["status"] == "succeeded" {
            assert_eq!(newest["report"]["policies"][0]["error"]["kind"], "timeout");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the abandoned run never finished: {runs:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A profile running TestMisbehaving with `args` alone.
fn state_profile(args: Value) -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "stateful",
            "pluginConfig": [{"name": "TestMisbehaving", "args": args}],
            "plugins": {"balance": {"enabled": ["TestMisbehaving"]}}
        }]
    })
}

#[tokio::test]
async fn policy_state_carries_across_runs_and_only_successful_evaluations_commit_it() {
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.sandbox.max_state_bytes = 64;
    })
    .await;
    server.push("east", &small_cluster()).await;
    server.push("west", &small_cluster()).await;
    server.upload(policy_module("test_misbehaving.wasm")).await;
    let logged = |run: &Value| -> Vec<String> {
        run["report"]["policies"][0]["logs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["message"].as_str().unwrap().to_owned())
            .collect()
    };
    let run = |cluster: &'static str, args: Value| {
        let server = &server;
        async move {
            server.put_profile("stateful", &state_profile(args)).await;
            let (status, run) = server.run(cluster, "stateful").await;
            assert_eq!(status, StatusCode::CREATED, "{run:#}");
            assert_eq!(run["status"], "succeeded", "{run:#}");
            run
        }
    };

    let first = run("east", json!({"behaviour": "count-runs"})).await;
    assert_eq!(logged(&first), ["run 1"]);
    assert!(first["report"]["policies"][0]["stateConflict"].is_null());
    assert_eq!(
        logged(&run("east", json!({"behaviour": "count-runs"})).await),
        ["run 2"]
    );
    // A trap after counting commits nothing.
    let trapped = run("east", json!({"behaviour": "count-runs-then-trap"})).await;
    assert_eq!(trapped["report"]["policies"][0]["error"]["kind"], "trap");
    assert_eq!(
        logged(&run("east", json!({"behaviour": "count-runs"})).await),
        ["run 3"]
    );
    // Over the cap: the put is refused, the policy fails, nothing is committed.
    let over = run("east", json!({"behaviour": "count-runs", "count": 100})).await;
    let error = &over["report"]["policies"][0]["error"];
    assert_eq!(error["kind"], "policy-error", "{over:#}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("capped at 64 bytes"),
        "{error:#}"
    );
    assert_eq!(
        logged(&run("east", json!({"behaviour": "count-runs"})).await),
        ["run 4"]
    );
    // Another cluster has its own scope.
    assert_eq!(
        logged(&run("west", json!({"behaviour": "count-runs"})).await),
        ["run 1"]
    );
}

#[tokio::test]
async fn the_evictor_cooldown_stops_proposing_an_owner_again_and_dry_runs_do_not_start_it() {
    let server = TestServer::start_with(|s| s.demo = false).await;
    server.push("east", &small_cluster()).await;
    let profile = |cooldown: &str| {
        json!({
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "profiles": [{
                "name": "calm",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {"cooldown": cooldown}},
                    {"name": "RemoveDuplicates"}
                ],
                "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}
            }]
        })
    };
    let proposals = |run: &Value| run["report"]["proposalCount"].as_i64().unwrap();
    let (status, body) = server
        .put_json("/api/v1/profiles/calm", &profile("soon"))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert!(body.to_string().contains("cooldown"), "{body:#}");
    server.put_profile("calm", &profile("1h")).await;

    // A dry run proposes, but starts no cooldown.
    let (status, dry) = server
        .post_json(
            "/api/v1/runs",
            &json!({"cluster": "east", "profile": "calm", "dryRun": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{dry:#}");
    assert_eq!(proposals(&dry), 2, "web has three replicas on n1: {dry:#}");
    let (_, first) = server.run("east", "calm").await;
    assert_eq!(proposals(&first), 2, "{first:#}");
    // Within the hour, web's pods are not proposed again.
    let (_, second) = server.run("east", "calm").await;
    assert_eq!(proposals(&second), 0, "{second:#}");
    // Without the cooldown they are.
    let mut plain = profile("1h");
    plain["profiles"][0]["pluginConfig"][0]["args"] = json!({});
    server.put_profile("calm", &plain).await;
    let (_, third) = server.run("east", "calm").await;
    assert_eq!(proposals(&third), 2, "{third:#}");
}
