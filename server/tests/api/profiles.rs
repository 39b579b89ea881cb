//! Profiles: DeschedulerPolicy documents in, validated against the registered policies.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error};

fn policy(plugin_config: Value, plugins: Value) -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{"name": "default", "pluginConfig": plugin_config, "plugins": plugins}]
    })
}

fn errors(body: &Value) -> Vec<(String, String)> {
    body["details"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no details.errors: {body:#}"))
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn default_profile_exists_and_profiles_round_trip() {
    let server = TestServer::start().await;

    let (status, default) = server.get("/api/v1/profiles/default").await;
    assert_eq!(status, StatusCode::OK, "{default:#}");
    assert_eq!(default["document"]["kind"], "DeschedulerPolicy");
    let set = &default["spec"]["pluginSets"][0];
    assert_eq!(set["name"], "default");
    assert_eq!(set["balance"][0]["name"], "RemoveDuplicates");
    assert_eq!(set["balance"][2]["name"], "LowNodeUtilization");
    assert_eq!(
        set["deschedule"][0]["name"],
        "RemovePodsHavingTooManyRestarts"
    );
    assert_eq!(
        set["evictorArgs"]["podProtections"]["extraEnabled"],
        json!(["PodsWithPVC"])
    );

    let document = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": 2,
        "gracePeriodSeconds": 30,
        "profiles": [{
            "name": "balance",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"minReplicas": 2}},
                {"name": "LowNodeUtilization", "args": {
                    "thresholds": {"cpu": 20, "memory": 20},
                    "targetThresholds": {"cpu": 60, "memory": 60}
                }}
            ],
            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}
        }]
    });
    let (status, created) = server.put_json("/api/v1/profiles/tight", &document).await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    assert_eq!(created["name"], "tight");
    assert_eq!(created["document"], document);
    assert_eq!(created["spec"]["maxPerNode"], 2);
    assert_eq!(
        created["warnings"],
        json!([]),
        "gracePeriodSeconds is applied"
    );

    let (status, replaced) = server.put_json("/api/v1/profiles/tight", &document).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(replaced["createdAt"], created["createdAt"]);

    let (status, got) = server.get("/api/v1/profiles/tight").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["document"], document);

    // YAML, as a descheduler user keeps it.
    let yaml = "\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: dedupe
    pluginConfig:
      - name: RemoveDuplicates
        args:
          excludeOwnerKinds: [Job]
    plugins:
      balance:
        enabled: [RemoveDuplicates]
      preEvictionFilter:
        enabled: [DefaultEvictor]
";
    let (status, from_yaml) = server
        .put_bytes("/api/v1/profiles/from-yaml", "application/yaml", yaml)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{from_yaml:#}");
    assert_eq!(
        from_yaml["document"]["profiles"][0]["pluginConfig"][0]["args"]["excludeOwnerKinds"],
        json!(["Job"])
    );

    // Exported back as DeschedulerPolicy YAML, which parses to the same document.
    let response = server
        .client
        .get(server.url("/api/v1/profiles/from-yaml"))
        .header("accept", "application/yaml, application/json;q=0.5")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/yaml"
    );
    let exported: Value = serde_yaml::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(exported, from_yaml["document"]);
    assert_eq!(exported["kind"], "DeschedulerPolicy");
    // JSON stays the default, and wins when listed first.
    let response = server
        .client
        .get(server.url("/api/v1/profiles/from-yaml"))
        .header("accept", "application/json, application/yaml")
        .send()
        .await
        .unwrap();
    let view: Value = response.json().await.unwrap();
    assert_eq!(view["name"], "from-yaml");

    let (_, all) = server.get("/api/v1/profiles").await;
    let names: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "from-yaml", "tight"]);

    let (status, error) = server.get("/api/v1/profiles/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&error, "not_found");
}

#[tokio::test]
async fn invalid_documents_are_refused_with_every_problem_located() {
    let server = TestServer::start().await;

    // Unknown plugin: 422 naming it and where it is enabled.
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/x",
            &policy(
                json!([{"name": "RemovePodsViolatingPodAffinity"}]),
                json!({"deschedule": {"enabled": ["RemovePodsViolatingPodAffinity"]}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let message = assert_error(&body, "invalid_profile");
    assert!(
        message.contains("RemovePodsViolatingPodAffinity"),
        "{message}"
    );
    let found = errors(&body);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "profiles[0].plugins.deschedule.enabled[0]");
    assert!(found[0].1.contains("unknown plugin"), "{found:?}");

    // Args the policy refuses, located inside pluginConfig.
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/x",
            &policy(
                json!([
                    {"name": "RemoveDuplicates"},
                    {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20}}}
                ]),
                json!({"balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization"]}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert_error(&body, "invalid_profile");
    let found = errors(&body);
    assert!(!found.is_empty());
    assert!(
        found
            .iter()
            .all(|(field, _)| field.starts_with("profiles[0].pluginConfig[1].args")),
        "{found:?}"
    );

    // A plugin at an extension point it does not implement.
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/x",
            &policy(
                json!([{"name": "RemoveDuplicates"}]),
                json!({"deschedule": {"enabled": ["RemoveDuplicates"]}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        errors(&body)[0]
            .1
            .contains("does not implement the deschedule")
    );

    // Unknown and misplaced fields, all reported at once.
    let mut document = policy(
        json!([{"name": "RemoveDuplicates"}]),
        json!({"balance": {"enabled": ["RemoveDuplicates"]}}),
    );
    document["maxNoOfPodsToEvict"] = json!(3);
    document["profiles"][0]["nodeSelector"] = json!("pool=a");
    let (status, body) = server.put_json("/api/v1/profiles/x", &document).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let fields: Vec<String> = errors(&body).into_iter().map(|(f, _)| f).collect();
    assert_eq!(fields, ["maxNoOfPodsToEvict", "profiles[0].nodeSelector"]);

    // Not JSON at all; not YAML at all; neither.
    let (status, body) = server
        .put_bytes("/api/v1/profiles/x", "application/json", "{nope")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_json");
    let (status, body) = server
        .put_bytes("/api/v1/profiles/x", "application/yaml", "a: [b")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_yaml");
    let (status, body) = server
        .put_bytes("/api/v1/profiles/x", "text/csv", "a,b")
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_error(&body, "unsupported_media_type");

    let (status, body) = server
        .put_json("/api/v1/profiles/Bad%20Name", &json!({}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_name");

    // None of these left a profile behind.
    let (status, _) = server.get("/api/v1/profiles/x").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_plugin_with_400000_arg_errors_gets_a_bounded_422() {
    let server = TestServer::start().await;
    server
        .upload(crate::support::policy_module("test_misbehaving.wasm"))
        .await;
    // Two plugin sets enable the hostile plugin; its validate-args returns 400,000 errors each
    // time. The engine keeps 100 per call (plus a count); the 422 lists 100 problems in all.
    let set = |name: &str| {
        json!({
            "name": name,
            "pluginConfig": [{"name": "TestMisbehaving",
                              "args": {"behaviour": "flood-arg-errors", "count": 400_000}}],
            "plugins": {"deschedule": {"enabled": ["TestMisbehaving"]}}
        })
    };
    let document = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [set("a"), set("b")]
    });
    let (status, body) = server.put_json("/api/v1/profiles/flood", &document).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let message = assert_error(&body, "invalid_profile");
    // 101 per plugin set: the policy's first 100 and the engine's count of the rest.
    assert!(
        message.starts_with("the DeschedulerPolicy has 202 problems"),
        "{message}"
    );
    let listed = errors(&body);
    assert_eq!(listed.len(), 101);
    assert!(listed[0].0.starts_with("profiles[0]"), "{:?}", listed[0]);
    assert!(
        listed[100]
            .1
            .starts_with("… and 102 more problems (202 in all"),
        "{:?}",
        listed[100]
    );
    let size = serde_json::to_vec(&body).unwrap().len();
    assert!(size < 64 << 10, "a {size}-byte 422 body");
    let (status, _) = server.get("/api/v1/profiles/flood").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_body_with_problems_of_every_kind_gets_them_all_at_their_paths_in_the_body() {
    let server = TestServer::start().await;
    let mut document = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "first",
                "pluginConfig": [
                    // A type error deep inside a plugin's args.
                    {"name": "LowNodeUtilization",
                     "args": {"thresholds": {"cpu": "twenty"}, "targetThresholds": {"cpu": 50}}}
                ],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}
            },
            {
                "name": "second",
                "pluginConfig": [{"name": "RemoveDuplicates"}],
                // A plugin without a pluginConfig entry (and not registered either).
                "plugins": {"balance": {"enabled": ["RemoveDuplicates", "NoSuchPlugin"]}}
            }
        ]
    });
    // A misplaced field, found while reading the document.
    document["profiles"][1]["nodeSelector"] = json!("pool=a");
    let (status, body) = server.put_json("/api/v1/profiles/mixed", &document).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let message = assert_error(&body, "invalid_profile");
    assert!(message.contains("3 problems"), "{message}");
    let found = errors(&body);
    let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "profiles[1].nodeSelector",
            "profiles[1].plugins.balance.enabled[1]",
            "profiles[0].pluginConfig[0].args.thresholds.cpu",
        ],
        "{found:#?}"
    );
    // The args error speaks of the value, not of a line and column in a fragment the client
    // never sent.
    let (_, args_message) = &found[2];
    assert!(!args_message.contains("line"), "{args_message}");
    assert!(
        args_message.contains("twenty") || args_message.contains("string"),
        "{args_message}"
    );
}
