//! Identity and roles: bearer tokens on every `/api/v1` call, viewer/approver/operator/admin,
//! tokens created (with an optional expiry), listed and deleted over the API, the configured
//! admin token.

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
    let operator = server.create_token("nightly-push", "operator").await;
    let admin = server.create_token("platform", "admin").await;

    // Reads: every role.
    for token in [&viewer, &approver, &operator, &admin] {
        for path in [
            "/api/v1/clusters",
            "/api/v1/clusters/east/nodes",
            "/api/v1/clusters/east/arbitration",
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

    // Admin only: tokens, policies, profiles, arbitration, deleting a cluster.
    let token_request = json!({"name": "x", "role": "viewer"});
    let profile =
        json!({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": []});
    let admin_only: [(Method, &str, Option<&Value>); 7] = [
        (Method::POST, "/api/v1/tokens", Some(&token_request)),
        (Method::GET, "/api/v1/tokens", None),
        (Method::DELETE, "/api/v1/policies/SomePolicy", None),
        (Method::PUT, "/api/v1/profiles/mine", Some(&profile)),
        (Method::PUT, "/api/v1/arbitration", Some(&json!({}))),
        (
            Method::PUT,
            "/api/v1/clusters/east/arbitration",
            Some(&json!({})),
        ),
        (Method::DELETE, "/api/v1/clusters/east", None),
    ];
    for (role, token) in [
        ("viewer", &viewer),
        ("approver", &approver),
        ("operator", &operator),
    ] {
        for (method, path, body) in &admin_only {
            let (status, answer) = server.call(Some(token), method.clone(), path, *body).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{role} {method} {path}");
            let message = assert_error(&answer, "forbidden");
            assert!(message.contains("needs the admin role"), "{message}");
            assert!(
                message.contains(&format!("has the {role} role")),
                "{message}"
            );
            assert_eq!(answer["details"]["requiredRole"], "admin");
            assert_eq!(answer["details"]["allowedRoles"], json!(["admin"]));
            assert_eq!(answer["details"]["role"], role);
        }
    }

    // Operator: push snapshots, start runs, manage schedules; not approve.
    let run = json!({"cluster": "east", "profile": "default"});
    let schedule = json!({"cluster": "east", "profile": "default", "intervalSeconds": 60});
    let operations: [(Method, &str, Option<&Value>); 3] = [
        (Method::POST, "/api/v1/runs", Some(&run)),
        (
            Method::PUT,
            "/api/v1/clusters/east/snapshot",
            Some(&small_cluster()),
        ),
        (Method::POST, "/api/v1/schedules", Some(&schedule)),
    ];
    for (role, token) in [("viewer", &viewer), ("approver", &approver)] {
        for (method, path, body) in &operations {
            let (status, answer) = server.call(Some(token), method.clone(), path, *body).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{role} {method} {path}");
            let message = assert_error(&answer, "forbidden");
            assert!(
                message.contains("needs the operator or admin role"),
                "{message}"
            );
            assert_eq!(answer["details"]["requiredRole"], "operator");
            assert_eq!(
                answer["details"]["allowedRoles"],
                json!(["operator", "admin"])
            );
        }
    }
    for (method, path, body) in &operations {
        let (status, answer) = server
            .call(Some(&operator), method.clone(), path, *body)
            .await;
        assert!(
            status.is_success(),
            "operator {method} {path}: {status} {answer:#}"
        );
    }
    let (_, schedules) = server.get("/api/v1/schedules").await;
    let schedule_id = schedules["items"][0]["id"].as_i64().unwrap();
    let (status, body) = server
        .call(
            Some(&operator),
            Method::PUT,
            &format!("/api/v1/schedules/{schedule_id}"),
            Some(&json!({"cluster": "east", "profile": "default", "intervalSeconds": 120})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let (status, _) = server
        .call(
            Some(&operator),
            Method::DELETE,
            &format!("/api/v1/schedules/{schedule_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The audit log names the operator.
    let (_, audit) = server.get("/api/v1/audit?actor=nightly-push").await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for action in [
        "run.create",
        "cluster.snapshot",
        "schedule.create",
        "schedule.delete",
    ] {
        assert!(actions.contains(&action), "{action}: {audit:#}");
    }
    assert!(
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["actor"]["role"] == "operator")
    );
    // An operator does not approve what its runs propose, nor abort.
    for path in [
        "/api/v1/decisions/424242/approve",
        "/api/v1/decisions/424242/reject",
        "/api/v1/pod-migrations/424242/abort",
    ] {
        let (status, answer) = server
            .call(Some(&operator), Method::POST, path, Some(&json!({})))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        let message = assert_error(&answer, "forbidden");
        assert!(
            message.contains(
                "needs the approver or admin role; token \"nightly-push\" has the operator role"
            ),
            "{message}"
        );
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
    let any =
        "Requires a bearer token with any role (`viewer`, `approver`, `operator` or `admin`).";
    for (path, method, note) in [
        ("/api/v1/clusters", "get", any),
        (
            "/api/v1/runs",
            "post",
            "Requires a bearer token with the `operator` or `admin` role.",
        ),
        (
            "/api/v1/clusters/{name}/snapshot",
            "put",
            "Requires a bearer token with the `operator` or `admin` role.",
        ),
        (
            "/api/v1/decisions/{id}/approve",
            "post",
            "Requires a bearer token with the `approver` or `admin` role.",
        ),
        (
            "/api/v1/tokens",
            "get",
            "Requires a bearer token with the `admin` role.",
        ),
        (
            "/api/v1/clusters/{name}/arbitration",
            "put",
            "Requires a bearer token with the `admin` role.",
        ),
        ("/api/v1/audit", "get", any),
    ] {
        let op = operation(path, method);
        let description = op["description"].as_str().unwrap_or_default();
        assert!(
            description.ends_with(note),
            "{method} {path}: {description}"
        );
        assert!(
            op["responses"]["401"]["description"]
                .as_str()
                .unwrap()
                .contains("token_expired"),
            "{method} {path}"
        );
        assert!(op["responses"]["403"].is_object(), "{method} {path}");
    }
    assert_eq!(
        operation("/api/v1/runs", "post")["responses"]["403"]["description"],
        "The token's role is not `operator` or `admin` (`forbidden`)"
    );
    assert_eq!(doc["security"], json!([{"bearer": []}]));
    assert_eq!(operation("/healthz", "get")["security"], json!([{}]));
    assert_eq!(operation("/metrics", "get")["security"], json!([{}]));
}

/// Every operation of the OpenAPI document, plus `HEAD` of every `GET`, called with no token and
/// with each role: a caller the access table does not let in is refused (401 without a token,
/// 403 with one), a caller it lets in never is. Methods a path does not have stay
/// 405, and unknown paths 404, whoever calls.
#[tokio::test]
async fn every_documented_operation_and_its_head_are_guarded_by_the_access_table() {
    use rebalancer_server::http::auth::{Access, ROUTE_ACCESS, route_access};
    use rebalancer_store::Role;

    let server = TestServer::start().await;
    let viewer = server.create_token("walk-viewer", "viewer").await;
    let approver = server.create_token("walk-approver", "approver").await;
    let operator = server.create_token("walk-operator", "operator").await;
    let callers: Vec<(Option<Role>, reqwest::Client)> = vec![
        (None, reqwest::Client::new()),
        (Some(Role::Viewer), client_with_token(&viewer)),
        (Some(Role::Approver), client_with_token(&approver)),
        (Some(Role::Operator), client_with_token(&operator)),
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
            .replace("{name}", "no-such-object")
            .replace("{deliveryId}", "00000000-0000-4000-8000-000000000000");
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
                // The event stream never ends by itself: its status is all there is to check.
                let streaming = response
                    .headers()
                    .get("content-type")
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                let body = if streaming {
                    String::new()
                } else {
                    response.text().await.unwrap()
                };
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
                    (Some(needed), Some(role)) => role.grants(needed),
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
    let operator = server.create_token("nightly-push", "operator").await;
    for token in [&viewer, &approver, &operator] {
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

#[tokio::test]
async fn tokens_may_expire_and_an_expired_one_is_refused_with_its_own_code() {
    let server = TestServer::start().await;
    let before = time::OffsetDateTime::now_utc();

    // expiresIn: seconds from now.
    let (status, created) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "nightly-push", "role": "operator", "expiresIn": 3600}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    let expires_at_text = created["expiresAt"].clone();
    let expires_at = time::OffsetDateTime::parse(
        created["expiresAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let lifetime = expires_at - before;
    assert!(
        lifetime >= time::Duration::seconds(3599) && lifetime <= time::Duration::seconds(3610),
        "{created:#}"
    );
    let id = created["id"].as_i64().unwrap();
    let secret = created["token"].as_str().unwrap().to_string();
    let (status, _) = server
        .call(Some(&secret), Method::GET, "/api/v1/runs", None)
        .await;
    assert_eq!(status, StatusCode::OK);

    // expiresAt: an RFC 3339 time in the future.
    let (status, created) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "quarterly", "role": "viewer", "expiresAt": "2999-01-31T00:00:00Z"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    assert_eq!(created["expiresAt"], "2999-01-31T00:00:00Z");
    // None: never.
    let (_, forever) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "portal", "role": "viewer"}),
        )
        .await;
    assert_eq!(forever["expiresAt"], Value::Null);

    // Refused expiries, each saying why.
    for (body, says) in [
        (
            json!({"name": "a", "role": "viewer", "expiresIn": 60, "expiresAt": "2999-01-01T00:00:00Z"}),
            "not both",
        ),
        (
            json!({"name": "a", "role": "viewer", "expiresAt": "2020-01-01T00:00:00Z"}),
            "is not in the future",
        ),
        (
            json!({"name": "a", "role": "viewer", "expiresAt": "tomorrow"}),
            "is not an RFC 3339 time",
        ),
        (
            json!({"name": "a", "role": "viewer", "expiresIn": 0}),
            "expiresIn must be from 1 to",
        ),
    ] {
        let (status, answer) = server.post_json("/api/v1/tokens", &body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {answer:#}"
        );
        let message = assert_error(&answer, "invalid_expiry");
        assert!(message.contains(says), "{body}: {message}");
    }
    let (status, answer) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "a", "role": "viewer", "expiresin": 60}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_error(&answer, "invalid_request");

    // The audit entry records the role and the expiry.
    let (_, audit) = server
        .get(&format!("/api/v1/audit?action=token.create&object={id}"))
        .await;
    let detail = &audit["items"][0]["detail"];
    assert_eq!(detail["name"], "nightly-push");
    assert_eq!(detail["role"], "operator");
    assert_eq!(detail["expiresAt"], expires_at_text);

    // Its time passes (moved into the past in the database): 401 token_expired, and the list
    // shows it expired.
    sqlx::query("UPDATE api_tokens SET expires_at = ? WHERE id = ?")
        .bind(rebalancer_store::now_ms() - 1_000)
        .bind(id)
        .execute(server.state().store.pool())
        .await
        .unwrap();
    let response = client_with_token(&secret)
        .get(server.url("/api/v1/runs"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("error=\"invalid_token\", error_description=\"the token expired\"")
    );
    let body: Value = response.json().await.unwrap();
    let message = assert_error(&body, "token_expired");
    assert!(
        message.starts_with("the bearer token \"nightly-push\" expired at "),
        "{message}"
    );
    let (_, list) = server.get("/api/v1/tokens").await;
    let listed = |name: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(listed("nightly-push")["expired"], true, "{list:#}");
    assert!(listed("nightly-push")["expiresAt"].is_string());
    assert_eq!(listed("quarterly")["expired"], false);
    assert_eq!(listed("portal")["expiresAt"], Value::Null);
    assert_eq!(listed("portal")["expired"], false);
    // Deleting it is still possible (it is a record now).
    let (status, _) = server.delete(&format!("/api/v1/tokens/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}
