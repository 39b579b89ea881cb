//! Identity and roles: bearer tokens on every `/api/v1` call, viewer/approver/admin, tokens
//! created, listed and deleted over the API, the configured admin token.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{ADMIN_TOKEN, TestServer, assert_error, client_with_token, small_cluster};

#[tokio::test]
async fn api_calls_need_a_valid_bearer_token_and_public_endpoints_do_not() {
    let server = TestServer::start().await;
    let anonymous = reqwest::Client::new();

    let response = anonymous
        .get(server.url("/api/v1/clusters"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"rebalancer\""
    );
    let body: Value = response.json().await.unwrap();
    assert!(assert_error(&body, "missing_token").contains("Authorization: Bearer"));

    for header in [
        "Bearer rb_not-a-token-of-this-server",
        "Basic YWRtaW46YWRtaW4=",
        "Bearer",
    ] {
        let response = anonymous
            .get(server.url("/api/v1/clusters"))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{header}");
        assert!(
            response.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .contains("invalid_token"),
            "{header}"
        );
        let body: Value = response.json().await.unwrap();
        assert_error(&body, "invalid_token");
    }
    // A mutation without a token changes nothing.
    let (status, _) = server
        .call(
            None,
            Method::PUT,
            "/api/v1/clusters/east/snapshot",
            Some(&small_cluster()),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, clusters) = server.get("/api/v1/clusters").await;
    assert_eq!(clusters["items"], json!([]));

    for public in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/api-docs/openapi.json",
        "/docs/",
    ] {
        let response = anonymous.get(server.url(public)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{public}");
    }
}

#[tokio::test]
async fn each_role_may_do_what_it_is_for_and_gets_403_beyond() {
    let server = TestServer::start().await;
    server.push("east", &small_cluster()).await;
    let viewer = server.create_token("dashboard", "viewer").await;
    let approver = server.create_token("on-call", "approver").await;
    let admin = server.create_token("platform", "admin").await;

    // Reads: every role.
    for token in [&viewer, &approver, &admin] {
        for path in [
            "/api/v1/clusters",
            "/api/v1/clusters/east/nodes",
            "/api/v1/policies",
            "/api/v1/profiles",
            "/api/v1/runs",
            "/api/v1/decisions",
            "/api/v1/schedules",
            "/api/v1/audit",
        ] {
            let (status, body) = server.call(Some(token), Method::GET, path, None).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body:#}");
        }
    }

    // Changes: admin only.
    let run = json!({"cluster": "east", "profile": "default"});
    let token_request = json!({"name": "x", "role": "viewer"});
    let mutations: [(Method, &str, Option<&Value>); 6] = [
        (Method::POST, "/api/v1/runs", Some(&run)),
        (
            Method::PUT,
            "/api/v1/clusters/east/snapshot",
            Some(&small_cluster()),
        ),
        (Method::POST, "/api/v1/tokens", Some(&token_request)),
        (Method::GET, "/api/v1/tokens", None),
        (Method::DELETE, "/api/v1/policies/SomePolicy", None),
        (
            Method::POST,
            "/api/v1/schedules",
            Some(&json!({"cluster": "east", "profile": "default", "intervalSeconds": 60})),
        ),
    ];
    for (role, token) in [("viewer", &viewer), ("approver", &approver)] {
        for (method, path, body) in &mutations {
            let (status, answer) = server.call(Some(token), method.clone(), path, *body).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{role} {method} {path}");
            let message = assert_error(&answer, "forbidden");
            assert!(message.contains("needs the admin role"), "{message}");
            assert!(
                message.contains(&format!("has the {role} role")),
                "{message}"
            );
            assert_eq!(answer["details"]["requiredRole"], "admin");
            assert_eq!(answer["details"]["role"], role);
        }
    }
    let (status, body) = server
        .call(Some(&admin), Method::POST, "/api/v1/runs", Some(&run))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body:#}");
    let (status, _) = server
        .call(Some(&admin), Method::GET, "/api/v1/tokens", None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn approval_routes_take_an_approver_and_refuse_a_viewer() {
    let server = TestServer::start().await;
    let viewer = server.create_token("dashboard", "viewer").await;
    let approver = server.create_token("on-call", "approver").await;
    for path in [
        "/api/v1/decisions/424242/approve",
        "/api/v1/decisions/424242/reject",
    ] {
        let (status, body) = server
            .call(Some(&viewer), Method::POST, path, Some(&json!({})))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body:#}");
        assert_eq!(body["details"]["requiredRole"], "approver");
        // Past the role check: the decision does not exist.
        let (status, body) = server
            .call(Some(&approver), Method::POST, path, Some(&json!({})))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body:#}");
        assert_error(&body, "not_found");
    }
}

#[tokio::test]
async fn tokens_are_created_shown_once_listed_without_secrets_and_deleted() {
    let server = TestServer::start().await;

    let (status, created) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "portal", "role": "approver"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    let secret = created["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("rb_") && secret.len() > 40, "{secret}");
    assert_eq!(created["name"], "portal");
    assert_eq!(created["role"], "approver");
    assert!(created["id"].is_i64());
    assert!(created["createdAt"].is_string());
    let id = created["id"].as_i64().unwrap();

    // The new token works, with its role.
    let (status, _) = server
        .call(Some(&secret), Method::GET, "/api/v1/runs", None)
        .await;
    assert_eq!(status, StatusCode::OK);

    // Listed without any secret; stored hashed only.
    let (status, list) = server.get("/api/v1/tokens").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!list.to_string().contains(&secret));
    assert!(!list.to_string().contains(ADMIN_TOKEN));
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{list:#}");
    assert!(items.iter().all(|t| t.get("token").is_none()));
    let portal = items.iter().find(|t| t["id"] == id).unwrap();
    assert_eq!(portal["origin"], "api");
    assert_eq!(portal["createdBy"], "env:REBALANCER_ADMIN_TOKEN");
    let stored: Vec<String> = sqlx::query_scalar("SELECT token_hash FROM api_tokens")
        .fetch_all(server.state().store.pool())
        .await
        .unwrap();
    assert!(stored.iter().all(|h| h.len() == 64 && !h.contains(&secret)));

    // Bad requests.
    let (status, body) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "portal", "role": "viewer"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&body, "name_taken");
    let (status, body) = server
        .post_json("/api/v1/tokens", &json!({"name": "x", "role": "root"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    assert_error(&body, "invalid_request");
    let (status, body) = server
        .post_json("/api/v1/tokens", &json!({"name": "a:b", "role": "viewer"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_error(&body, "invalid_name");

    // Deleted: it stops working at once.
    let (status, _) = server.delete(&format!("/api/v1/tokens/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = server
        .call(Some(&secret), Method::GET, "/api/v1/runs", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_error(&body, "invalid_token");
    let (status, body) = server.delete(&format!("/api/v1/tokens/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "not_found");
}

#[tokio::test]
async fn the_configured_admin_token_is_an_admin_that_cannot_be_deleted_over_the_api() {
    let server = TestServer::start().await;
    let (_, list) = server.get("/api/v1/tokens").await;
    let env = &list["items"][0];
    assert_eq!(env["name"], "env:REBALANCER_ADMIN_TOKEN");
    assert_eq!(env["role"], "admin");
    assert_eq!(env["origin"], "env");
    let (status, body) = server
        .delete(&format!("/api/v1/tokens/{}", env["id"]))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(assert_error(&body, "token_from_environment").contains("REBALANCER_ADMIN_TOKEN"));

    // Still valid after a restart (the variable is set again at every start).
    let server = server.restart().await;
    let (status, _) = server.get("/api/v1/tokens").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn the_openapi_document_states_the_role_of_every_operation() {
    let server = TestServer::start().await;
    let (status, doc) = server
        .call(None, Method::GET, "/api-docs/openapi.json", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let operation = |path: &str, method: &str| doc["paths"][path][method].clone();
    for (path, method, role) in [
        ("/api/v1/clusters", "get", "viewer"),
        ("/api/v1/runs", "post", "admin"),
        ("/api/v1/tokens", "get", "admin"),
        ("/api/v1/audit", "get", "viewer"),
    ] {
        let op = operation(path, method);
        let description = op["description"].as_str().unwrap_or_default();
        assert!(
            description.contains(&format!("`{role}` role")),
            "{method} {path}: {description}"
        );
        assert!(op["responses"]["401"].is_object(), "{method} {path}");
        assert!(op["responses"]["403"].is_object(), "{method} {path}");
    }
    assert_eq!(doc["security"], json!([{"bearer": []}]));
    assert_eq!(operation("/healthz", "get")["security"], json!([{}]));
    assert_eq!(operation("/metrics", "get")["security"], json!([{}]));
}

/// Every operation of the OpenAPI document, plus `HEAD` of every `GET`, called with no token and
/// with each role: a caller below what the access table asks for is refused (401 without a
/// token, 403 with one), a caller at or above it never is. Methods a path does not have stay
/// 405, and unknown paths 404, whoever calls.
#[tokio::test]
async fn every_documented_operation_and_its_head_are_guarded_by_the_access_table() {
    use rebalancer_server::http::auth::{Access, ROUTE_ACCESS, route_access};
    use rebalancer_store::Role;

    let server = TestServer::start().await;
    let viewer = server.create_token("walk-viewer", "viewer").await;
    let approver = server.create_token("walk-approver", "approver").await;
    let callers: Vec<(Option<Role>, reqwest::Client)> = vec![
        (None, reqwest::Client::new()),
        (Some(Role::Viewer), client_with_token(&viewer)),
        (Some(Role::Approver), client_with_token(&approver)),
        (Some(Role::Admin), client_with_token(ADMIN_TOKEN)),
    ];
    let name = |role: Option<Role>| role.map_or("no token".to_string(), |r| r.to_string());

    let (status, doc) = server
        .call(None, Method::GET, "/api-docs/openapi.json", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 29, "{:?}", paths.keys());
    let all_methods = [
        Method::GET,
        Method::HEAD,
        Method::PUT,
        Method::POST,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ];
    let mut checked = 0;
    for (template, item) in paths {
        // Ids and names no object has: nothing is changed by the callers that get through.
        let path = template
            .replace("{id}", "424242")
            .replace("{name}", "no-such-object");
        assert!(
            !path.contains('{'),
            "a path parameter to fill in: {template}"
        );
        let documented: Vec<Method> = all_methods
            .iter()
            .filter(|m| item.get(m.as_str().to_ascii_lowercase()).is_some())
            .cloned()
            .collect();
        assert!(!documented.is_empty(), "{template} has no operation");
        let mut callable = documented.clone();
        if documented.contains(&Method::GET) {
            callable.push(Method::HEAD);
        }
        for method in &all_methods {
            let access = if callable.contains(method) {
                Some(route_access(method, template).unwrap_or_else(|| {
                    panic!("{method} {template} is documented but not in the access table")
                }))
            } else {
                None
            };
            for (role, client) in &callers {
                let response = client
                    .request(method.clone(), server.url(&path))
                    .send()
                    .await
                    .unwrap();
                let status = response.status();
                let body = response.text().await.unwrap();
                let who = name(*role);
                let Some(access) = access else {
                    assert_eq!(
                        status,
                        StatusCode::METHOD_NOT_ALLOWED,
                        "{method} {path} ({who}): {body}"
                    );
                    continue;
                };
                checked += 1;
                let needed = match access {
                    Access::Public => None,
                    Access::Role(needed) => Some(needed),
                };
                let allowed = match (needed, role) {
                    (None, _) => true,
                    (Some(needed), Some(role)) => *role >= needed,
                    (Some(_), None) => false,
                };
                if allowed {
                    assert!(
                        status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                        "{method} {path} ({who}, table: {access}) was refused: {status} {body}"
                    );
                    continue;
                }
                let expected = if role.is_none() {
                    StatusCode::UNAUTHORIZED
                } else {
                    StatusCode::FORBIDDEN
                };
                assert_eq!(
                    status, expected,
                    "{method} {path} ({who}, table: {access}): {body}"
                );
                if *method != Method::HEAD && role.is_some() {
                    let body: Value = serde_json::from_str(&body).unwrap();
                    assert_error(&body, "forbidden");
                    assert_eq!(body["details"]["requiredRole"], access.to_string());
                }
            }
        }
    }
    // Every row of the table, and HEAD of every GET row, by every caller.
    let gets = ROUTE_ACCESS
        .iter()
        .filter(|r| r.method == Method::GET)
        .count();
    assert_eq!(checked, callers.len() * (ROUTE_ACCESS.len() + gets));

    for path in [
        "/api/v1/nothing-here",
        "/api/v1/clusters/a/b/c",
        "/api/v1/tokens/1/extra",
    ] {
        for (role, client) in &callers {
            for method in [Method::GET, Method::HEAD, Method::POST] {
                let response = client
                    .request(method.clone(), server.url(path))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    response.status(),
                    StatusCode::NOT_FOUND,
                    "{method} {path} ({})",
                    name(*role)
                );
            }
        }
    }
}

/// The hole this table closed: `HEAD` of the token list answered 200 (with the admin listing's
/// length) to viewers and approvers.
#[tokio::test]
async fn head_of_the_token_list_needs_an_admin_like_get() {
    let server = TestServer::start().await;
    let viewer = server.create_token("dashboard", "viewer").await;
    let approver = server.create_token("on-call", "approver").await;
    for token in [&viewer, &approver] {
        for method in [Method::GET, Method::HEAD] {
            let response = client_with_token(token)
                .request(method.clone(), server.url("/api/v1/tokens"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::FORBIDDEN, "{method}");
        }
    }
    let head = server
        .client
        .head(server.url("/api/v1/tokens"))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
}
