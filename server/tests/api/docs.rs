//! Health, readiness, OpenAPI, Swagger UI and the generic error behaviour.

use reqwest::StatusCode;

use crate::support::{TestServer, assert_error};

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
        ("/api/v1/profiles/{name}", vec!["get", "put"]),
        ("/api/v1/runs", vec!["get", "post"]),
        ("/api/v1/runs/{id}", vec!["get"]),
        ("/api/v1/decisions", vec!["get"]),
        ("/api/v1/decisions/{id}", vec!["get"]),
        ("/api/v1/decisions/{id}/approve", vec!["post"]),
        ("/api/v1/decisions/{id}/reject", vec!["post"]),
        ("/api/v1/decisions/approve", vec!["post"]),
        ("/api/v1/profiles/{name}/auto-approve", vec!["get", "put"]),
        ("/api/v1/pod-migrations", vec!["get"]),
        ("/api/v1/pod-migrations/{id}", vec!["get"]),
        ("/api/v1/pod-migrations/{id}/abort", vec!["post"]),
        ("/api/v1/arbitration", vec!["get", "put"]),
        ("/metrics", vec!["get"]),
        ("/api/v1/schedules", vec!["get", "post"]),
        ("/api/v1/schedules/{id}", vec!["delete", "get", "put"]),
        ("/api/v1/tokens", vec!["get", "post"]),
        ("/api/v1/tokens/{id}", vec!["delete"]),
        ("/api/v1/audit", vec!["get"]),
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
