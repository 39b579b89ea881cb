//! Health, readiness, OpenAPI, Swagger UI and the generic error behaviour; the OpenAPI
//! document's structural rules (what openapi-spec-validator and schemathesis found wanting, so
//! a regression shows in `cargo test` without Python; `.ci/api-contract` runs both tools).

use regex::Regex;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, small_cluster};

#[tokio::test]
async fn health_openapi_and_swagger_ui() {
    let server = TestServer::start().await;

    let (status, body) = server.get("/healthz").await;
    assert_eq!((status, &body["status"]), (StatusCode::OK, &"ok".into()));
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["status"], "ready");
    assert!(body["policies"].as_u64().unwrap() >= 2, "{body:#}");

    // The OpenAPI document lists every route with its methods.
    let (status, doc) = server.get("/api-docs/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    let expected = [
        ("/healthz", vec!["get"]),
        ("/readyz", vec!["get"]),
        ("/api/v1/clusters", vec!["get"]),
        ("/api/v1/clusters/{name}", vec!["delete", "get"]),
        ("/api/v1/clusters/{name}/snapshot", vec!["put"]),
        ("/api/v1/clusters/{name}/nodes", vec!["get"]),
        ("/api/v1/clusters/{name}/pods", vec!["get"]),
        ("/api/v1/policies", vec!["get", "post"]),
        ("/api/v1/policies/{name}", vec!["delete", "get"]),
        ("/api/v1/profiles", vec!["get"]),
        ("/api/v1/profiles/{name}", vec!["delete", "get", "put"]),
        ("/api/v1/runs", vec!["get", "post"]),
        ("/api/v1/runs/{id}", vec!["get"]),
        ("/api/v1/decisions", vec!["get"]),
        ("/api/v1/decisions/{id}", vec!["get"]),
        ("/api/v1/decisions/{id}/approve", vec!["post"]),
        ("/api/v1/decisions/{id}/reject", vec!["post"]),
        ("/api/v1/decisions/approve", vec!["post"]),
        ("/api/v1/decisions/reject", vec!["post"]),
        ("/api/v1/profiles/{name}/auto-approve", vec!["get", "put"]),
        ("/api/v1/pod-migrations", vec!["get"]),
        ("/api/v1/pod-migrations/{id}", vec!["get"]),
        ("/api/v1/pod-migrations/{id}/abort", vec!["post"]),
        ("/api/v1/arbitration", vec!["get", "put"]),
        (
            "/api/v1/clusters/{name}/arbitration",
            vec!["delete", "get", "put"],
        ),
        ("/metrics", vec!["get"]),
        ("/api/v1/schedules", vec!["get", "post"]),
        ("/api/v1/schedules/{id}", vec!["delete", "get", "put"]),
        ("/api/v1/tokens", vec!["get", "post"]),
        ("/api/v1/tokens/{id}", vec!["delete"]),
        ("/api/v1/audit", vec!["get"]),
        ("/api/v1/whoami", vec!["get"]),
        ("/api/v1/events", vec!["get"]),
        ("/api/v1/retention", vec!["get", "put"]),
        ("/api/v1/webhooks", vec!["get", "post"]),
        ("/api/v1/webhooks/{id}", vec!["delete", "get"]),
        ("/api/v1/webhooks/{id}/test", vec!["post"]),
        ("/api/v1/webhooks/{id}/enable", vec!["post"]),
        ("/api/v1/webhooks/{id}/deliveries", vec!["get"]),
        ("/api/v1/webhooks/{id}/deliveries/{deliveryId}", vec!["get"]),
        ("/api/v1/clusters/{name}/balance", vec!["get"]),
        ("/api/v1/clusters/{name}/what-if", vec!["post"]),
    ];
    let paths = doc["paths"].as_object().expect("paths");
    assert_eq!(paths.len(), expected.len(), "{:?}", paths.keys());
    for (path, methods) in expected {
        let item = paths
            .get(path)
            .unwrap_or_else(|| panic!("{path} is not documented"));
        let mut got: Vec<&str> = item
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .filter(|k| ["get", "put", "post", "delete", "patch"].contains(k))
            .collect();
        got.sort();
        assert_eq!(got, methods, "{path}");
        for method in methods {
            let responses = item[method]["responses"].as_object().unwrap();
            assert!(!responses.is_empty(), "{method} {path} has no responses");
            // A body that stops arriving is answered 408 (--body-idle-timeout).
            if ["put", "post"].contains(&method) {
                assert!(responses.contains_key("408"), "{method} {path}: no 408");
            }
        }
    }
    // The snapshot push documents what it refuses: an empty List (409), no free slot (503),
    // and the query parameter that allows an empty List.
    let push = &paths["/api/v1/clusters/{name}/snapshot"]["put"];
    for code in ["200", "201", "400", "409", "413", "415", "422", "503"] {
        assert!(
            push["responses"].get(code).is_some(),
            "PUT snapshot: {code} undocumented"
        );
    }
    let parameters: Vec<&str> = push["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(parameters.contains(&"allowEmpty"), "{parameters:?}");
    assert!(parameters.contains(&"observedAt"), "{parameters:?}");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for schema in [
        "ErrorBody",
        "ClusterView",
        "PolicyView",
        "ProfileView",
        "RunView",
        "DecisionView",
    ] {
        assert!(schemas.contains_key(schema), "{schema} missing");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );

    // Swagger UI, with its assets served by the binary (no CDN).
    let response = server
        .client
        .get(server.url("/docs/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let html = response.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("unpkg.com") && !html.contains("cdn."),
        "{html}"
    );
    let (status, _) = server.get("/docs").await;
    assert_eq!(status, StatusCode::OK, "/docs redirects to the UI");
    let css = server
        .client
        .get(server.url("/docs/swagger-ui.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(css.status(), StatusCode::OK);
    let config = server.get("/docs/swagger-initializer.js").await;
    assert_eq!(config.0, StatusCode::OK);
    assert!(
        config
            .1
            .as_str()
            .unwrap_or_default()
            .contains("/api-docs/openapi.json"),
        "{:#}",
        config.1
    );
}

#[tokio::test]
async fn errors_have_one_shape_and_unknown_bearer_tokens_are_refused() {
    let server = TestServer::start().await;

    let (status, body) = server.get("/api/v1/nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(assert_error(&body, "not_found").contains("/api/v1/nothing-here"));

    let (status, body) = server.get("/api/v1/clusters/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        assert_error(&body, "not_found"),
        "cluster \"nope\" does not exist"
    );

    let (status, body) = server.get("/api/v1/runs/not-a-number").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_path");

    // The audit log is append-only: no method changes it, and the answer says so in JSON.
    let (status, body) = server.delete("/api/v1/audit").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body:#}");
    assert!(assert_error(&body, "method_not_allowed").contains("DELETE"));

    let (status, body) = server
        .send(
            server
                .client
                .get(server.url("/api/v1/clusters"))
                .bearer_auth("not-a-token-of-this-server"),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body:#}");
    assert_error(&body, "invalid_token");
    let (status, body) = server.get("/api/v1/clusters").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["items"], serde_json::json!([]));
}

#[tokio::test]
async fn the_api_answers_503_until_ready() {
    let (mut server, _dir) = TestServer::spawn_unready().await;
    let client = reqwest::Client::new();
    let base = format!("http://{}", server.addr);
    // Compiling the built-in policies takes far longer than a local round trip.
    let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.headers()["retry-after"], "1");
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_error(&body, "not_ready");
    let api = client
        .get(format!("{base}/api/v1/policies"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::SERVICE_UNAVAILABLE);
    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);

    server.wait_ready().await.unwrap();
    let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    server.stop().await.unwrap();
}

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// Every operation of the document: (method, path, operation).
fn operations(doc: &Value) -> Vec<(&'static str, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                out.push((method, path.clone(), operation));
            }
        }
    }
    out
}

/// A response object, following a `$ref` into `components/responses`.
fn resolve<'a>(doc: &'a Value, response: &'a Value) -> &'a Value {
    match response["$ref"].as_str() {
        Some(reference) => {
            let name = reference
                .strip_prefix("#/components/responses/")
                .unwrap_or_else(|| panic!("unexpected $ref {reference}"));
            &doc["components"]["responses"][name]
        }
        None => response,
    }
}

/// The description of the response `status` of an operation ("" when it has none).
fn described<'a>(doc: &'a Value, operation: &'a Value, status: &str) -> Option<&'a str> {
    operation["responses"]
        .get(status)
        .map(|r| resolve(doc, r)["description"].as_str().unwrap_or_default())
}

/// Every `$ref` of the document, with where it stands.
fn references<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a str)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child.as_str()) {
                    ("$ref", Some(target)) => out.push((at.clone(), target)),
                    _ => references(child, format!("{at}/{key}"), out),
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                references(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// A `$ref` to a component that is not in the document makes the whole document invalid for
/// every client generator (openapi-spec-validator refuses it): e.g. an enum used only as a
/// query parameter, which utoipa does not register by itself.
#[tokio::test]
async fn every_reference_of_the_openapi_document_resolves() {
    let server = TestServer::start().await;
    let (status, doc) = server.get("/api-docs/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let mut found = Vec::new();
    references(&doc, String::new(), &mut found);
    assert!(found.len() > 100, "only {} references", found.len());
    let dangling: Vec<String> = found
        .iter()
        .filter(|(_, target)| {
            let pointer = target.strip_prefix('#').unwrap_or(target);
            doc.pointer(pointer).is_none()
        })
        .map(|(at, target)| format!("{at} -> {target}"))
        .collect();
    assert!(dangling.is_empty(), "dangling references: {dangling:#?}");
}

#[tokio::test]
async fn the_openapi_document_follows_its_structural_rules() {
    let server = TestServer::start().await;
    let (status, doc) = server.get("/api-docs/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let all = operations(&doc);
    assert_eq!(all.len(), 59, "every route");

    let mut problems = Vec::new();
    for (method, path, operation) in &all {
        let at = format!("{} {path}", method.to_uppercase());
        let responses = operation["responses"].as_object().expect("responses");
        // OpenAPI requires a description on every response object.
        for (status, response) in responses {
            let description = resolve(&doc, response)["description"].as_str();
            if description.is_none_or(str::is_empty) {
                problems.push(format!("{at} {status}: no description"));
            }
        }
        // A path parameter the extractor cannot parse is a 400 `invalid_path`.
        if path.contains('{')
            && !described(&doc, operation, "400").is_some_and(|d| d.contains("`invalid_path`"))
        {
            problems.push(format!("{at}: no 400 naming `invalid_path`"));
        }
        // A JSON body that does not parse is a 400 `invalid_json` (`malformed_document` for a
        // snapshot, whose parser gives the line and column); a required JSON body without
        // Content-Type: application/json is a 415.
        let body = &operation["requestBody"];
        if body["content"].get("application/json").is_some() {
            let names_it = |d: &str| {
                d.contains("`invalid_json`")
                    || (path.ends_with("/snapshot") && d.contains("`malformed_document`"))
            };
            if !described(&doc, operation, "400").is_some_and(names_it) {
                problems.push(format!("{at}: no 400 naming `invalid_json`"));
            }
            if body["required"] == true && !responses.contains_key("415") {
                problems.push(format!("{at}: a required JSON body but no 415"));
            }
            if !responses.contains_key("413") {
                problems.push(format!("{at}: a body but no 413"));
            }
        }
        // Every /api/v1 route: the token (401/403), start-up (503), a server failure (500).
        if path.starts_with("/api/v1") {
            for status in ["401", "403", "500", "503"] {
                if !responses.contains_key(status) {
                    problems.push(format!("{at}: no {status}"));
                }
            }
        }
        // Every error answer has the API's error shape.
        for (status, response) in responses {
            if status.starts_with(['4', '5']) {
                let schema = &resolve(&doc, response)["content"]["application/json"]["schema"];
                if schema["$ref"] != "#/components/schemas/ErrorBody" {
                    problems.push(format!("{at} {status}: not an ErrorBody"));
                }
            }
        }
        // Pages: the range the server enforces, and the cursor's shape.
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            match parameter["name"].as_str() {
                Some("limit") => {
                    let schema = &parameter["schema"];
                    if schema["minimum"] != 1
                        || schema["maximum"] != rebalancer_server::http::page::MAX_PAGE
                    {
                        problems.push(format!("{at}: limit is not 1..=MAX_PAGE: {schema}"));
                    }
                }
                Some("cursor") if parameter["schema"]["pattern"].as_str().is_none() => {
                    problems.push(format!("{at}: cursor without a pattern"));
                }
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");

    // The id cursor pattern is the shape the server accepts.
    let runs = &doc["paths"]["/api/v1/runs"]["get"]["parameters"];
    let cursor = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "cursor")
        .unwrap();
    assert_eq!(
        cursor["schema"]["pattern"],
        rebalancer_server::http::page::ID_CURSOR_PATTERN
    );
}

/// The patterns and ranges of the document say what the server's checks say.
#[tokio::test]
async fn the_documents_constraints_match_the_servers_checks() {
    let doc = serde_json::to_value(rebalancer_server::http::openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let parameter = |path: &str, method: &str, name: &str| -> Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path}: no parameter {name}"))["schema"]
            .clone()
    };
    let anchored = |schema: &Value| {
        let pattern = schema["pattern"].as_str().expect("a pattern");
        let regex = Regex::new(pattern).unwrap();
        let max = schema["maxLength"].as_u64();
        move |text: &str| {
            regex.is_match(text) && max.is_none_or(|m| text.chars().count() as u64 <= m)
        }
    };

    // Cluster and profile names.
    let samples = [
        "a", "demo", "prod-1", "a.b_c", "0", "A", "Demo", "-a", "a-", ".a", "a.", "a b", "", "é",
        "a\n",
    ];
    let long = "a".repeat(63);
    let too_long = "a".repeat(64);
    for (path, method) in [
        ("/api/v1/clusters/{name}/snapshot", "put"),
        ("/api/v1/profiles/{name}", "put"),
    ] {
        let matches = anchored(&parameter(path, method, "name"));
        for name in samples
            .iter()
            .copied()
            .chain([long.as_str(), too_long.as_str()])
        {
            assert_eq!(
                matches(name),
                rebalancer_server::ingest::check_name(name).is_ok(),
                "{method} {path}: {name:?}"
            );
        }
    }

    // Token names.
    let token = &schemas["CreateToken"]["allOf"][0]["properties"];
    let matches = anchored(&token["name"]);
    assert_eq!(
        token["name"]["pattern"],
        rebalancer_server::auth::TOKEN_NAME_PATTERN
    );
    let hundred = "x".repeat(100);
    let over = "x".repeat(101);
    for name in [
        "ci",
        "Portal bot",
        "alice@example.com",
        "team/sre-1",
        " x",
        "x ",
        "",
        " ",
        "   ",
        "env:x",
        "a\nb",
        "a\tb",
        "Zoë",
        "\u{a0}",
        "a\n",
        &hundred,
        &over,
    ] {
        assert_eq!(
            matches(name),
            rebalancer_server::auth::check_token_name(name).is_ok(),
            "{name:?}"
        );
    }

    // Label keys and values (auto-approve pod selectors): the SDK's checks.
    let selector = &schemas["LabelSelector"]["properties"]["matchLabels"];
    let (key_matches, value_matches) = (
        anchored(&selector["propertyNames"]),
        anchored(&selector["additionalProperties"]),
    );
    let name63 = "n".repeat(63);
    let name64 = "n".repeat(64);
    let prefixed = format!("example.com/{name63}");
    for text in [
        "tier",
        "app.kubernetes.io/name",
        "a",
        "A-b_c.9",
        "",
        "-a",
        "a-",
        "a/b/c",
        "/a",
        "Example.com/a",
        "a..b/c",
        "a b",
        "é",
        "a\n",
        &name63,
        &name64,
        &prefixed,
    ] {
        let sdk = rebalancer_policy_sdk::k8s::selector::validate_label_key(text).is_ok();
        assert_eq!(key_matches(text), sdk, "key {text:?}");
        let sdk = rebalancer_policy_sdk::k8s::selector::validate_label_value(text).is_ok();
        assert_eq!(value_matches(text), sdk, "value {text:?}");
    }

    // Schedules: the range the server enforces.
    let max = rebalancer_server::http::schedules::MAX_SECONDS;
    let request = &schemas["ScheduleRequest"]["allOf"][0]["properties"];
    assert_eq!(request["intervalSeconds"]["minimum"], 1);
    assert_eq!(request["intervalSeconds"]["maximum"], max);
    assert_eq!(request["debounceSeconds"]["minimum"], 0);
    assert_eq!(request["debounceSeconds"]["maximum"], max);
}

/// What schemathesis found, as the server answers it now: each answer is the documented one.
#[tokio::test]
async fn answers_the_tools_found_undocumented_are_documented_or_fixed() {
    let server = TestServer::start().await;
    let (_, doc) = server.get("/api-docs/openapi.json").await;
    let documented = |method: &str, path: &str, status: StatusCode| {
        doc["paths"][path][method]["responses"]
            .get(status.as_str())
            .is_some()
    };

    // An id that is not an i64: 400 `invalid_path`, documented.
    let (status, body) = server.get("/api/v1/runs/9223372036854775808").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_path");
    assert!(documented("get", "/api/v1/runs/{id}", status));

    // `limit` outside 1..=1000 is refused with the range, not clamped; `cursor` must be one
    // the API hands out.
    for limit in ["0", "1001", "2147483648"] {
        let (status, body) = server.get(&format!("/api/v1/runs?limit={limit}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{limit}");
        let message = assert_error(&body, "invalid_query");
        assert!(message.contains("between 1 and 1000"), "{message}");
    }
    let (status, _) = server.get("/api/v1/runs?limit=1000").await;
    assert_eq!(status, StatusCode::OK);
    for cursor in ["", "-1", "%2B1", "1234567890123456789"] {
        let (status, body) = server.get(&format!("/api/v1/audit?cursor={cursor}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{cursor:?}");
        assert_error(&body, "invalid_cursor");
    }
    server.push("c", &small_cluster()).await;
    for cursor in ["1.x", "1", "-1.0", "1.%2B0", ".1"] {
        let (status, body) = server
            .get(&format!("/api/v1/clusters/c/pods?cursor={cursor}"))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{cursor}: {body:#}");
        assert_error(&body, "invalid_cursor");
    }

    // A JSON body without Content-Type: 415; not JSON: 400 `invalid_json`; both documented.
    let (status, body) = server
        .send(server.client.post(server.url("/api/v1/runs")).body("{}"))
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_error(&body, "unsupported_media_type");
    assert!(documented("post", "/api/v1/runs", status));
    let (status, body) = server
        .send(
            server
                .client
                .post(server.url("/api/v1/tokens"))
                .header("content-type", "application/json")
                .body("\0"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_json");
    assert!(documented("post", "/api/v1/tokens", status));

    // Where the document says object, an array is refused (serde alone takes one).
    let (status, body) = server
        .put_json(
            "/api/v1/arbitration",
            &json!({"objectLimiters": [null, null]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert_error(&body, "invalid_request");
    let (status, body) = server.put_json("/api/v1/arbitration", &json!([])).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/default/auto-approve",
            &json!({"rules": [{"name": "r", "podSelector": [null, null]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let (status, body) = server
        .put_json(
            "/api/v1/profiles/default/auto-approve",
            &json!({"rules": [["r"]]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");

    // A percentage is digits and `%`, nothing else.
    let (status, body) = server
        .put_json(
            "/api/v1/arbitration",
            &json!({"maxMigratingPerWorkload": "+5%"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");

    // `null` is a comment-less approval, as the document says (here: no such decision).
    let (status, body) = server
        .send(
            server
                .client
                .post(server.url("/api/v1/decisions/1/approve"))
                .header("content-type", "application/json")
                .body("null"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body:#}");
    assert_error(&body, "not_found");

    // A bulk approval without a filter: the document's anyOf refuses `{}` too.
    let (status, body) = server
        .post_json("/api/v1/decisions/approve", &json!({"comment": "all"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_request");
    let rule = &doc["components"]["schemas"]["BulkDecisionRequest"]["allOf"][1]["anyOf"];
    assert_eq!(rule.as_array().map(Vec::len), Some(8), "{rule:#}");

    // The auto-approve answer is what its schema says, with nothing more.
    let (status, body) = server.get("/api/v1/profiles/default/auto-approve").await;
    assert_eq!(status, StatusCode::OK);
    let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["profile", "rules", "updatedAt"]);
    let schema = &doc["components"]["schemas"]["AutoApproveView"];
    let mut properties: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    properties.sort();
    assert_eq!(properties, keys);

    // Token names are ASCII, as the pattern says in every regex dialect.
    let (status, body) = server
        .post_json("/api/v1/tokens", &json!({"name": "Zoë", "role": "viewer"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_error(&body, "invalid_name");

    // A YAML integer beyond 64 bits reads as it does in JSON (a float), not as a 400.
    let (status, body) = server
        .send(
            server
                .client
                .put(server.url("/api/v1/profiles/big"))
                .header("content-type", "application/yaml")
                .body("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nmaxNoOfPodsToEvictPerNode: 1180591620717411303424\nprofiles: []\n"),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert_error(&body, "invalid_profile");

    // The policy upload declares a body schemathesis can send (application/octet-stream).
    let content = &doc["paths"]["/api/v1/policies"]["post"]["requestBody"]["content"];
    assert_eq!(
        content["application/octet-stream"]["schema"]["$ref"],
        "#/components/schemas/WasmModule"
    );
}
