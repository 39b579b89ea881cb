//! Cluster balance and what-if over HTTP: moves land where the simulated backend reserves,
//! "no node fits" says why, thresholds come from the profile, viewers may ask, and bad
//! selections are refused with what is wrong.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, lifetime_profile, list, node, pod, small_cluster};
use rebalancer_server::backend::{ReservationRequest, ReservationState};

/// Push the small cluster as `east`, propose every pod (PodLifeTime), return the decisions.
async fn proposals(server: &TestServer) -> Vec<Value> {
    server.push("east", &small_cluster()).await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (status, run) = server.run("east", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (status, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    assert_eq!(status, StatusCode::OK, "{decisions:#}");
    decisions["items"].as_array().unwrap().clone()
}

fn id_of(decisions: &[Value], pod: &str) -> i64 {
    decisions
        .iter()
        .find(|d| d["pod"]["name"] == pod)
        .unwrap_or_else(|| panic!("no decision for {pod}"))["id"]
        .as_i64()
        .unwrap()
}

async fn what_if(server: &TestServer, cluster: &str, body: &Value) -> (StatusCode, Value) {
    server
        .post_json(&format!("/api/v1/clusters/{cluster}/what-if"), body)
        .await
}

fn node_of<'v>(side: &'v Value, name: &str) -> &'v Value {
    side["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {side:#}"))
}

#[tokio::test]
async fn demo_moves_land_where_the_simulated_backend_reserves_them() {
    let server = TestServer::start_with_demo().await;
    let (status, run) = server.run("demo", "default").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}&limit=1000", run["id"]))
        .await;
    let decisions = decisions["items"].as_array().unwrap().clone();
    let chosen: Vec<&Value> = decisions.iter().take(12).collect();
    assert!(chosen.len() >= 3, "{decisions:#?}");
    let ids: Vec<i64> = chosen.iter().map(|d| d["id"].as_i64().unwrap()).collect();

    let (status, body) = what_if(&server, "demo", &json!({"decisions": ids})).await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let moves = body["moves"].as_array().unwrap();
    assert_eq!(moves.len(), chosen.len());
    // Without `profile`, the decisions' profile (the default one: LowNodeUtilization).
    assert_eq!(
        body["thresholds"][0]["plugin"], "LowNodeUtilization",
        "{body:#}"
    );
    assert_eq!(body["thresholds"][0]["basis"], "requested");

    // The backend reserves the same moves one after the other, each reservation holding its
    // room: every move lands where its reservation does, or fails with the scheduler's words.
    let backend = server.state().backend.clone();
    for (m, d) in moves.iter().zip(&chosen) {
        assert_eq!(m["decision"], d["id"]);
        assert_eq!(m["pod"], d["pod"]);
        assert_eq!(m["from"], d["node"]);
        let request = ReservationRequest {
            name: format!("whatif-{}", d["id"]),
            pod_uid: d["pod"]["uid"].as_str().unwrap().to_owned(),
            target_node: None,
            exclude_nodes: vec![d["node"].as_str().unwrap().to_owned()],
        };
        match backend.reserve("demo", &request).await.unwrap() {
            ReservationState::Scheduled { node } => {
                assert_eq!(m["to"], node.as_str(), "{m:#}");
                assert_eq!(m["reason"], Value::Null);
            }
            ReservationState::Unschedulable { reason } => {
                assert_eq!(m["to"], Value::Null, "{m:#}");
                assert_eq!(m["reason"], format!("no node fits: {reason}"));
            }
            other => panic!("unexpected reservation state {other:?}"),
        }
    }
    let unplaced = moves.iter().filter(|m| m["to"].is_null()).count();
    assert!(unplaced < moves.len(), "some move is placed: {body:#}");
    assert_eq!(body["unplaced"], unplaced);

    // Requests move from the sources to the targets; the node count stays.
    let before = &body["before"];
    let after = &body["after"];
    assert_eq!(
        before["nodes"].as_array().unwrap().len(),
        after["nodes"].as_array().unwrap().len()
    );
    let total = |side: &Value, field: &str| -> i64 {
        side["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n[field]["requested"].as_i64().unwrap())
            .sum()
    };
    assert_eq!(total(before, "cpu"), total(after, "cpu"));
    assert_eq!(total(before, "memory"), total(after, "memory"));
    for m in moves.iter().filter(|m| !m["to"].is_null()) {
        let to = m["to"].as_str().unwrap();
        assert_ne!(Some(to), m["from"].as_str(), "never the pod's own node");
        assert!(
            node_of(after, to)["pods"]["count"].as_i64()
                > node_of(before, to)["pods"]["count"].as_i64(),
            "{to} gained a pod"
        );
    }
}

#[tokio::test]
async fn a_move_no_node_fits_says_why_and_a_gone_pod_says_so() {
    let server = TestServer::start().await;
    server
        .push(
            "tight",
            &list([
                node("big").cpu("8").build(),
                node("small").cpu("1").build(),
                node("down").not_ready().build(),
                pod("shop", "heavy")
                    .on("big")
                    .owned_by("ReplicaSet", "heavy")
                    .requests("3", "1Gi")
                    .build(),
                pod("shop", "light")
                    .on("big")
                    .owned_by("ReplicaSet", "light")
                    .requests("100m", "64Mi")
                    .build(),
            ]),
        )
        .await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (status, run) = server.run("tight", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let decisions = decisions["items"].as_array().unwrap().clone();
    let (heavy, light) = (id_of(&decisions, "heavy"), id_of(&decisions, "light"));

    let (status, body) = what_if(&server, "tight", &json!({"decisions": [heavy, light]})).await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["moves"][0]["to"], Value::Null, "{body:#}");
    assert_eq!(
        body["moves"][0]["reason"],
        "no node fits: 0/3 nodes are available: 1 node(s) excluded (the pod's current node), 1 \
         node(s) were not ready, 1 Insufficient cpu."
    );
    assert_eq!(body["moves"][1]["to"], "small", "{body:#}");
    assert_eq!(body["unplaced"], 1);
    // Only `light` moved.
    assert_eq!(node_of(&body["after"], "big")["cpu"]["requested"], 3000);
    assert_eq!(node_of(&body["after"], "small")["cpu"]["requested"], 100);
    assert_eq!(node_of(&body["before"], "small")["pods"]["count"], 0);
    assert_eq!(node_of(&body["after"], "small")["pods"]["count"], 1);

    // The pod is gone from the next snapshot: listed, not placed.
    server
        .push(
            "tight",
            &list([node("big").cpu("8").build(), node("small").cpu("1").build()]),
        )
        .await;
    let (status, body) = what_if(&server, "tight", &json!({"run": run["id"]})).await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let moves = body["moves"].as_array().unwrap();
    assert_eq!(moves.len(), 2, "{body:#}");
    for m in moves {
        assert_eq!(m["to"], Value::Null);
        assert_eq!(m["reason"], "pod no longer exists");
        assert!(m["pod"]["uid"].as_str().is_some_and(|u| !u.is_empty()));
    }
    assert_eq!(body["unplaced"], 2);
}

/// LowNodeUtilization with 20 % / 50 % thresholds, as the Helm chart's default.
fn balanced_profile() -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "balance",
            "pluginConfig": [
                {"name": "LowNodeUtilization", "args": {
                    "thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                    "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}},
                {"name": "DefaultEvictor", "args": {}}
            ],
            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}
        }]
    })
}

#[tokio::test]
async fn thresholds_come_from_the_profile_and_count_nodes_beyond_them() {
    let server = TestServer::start().await;
    let decisions = proposals(&server).await;
    server.put_profile("balance", &balanced_profile()).await;

    let (status, body) = server.get("/api/v1/clusters/east/balance").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["thresholds"], json!([]));
    assert_eq!(body["summary"]["cpu"]["above"], 0);
    assert_eq!(body["cluster"], "east");
    assert!(body["snapshotTime"].as_str().is_some(), "{body:#}");

    let (status, body) = server
        .get("/api/v1/clusters/east/balance?profile=balance")
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(
        body["thresholds"],
        json!([{
            "plugin": "LowNodeUtilization", "basis": "requested", "deviation": false,
            "low": {"cpu": 20.0, "memory": 20.0, "pods": 20.0},
            "high": {"cpu": 50.0, "memory": 50.0, "pods": 50.0},
        }])
    );
    // n1: 2.5 of 4 cpu (62.5 %), n2: 0.1 of 4 (2.5 %), n3: 0 of 8.
    let n1 = node_of(&body, "n1");
    assert_eq!(
        n1["cpu"],
        json!({"requested": 2500, "allocatable": 4000, "used": null})
    );
    assert_eq!(n1["pods"], json!({"count": 4, "capacity": 110}));
    let cpu = &body["summary"]["cpu"];
    assert_eq!(
        (cpu["above"].as_u64(), cpu["below"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(cpu["max"], 62.5);
    assert_eq!(cpu["min"], 0.0);
    assert!(
        (cpu["mean"].as_f64().unwrap() - 65.0 / 3.0).abs() < 1e-9,
        "{cpu}"
    );

    // What-if with the profile: web-1 (500m) leaves n1 for n3; n1 is at 50 %, not above.
    let web1 = id_of(&decisions, "web-1");
    let (status, body) = what_if(
        &server,
        "east",
        &json!({"decisions": [web1], "profile": "balance"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["moves"][0]["to"], "n3", "{body:#}");
    assert_eq!(body["thresholds"][0]["plugin"], "LowNodeUtilization");
    assert_eq!(body["before"]["summary"]["cpu"]["above"], 1);
    assert_eq!(body["after"]["summary"]["cpu"]["above"], 0);
    assert_eq!(node_of(&body["after"], "n1")["cpu"]["requested"], 2000);

    // Unknown profiles are named.
    let (status, body) = server
        .get("/api/v1/clusters/east/balance?profile=nope")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        assert_error(&body, "not_found").contains("nope"),
        "{body:#}"
    );
    let (status, body) = what_if(
        &server,
        "east",
        &json!({"decisions": [web1], "profile": "nope"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
}

#[tokio::test]
async fn viewers_may_ask_what_if_and_balance() {
    let server = TestServer::start().await;
    let decisions = proposals(&server).await;
    let viewer = server.create_token("looker", "viewer").await;
    let web1 = id_of(&decisions, "web-1");
    let (status, body) = server
        .call(
            Some(&viewer),
            Method::POST,
            "/api/v1/clusters/east/what-if",
            Some(&json!({"filter": {"pod": "SHOP/WEB-"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    // The pod search is a case-insensitive substring: the three web replicas, oldest first.
    let moves = body["moves"].as_array().unwrap();
    let mut names: Vec<&str> = moves
        .iter()
        .map(|m| m["pod"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["web-1", "web-2", "web-3"], "{body:#}");
    let ids: Vec<i64> = moves
        .iter()
        .map(|m| m["decision"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert!(ids.contains(&web1));
    let (status, body) = server
        .call(
            Some(&viewer),
            Method::GET,
            "/api/v1/clusters/east/balance",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    // Still a token is needed.
    let (status, _) = server
        .call(
            None,
            Method::POST,
            "/api/v1/clusters/east/what-if",
            Some(&json!({"run": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Nothing was reserved or changed by asking.
    let (_, nodes) = server.get("/api/v1/clusters/east/nodes").await;
    assert!(
        nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["reserved"]["pods"] == 0),
        "{nodes:#}"
    );
}

#[tokio::test]
async fn bad_selections_say_what_is_wrong() {
    let server = TestServer::start().await;
    let decisions = proposals(&server).await;
    let web1 = id_of(&decisions, "web-1");
    // Another cluster with its own decisions.
    server.push("west", &small_cluster()).await;
    let (status, run_west) = server.run("west", "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run_west:#}");
    let (_, west) = server
        .get(&format!("/api/v1/decisions?run={}", run_west["id"]))
        .await;
    let west_id = west["items"][0]["id"].as_i64().unwrap();

    let cases: Vec<(&str, Value, StatusCode, &str, &str)> = vec![
        (
            "no selector",
            json!({}),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "none",
        ),
        (
            "two selectors",
            json!({"decisions": [web1], "run": 1}),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "exactly one",
        ),
        (
            "unknown ids",
            json!({"decisions": [web1, 987654, 987655]}),
            StatusCode::NOT_FOUND,
            "not_found",
            "987654, 987655",
        ),
        (
            "another cluster's decision",
            json!({"decisions": [web1, west_id]}),
            StatusCode::BAD_REQUEST,
            "wrong_cluster",
            "west",
        ),
        (
            "another cluster's run",
            json!({"run": run_west["id"]}),
            StatusCode::BAD_REQUEST,
            "wrong_cluster",
            "west",
        ),
        (
            "unknown run",
            json!({"run": 987654}),
            StatusCode::NOT_FOUND,
            "not_found",
            "987654",
        ),
        (
            "unknown field",
            json!({"filter": {}, "ids": [1]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            "ids",
        ),
        (
            "too many",
            json!({"decisions": (1..=10_001).collect::<Vec<i64>>()}),
            StatusCode::BAD_REQUEST,
            "too_many_decisions",
            "10000",
        ),
    ];
    for (case, body, status, code, says) in cases {
        let (got, answer) = what_if(&server, "east", &body).await;
        assert_eq!(got, status, "{case}: {answer:#}");
        let message = assert_error(&answer, code);
        assert!(message.contains(says), "{case}: {message}");
    }
    let (_, answer) = what_if(&server, "east", &json!({"decisions": [web1, 987654]})).await;
    assert_eq!(answer["details"]["missing"], json!([987654]));

    let (status, body) = what_if(&server, "nowhere", &json!({"run": 1})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
    let (status, body) = server.get("/api/v1/clusters/nowhere/balance").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
}
