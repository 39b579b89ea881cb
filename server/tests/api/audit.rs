//! The audit log: every mutating call leaves an entry (who, what, which object, when);
//! entries can be filtered and paged, and never altered.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestServer, policy_module, small_cluster};

const ENV_ACTOR: &str = "env:REBALANCER_ADMIN_TOKEN";

fn actions(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn mutations_are_recorded_with_who_what_and_which_object() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    let profile = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "dups",
            "pluginConfig": [{"name": "RemoveDuplicates", "args": {}}],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}
        }]
    });
    server.put_profile("dups", &profile).await;
    let (status, run) = server.run("east", "dups").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let uploaded = server.upload(policy_module("example_pod_age.wasm")).await;
    let policy = uploaded["name"].as_str().unwrap().to_string();
    let (status, _) = server.delete(&format!("/api/v1/policies/{policy}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let other_admin = server.create_token("release-bot", "admin").await;
    let (_, tokens) = server.get("/api/v1/tokens").await;
    let bot_id = tokens["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "release-bot")
        .unwrap()["id"]
        .clone();
    let (status, _) = server
        .call(
            Some(&other_admin),
            Method::PUT,
            "/api/v1/clusters/west/snapshot",
            Some(&small_cluster()),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let viewer_secret = server.create_token("viewer", "viewer").await;
    let (_, tokens) = server.get("/api/v1/tokens").await;
    let viewer_id = tokens["items"].as_array().unwrap().last().unwrap()["id"].clone();
    let (status, _) = server.delete(&format!("/api/v1/tokens/{viewer_id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // A refused call changes nothing and is not an action.
    let (status, _) = server
        .call(
            Some(&viewer_secret),
            Method::POST,
            "/api/v1/tokens",
            Some(&json!({"name": "sneaky", "role": "admin"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, log) = server.get("/api/v1/audit").await;
    assert_eq!(status, StatusCode::OK, "{log:#}");
    assert_eq!(
        actions(&log),
        [
            "token.delete",
            "token.create",
            "cluster.snapshot",
            "token.create",
            "policy.delete",
            "policy.upload",
            "run.create",
            "profile.put",
            "cluster.snapshot",
        ],
        "newest first: {log:#}"
    );
    let items = log["items"].as_array().unwrap();
    let push = &items[8];
    assert_eq!(push["actor"]["name"], ENV_ACTOR);
    assert_eq!(push["actor"]["role"], "admin");
    assert!(push["actor"]["id"].is_i64());
    assert_eq!(push["object"], json!({"kind": "cluster", "id": "east"}));
    assert_eq!(push["detail"]["created"], true);
    assert_eq!(push["detail"]["nodes"], 3);
    assert!(push["time"].as_str().unwrap().ends_with('Z'));
    let by_bot = &items[2];
    assert_eq!(by_bot["actor"]["name"], "release-bot");
    assert_eq!(by_bot["actor"]["id"], bot_id);
    assert_eq!(by_bot["object"]["id"], "west");
    assert_eq!(
        items[6]["object"],
        json!({"kind": "run", "id": run["id"].as_i64().unwrap().to_string()})
    );
    assert_eq!(items[6]["detail"]["profile"], "dups");
    assert_eq!(items[5]["object"], json!({"kind": "policy", "id": policy}));
    assert_eq!(
        items[1]["detail"],
        json!({"name": "viewer", "role": "viewer", "expiresAt": null})
    );
    assert_eq!(items[0]["object"]["id"], viewer_id.to_string());

    // Filters.
    let (_, mine) = server.get("/api/v1/audit?actor=release-bot").await;
    assert_eq!(actions(&mine), ["cluster.snapshot"]);
    let (_, tokens) = server.get("/api/v1/audit?kind=token").await;
    assert_eq!(
        actions(&tokens),
        ["token.delete", "token.create", "token.create"]
    );
    let (_, created) = server.get("/api/v1/audit?action=token.create").await;
    assert_eq!(created["items"].as_array().unwrap().len(), 2);
    let (_, east) = server.get("/api/v1/audit?kind=cluster&object=east").await;
    assert_eq!(actions(&east), ["cluster.snapshot"]);
    let (_, future) = server.get("/api/v1/audit?since=2999-01-01T00:00:00Z").await;
    assert_eq!(future["items"], json!([]));
    let (_, past) = server
        .get("/api/v1/audit?since=2000-01-01T00:00:00%2B02:00")
        .await;
    assert_eq!(past["items"].as_array().unwrap().len(), 9);
    let (status, body) = server.get("/api/v1/audit?since=yesterday").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    crate::support::assert_error(&body, "invalid_query");

    // Pages of 4, following `next`.
    let mut seen = Vec::new();
    let mut path = "/api/v1/audit?limit=4".to_string();
    loop {
        let (status, page) = server.get(&path).await;
        assert_eq!(status, StatusCode::OK);
        seen.extend(actions(&page));
        match page["next"].as_str() {
            Some(next) => path = format!("/api/v1/audit?limit=4&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen, actions(&log));
}

#[tokio::test]
async fn the_audit_log_cannot_be_altered() {
    let server = TestServer::start().await;
    server.create_token("someone", "viewer").await;
    let (_, log) = server.get("/api/v1/audit").await;
    assert_eq!(actions(&log), ["token.create"]);

    // No API changes it…
    for method in [Method::DELETE, Method::PUT, Method::POST, Method::PATCH] {
        let (status, _) = server
            .call(
                Some(crate::support::ADMIN_TOKEN),
                method.clone(),
                "/api/v1/audit",
                Some(&json!({})),
            )
            .await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
    // …and the database refuses updates and deletes too.
    let pool = server.state().store.pool();
    for sql in [
        "UPDATE audit_log SET actor_name = 'nobody'",
        "DELETE FROM audit_log",
    ] {
        let err = sqlx::query(sql).execute(pool).await.unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    let (_, after) = server.get("/api/v1/audit").await;
    assert_eq!(after, log);
}

/// The two settings documents: replacing a profile's auto-approve rules and the arbitration
/// knobs are recorded with what was set; a refused (invalid) change is not.
#[tokio::test]
async fn auto_approve_rules_and_arbitration_knobs_are_recorded() {
    let server = TestServer::start().await;
    server
        .put_profile("lifetime", &crate::support::lifetime_profile())
        .await;
    let rules = json!({"rules": [{"name": "web-pods", "plugins": ["PodLifeTime"], "namespaces": ["shop"]}]});
    let (status, body) = server
        .put_json("/api/v1/profiles/lifetime/auto-approve", &rules)
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let (status, knobs) = server
        .put_json("/api/v1/arbitration", &json!({"maxMigratingPerNode": 1}))
        .await;
    assert_eq!(status, StatusCode::OK, "{knobs:#}");
    let (status, _) = server
        .put_json("/api/v1/arbitration", &json!({"maxMigratingPerNod": 1}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    let (_, log) = server.get("/api/v1/audit").await;
    assert_eq!(
        actions(&log),
        ["arbitration.put", "profile.auto-approve", "profile.put"],
        "{log:#}"
    );
    let items = log["items"].as_array().unwrap();
    assert_eq!(
        items[0]["object"],
        json!({"kind": "arbitration", "id": "arbitration"})
    );
    assert_eq!(items[0]["detail"], knobs, "the knobs as stored");
    assert_eq!(
        items[1]["object"],
        json!({"kind": "profile", "id": "lifetime"})
    );
    assert_eq!(
        items[1]["detail"]["autoApprove"]["rules"][0]["name"],
        "web-pods"
    );
    assert_eq!(items[1]["actor"]["name"], ENV_ACTOR);
}

/// docs/api.md's table of audit actions lists exactly the actions the server records.
#[test]
fn the_documented_audit_actions_are_the_recorded_ones() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"))
        .expect("docs/api.md");
    let section = docs
        .split("## Audit log")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("an Audit log section");
    let mut documented: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let first = l.split('|').nth(1).unwrap_or_default().to_string();
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    documented.sort();
    let mut recorded: Vec<String> = rebalancer_server::audit::action::ALL
        .iter()
        .map(|a| a.to_string())
        .collect();
    recorded.sort();
    assert_eq!(documented, recorded);
}
