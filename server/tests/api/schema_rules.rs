//! The OpenAPI document says what the server accepts (issue #25): each rule schemathesis found
//! the server enforcing without the document saying so is now in the document, and the server
//! keeps to it both ways. Each test reads the rule from the served document and checks the
//! server on a body inside it and one outside; `.ci/api-contract` explores the rest.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, lifetime_profile, small_cluster};

async fn document(server: &TestServer) -> Value {
    let (status, doc) = server.get("/api-docs/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    doc
}

fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let schema = &doc["components"]["schemas"][name];
    assert!(schema.is_object(), "no schema {name}");
    schema
}

/// The `allOf` rule (the second item) `http::docs` adds to a schema.
fn rule<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let all_of = schema(doc, name)["allOf"]
        .as_array()
        .unwrap_or_else(|| panic!("{name} has no allOf: {:#}", schema(doc, name)));
    assert_eq!(all_of.len(), 2, "{name}");
    &all_of[1]
}

/// JSON Schema counts `192.0` as an integer, and so does the server, wherever the document
/// says integer: typed bodies, raw JSON documents, YAML documents and policy args alike. A
/// fraction, or an integer beyond the field's range, is still refused.
#[tokio::test]
async fn integers_may_be_written_with_a_zero_fraction() {
    let server = TestServer::start().await;
    server.push("c1", &small_cluster()).await;
    let doc = document(&server).await;
    let interval = &schema(&doc, "ScheduleRequest")["allOf"][0]["properties"]["intervalSeconds"];
    assert_eq!(interval["type"], json!(["integer", "null"]), "{interval:#}");

    // A typed body (`ApiJson`).
    let mut profile = lifetime_profile();
    profile["maxNoOfPodsToEvictPerNode"] = json!(2.0);
    profile["profiles"][0]["pluginConfig"][0]["args"]["maxPodLifeTimeSeconds"] = json!(6e1);
    let stored = server.put_profile("old", &profile).await;
    assert_eq!(stored["spec"]["maxPerNode"], 2, "{stored:#}");
    assert_eq!(stored["document"]["maxNoOfPodsToEvictPerNode"], 2);
    let (status, schedule) = server
        .post_json(
            "/api/v1/schedules",
            &json!({"cluster": "c1", "profile": "old", "intervalSeconds": 300.0,
                    "debounceSeconds": 3e1, "enabled": false}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{schedule:#}");
    assert_eq!(
        (&schedule["intervalSeconds"], &schedule["debounceSeconds"]),
        (&json!(300), &json!(30))
    );
    let (status, knobs) = server
        .put_json(
            "/api/v1/arbitration",
            &json!({"maxMigratingPerNode": 3.0, "evictBurst": 2.0, "evictQPS": 2.0,
                    "objectLimiters": {"namespace": {"duration": "1m", "maxMigrating": 4.0}}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{knobs:#}");
    assert_eq!(knobs["maxMigratingPerNode"], 3);
    assert_eq!(knobs["objectLimiters"]["namespace"]["maxMigrating"], 4);

    // A YAML document, and policy args the guest reads as integers.
    let yaml = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n\
                maxNoOfPodsToEvictTotal: 5.0\nprofiles:\n- name: p\n  pluginConfig:\n  \
                - name: PodLifeTime\n    args: {maxPodLifeTimeSeconds: 60.0}\n  \
                plugins: {deschedule: {enabled: [PodLifeTime]}}\n";
    let (status, stored) = server
        .send(
            server
                .client
                .put(server.url("/api/v1/profiles/yaml"))
                .header("Content-Type", "application/yaml")
                .body(yaml),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{stored:#}");
    assert_eq!(stored["spec"]["maxTotal"], 5);
    let (status, run) = server.run("c1", "yaml").await;
    assert!(status.is_success(), "{status}: {run:#}");

    // Still refused: a fraction, a negative count, an integer below i64::MIN (serde_json reads
    // it as a float that rounds to -2^63), and a bad integer inside policy args.
    for (interval, code) in [(300.5, "invalid_request"), (-3.0, "invalid_schedule")] {
        let body = json!({"cluster": "c1", "profile": "old", "intervalSeconds": interval});
        let (status, error) = server.post_json("/api/v1/schedules", &body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {error:#}"
        );
        let message = assert_error(&error, code);
        assert!(message.contains("intervalSeconds"), "{message}");
    }
    let (status, error) = server
        .send(
            server
                .client
                .post(server.url("/api/v1/decisions/approve"))
                .header("Content-Type", "application/json")
                .body(r#"{"ids": [-9223372036854775809]}"#),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error:#}");
    assert!(assert_error(&error, "invalid_request").contains("ids"));
    profile["profiles"][0]["pluginConfig"][0]["args"]["maxPodLifeTimeSeconds"] = json!(60.5);
    let (status, error) = server.put_json("/api/v1/profiles/old", &profile).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error:#}");
    assert!(assert_error(&error, "invalid_profile").contains("maxPodLifeTimeSeconds"));
}

/// `expiresIn` and `expiresAt`: either, or neither, not both.
#[tokio::test]
async fn a_token_expires_in_seconds_or_at_a_time_not_both() {
    let server = TestServer::start().await;
    let doc = document(&server).await;
    let rule = rule(&doc, "CreateToken");
    assert_eq!(
        rule["anyOf"],
        json!([
            {"type": "object", "properties": {"expiresIn": {"type": "null"}}},
            {"type": "object", "properties": {"expiresAt": {"type": "null"}}}
        ]),
        "{rule:#}"
    );
    let at = "2099-01-31T00:00:00Z";
    for (name, expiry) in [
        ("in", json!({"expiresIn": 60})),
        ("at", json!({"expiresAt": at})),
        ("never", json!({})),
        ("null-at", json!({"expiresIn": 60, "expiresAt": null})),
    ] {
        let mut body = json!({"name": name, "role": "viewer"});
        body.as_object_mut()
            .unwrap()
            .extend(expiry.as_object().unwrap().clone());
        let (status, token) = server.post_json("/api/v1/tokens", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{body}: {token:#}");
    }
    let (status, error) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "both", "role": "viewer", "expiresIn": 60, "expiresAt": at}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error:#}");
    assert!(assert_error(&error, "invalid_expiry").contains("not both"));
}

/// The namespace limiter needs a positive count; a limiter's count is never 0.
#[tokio::test]
async fn the_namespace_limiter_needs_a_positive_count() {
    let server = TestServer::start().await;
    let doc = document(&server).await;
    let namespace = &schema(&doc, "ObjectLimitersConfig")["properties"]["namespace"];
    let limited = &namespace["oneOf"][0];
    assert_eq!(
        limited["required"],
        json!(["duration", "maxMigrating"]),
        "{namespace:#}"
    );
    assert_eq!(limited["properties"]["maxMigrating"]["minimum"], 1);
    // The rest is LimiterConfig's.
    let limiter = schema(&doc, "LimiterConfig");
    for field in ["duration", "burst"] {
        assert_eq!(
            limited["properties"][field], limiter["properties"][field],
            "{field}"
        );
    }
    assert_eq!(limited["additionalProperties"], false);
    assert_eq!(namespace["oneOf"][1], json!({"type": "null"}));
    let tokens = &schema(&doc, "LimiterConfig")["properties"]["maxMigrating"]["oneOf"][0];
    assert_eq!(tokens["minimum"], 1, "{tokens:#}");

    let put = |limiters: Value| {
        let server = &server;
        async move {
            server
                .put_json("/api/v1/arbitration", &json!({"objectLimiters": limiters}))
                .await
        }
    };
    let (status, knobs) = put(json!({"namespace": {"duration": "1m", "maxMigrating": 1}})).await;
    assert_eq!(status, StatusCode::OK, "{knobs:#}");
    for (limiters, field) in [
        (
            json!({"namespace": {"duration": "1m"}}),
            "objectLimiters.namespace.maxMigrating",
        ),
        (
            json!({"namespace": {"duration": "1m", "maxMigrating": 0}}),
            "objectLimiters.namespace.maxMigrating",
        ),
        (
            json!({"namespace": {"duration": "1m", "maxMigrating": "10%"}}),
            "objectLimiters.namespace.maxMigrating",
        ),
        (
            json!({"workload": {"duration": "1m", "maxMigrating": 0}}),
            "objectLimiters.workload.maxMigrating",
        ),
    ] {
        let (status, error) = put(limiters.clone()).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{limiters}: {error:#}"
        );
        assert_error(&error, "invalid_config");
        assert_eq!(error["details"]["errors"][0]["field"], field, "{error:#}");
    }
}

/// `In`/`NotIn` take one or more values, `Exists`/`DoesNotExist` none; label keys and values
/// follow Kubernetes' grammar.
#[tokio::test]
async fn a_selector_requirement_has_values_as_its_operator_says() {
    let server = TestServer::start().await;
    server.put_profile("p", &lifetime_profile()).await;
    let doc = document(&server).await;
    let rule = rule(&doc, "LabelSelectorRequirement");
    let alternatives = rule["oneOf"].as_array().unwrap();
    assert_eq!(
        alternatives[0]["properties"]["operator"]["enum"],
        json!(["In", "NotIn"])
    );
    assert_eq!(alternatives[0]["required"], json!(["values"]));
    assert_eq!(alternatives[0]["properties"]["values"]["minItems"], 1);
    assert_eq!(
        alternatives[1]["properties"]["operator"]["enum"],
        json!(["Exists", "DoesNotExist"])
    );
    assert_eq!(alternatives[1]["properties"]["values"]["maxItems"], 0);
    let labels = &schema(&doc, "LabelSelector")["properties"]["matchLabels"];
    assert!(labels["propertyNames"]["pattern"].is_string(), "{labels:#}");
    assert!(
        labels["additionalProperties"]["pattern"].is_string(),
        "{labels:#}"
    );

    let put = |selector: Value| {
        let server = &server;
        async move {
            server
                .put_json(
                    "/api/v1/profiles/p/auto-approve",
                    &json!({"rules": [{"name": "r", "podSelector": selector}]}),
                )
                .await
        }
    };
    for accepted in [
        json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}),
        json!({"matchExpressions": [{"key": "example.com/tier", "operator": "Exists"}]}),
        json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist", "values": []}]}),
        json!({"matchLabels": {"app.kubernetes.io/name": "web", "tier": ""}}),
    ] {
        let (status, body) = put(accepted.clone()).await;
        assert_eq!(status, StatusCode::OK, "{accepted}: {body:#}");
    }
    for refused in [
        json!({"matchExpressions": [{"key": "tier", "operator": "In"}]}),
        json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": []}]}),
        json!({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]}),
        json!({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}),
        json!({"matchLabels": {"": "web"}}),
        json!({"matchLabels": {"tier": "-web"}}),
    ] {
        let (status, body) = put(refused.clone()).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{refused}: {body:#}"
        );
        assert_error(&body, "invalid_rules");
    }
}

/// A snapshot item needs its `kind` and `metadata.name`; a DeschedulerPolicy its `apiVersion`,
/// `kind` and `profiles`.
#[tokio::test]
async fn documents_mark_the_fields_they_need() {
    let server = TestServer::start().await;
    let doc = document(&server).await;
    let item = &schema(&doc, "SnapshotList")["properties"]["items"]["items"];
    assert_eq!(item["required"], json!(["kind", "metadata"]), "{item:#}");
    assert_eq!(item["properties"]["metadata"]["required"], json!(["name"]));
    let policy = schema(&doc, "DeschedulerPolicy");
    assert_eq!(
        policy["required"],
        json!(["apiVersion", "kind", "profiles"]),
        "{policy:#}"
    );
    let body = &doc["paths"]["/api/v1/profiles/{name}"]["put"]["requestBody"]["content"];
    for media in ["application/json", "application/yaml"] {
        assert_eq!(
            body[media]["schema"]["$ref"],
            "#/components/schemas/DeschedulerPolicy"
        );
    }

    for (item, field) in [
        (json!({"metadata": {"name": "a"}}), "kind"),
        (json!({"kind": "", "metadata": {"name": "a"}}), "kind"),
        (json!({"kind": "Widget"}), "metadata.name"),
    ] {
        let (status, error) = server
            .put_json(
                "/api/v1/clusters/c/snapshot?allowEmpty=true",
                &json!({"kind": "List", "items": [item]}),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{item}: {error:#}"
        );
        assert_error(&error, "invalid_object");
        assert_eq!(error["details"]["field"], field, "{error:#}");
    }
    let (status, pushed) = server
        .put_json(
            "/api/v1/clusters/c/snapshot?allowEmpty=true",
            &json!({"kind": "List", "items": [{"kind": "Widget", "metadata": {"name": "a"}}]}),
        )
        .await;
    assert!(status.is_success(), "{status}: {pushed:#}");

    let (status, error) = server.put_json("/api/v1/profiles/p", &json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error:#}");
    let fields: Vec<&Value> = error["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["field"])
        .collect();
    assert_eq!(
        fields,
        [&json!("apiVersion"), &json!("kind"), &json!("profiles")]
    );
    // What the schema allows anything in is accepted whatever it holds.
    let mut profile = lifetime_profile();
    profile["metricsProviders"] = json!([[null, null]]);
    profile["metricsCollector"] = json!("x");
    server.put_profile("p", &profile).await;
}
