//! Policy upload, listing and deletion, at the HTTP level (the engine's own tests cover the
//! checks in depth).

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{TestServer, assert_error, policy_module, wat};

#[tokio::test]
async fn built_ins_are_registered_and_protected() {
    let server = TestServer::start().await;
    let (status, body) = server.get("/api/v1/policies").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<(&str, bool, bool)> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["builtin"].as_bool().unwrap(),
                p["loaded"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("CpuOrchestration", true, true),
            ("HighNodeUtilization", true, true),
            ("LowNodeLoad", true, true),
            ("LowNodeUtilization", true, true),
            ("PodLifeTime", true, true),
            ("RemoveDuplicates", true, true),
            ("RemoveFailedPods", true, true),
            ("RemovePodsHavingTooManyRestarts", true, true),
            ("RemovePodsViolatingInterPodAntiAffinity", true, true),
            ("RemovePodsViolatingNodeAffinity", true, true),
            ("RemovePodsViolatingNodeTaints", true, true),
            ("RemovePodsViolatingTopologySpreadConstraint", true, true)
        ]
    );

    let (status, lnu) = server.get("/api/v1/policies/LowNodeUtilization").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lnu["extensionPoints"], json!(["balance"]));
    assert_eq!(lnu["abiVersion"], "1.4.0");
    assert_eq!(lnu["digest"].as_str().unwrap().len(), 64);
    assert!(lnu["argsSchema"].is_object(), "{lnu:#}");
    assert!(lnu["createdAt"].as_str().unwrap().ends_with('Z'));

    let (status, body) = server.delete("/api/v1/policies/RemoveDuplicates").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(assert_error(&body, "builtin_policy").contains("cannot be deleted"));

    let (status, body) = server.get("/api/v1/policies/Nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "not_found");
}

#[tokio::test]
async fn uploads_that_are_not_policies_are_refused_with_actionable_errors() {
    let server = TestServer::start().await;
    let cases = [
        ("text", b"hello, world".to_vec(), "not_wasm", "magic"),
        ("empty body", Vec::new(), "not_wasm", "empty"),
        (
            "core module",
            wat("(module)"),
            "not_a_component",
            "wasm32-wasip2",
        ),
        ("no exports", wat("(component)"), "missing_export", "export"),
        (
            "filesystem import",
            wat(r#"(component (import "wasi:filesystem/types@0.2.6" (instance)))"#),
            "forbidden_import",
            "wasi:filesystem/types",
        ),
        (
            "socket import",
            wat(r#"(component (import "wasi:sockets/tcp@0.2.6" (instance)))"#),
            "forbidden_import",
            "wasi:sockets/tcp",
        ),
        (
            "next ABI major",
            wat(r#"(component (import "rebalancer:policy/cluster@2.0.0" (instance)))"#),
            "abi_mismatch",
            "2.0.0",
        ),
    ];
    for (what, body, code, needle) in cases {
        let (status, error) = server.post_bytes("/api/v1/policies", body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{what}: {error:#}"
        );
        let message = assert_error(&error, code);
        assert!(message.contains(needle), "{what}: {message}");
    }

    // A built-in's own module: its name is taken.
    let builtin = rebalancer_builtins::modules()[0].1.to_vec();
    let (status, error) = server.post_bytes("/api/v1/policies", builtin).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&error, "builtin_policy");

    // Nothing was registered along the way.
    let (_, list) = server.get("/api/v1/policies").await;
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        rebalancer_builtins::modules().len()
    );
}

#[tokio::test]
async fn size_caps_answer_413() {
    // The module cap just admits the built-ins; the body limit is 1 MiB above it.
    fn cap() -> usize {
        rebalancer_builtins::modules()
            .iter()
            .map(|(_, wasm)| wasm.len())
            .max()
            .unwrap()
    }
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.sandbox.max_module_bytes = cap();
        s.body_limit = cap() + (1 << 20);
    })
    .await;
    // A component header followed by padding: over the module cap, under the body limit.
    let mut module = b"\0asm\x0d\0\x01\0".to_vec();
    module.resize(cap() + 1, 0);
    let (status, error) = server.post_bytes("/api/v1/policies", module).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(assert_error(&error, "module_too_large").contains(&cap().to_string()));

    let (status, error) = server
        .post_bytes("/api/v1/policies", vec![0; cap() + (2 << 20)])
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_error(&error, "payload_too_large");
}

#[tokio::test]
async fn upload_replace_and_delete() {
    let server = TestServer::start().await;
    let wasm = policy_module("test_misbehaving.wasm");
    let (status, created) = server.post_bytes("/api/v1/policies", wasm.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    assert_eq!(created["name"], "TestMisbehaving");
    assert_eq!(created["builtin"], false);
    assert_eq!(created["loaded"], true);
    assert_eq!(created["extensionPoints"], json!(["deschedule", "balance"]));
    assert_eq!(created["sizeBytes"], wasm.len());

    let (status, again) = server.post_bytes("/api/v1/policies", wasm).await;
    assert_eq!(status, StatusCode::OK, "{again:#}");
    assert_eq!(again["createdAt"], created["createdAt"]);

    // A profile uses it: deleting it would break the profile.
    server
        .put_profile(
            "chaos",
            &json!({
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "profiles": [{
                    "name": "p",
                    "pluginConfig": [{"name": "TestMisbehaving", "args": {"behaviour": "none"}}],
                    "plugins": {"deschedule": {"enabled": ["TestMisbehaving"]}}
                }]
            }),
        )
        .await;
    let (status, error) = server.delete("/api/v1/policies/TestMisbehaving").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(assert_error(&error, "policy_in_use").contains("chaos"));
    assert_eq!(error["details"]["profiles"], json!(["chaos"]));

    server
        .put_profile(
            "chaos",
            &json!({
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "profiles": [{
                    "name": "p",
                    "pluginConfig": [{"name": "RemoveDuplicates"}],
                    "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}
                }]
            }),
        )
        .await;
    let (status, body) = server.delete("/api/v1/policies/TestMisbehaving").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body:#}");
    let (status, _) = server.get("/api/v1/policies/TestMisbehaving").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, error) = server.delete("/api/v1/policies/TestMisbehaving").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&error, "not_found");
}

/// `test_oversized_info.wasm` with its selector patched to return `field` of `size` bytes
/// (see that crate's docs).
fn oversized_info(field: &str, size: u64) -> Vec<u8> {
    const BUILT: &[u8; 48] = b"rebalancer-oversize:none:0                      ";
    let mut wasm = policy_module("test_oversized_info.wasm");
    let at = wasm
        .windows(BUILT.len())
        .position(|w| w == BUILT)
        .expect("the selector is in the module's data");
    let selector = format!("rebalancer-oversize:{field}:{size}");
    let patch = &mut wasm[at..at + BUILT.len()];
    patch.fill(b' ');
    patch[..selector.len()].copy_from_slice(selector.as_bytes());
    wasm
}

#[tokio::test]
async fn oversized_metadata_is_refused_without_being_echoed_or_listed() {
    let server = TestServer::start().await;
    for (field, size, limit) in [
        ("description", 40u64 << 20, 4096),
        ("args-schema", 16 << 20, 256 << 10),
        ("default-args", 1 << 20, 64 << 10),
        ("name", 16 << 20, 128),
    ] {
        let (status, error) = server
            .post_bytes("/api/v1/policies", oversized_info(field, size))
            .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}: {error:#}"
        );
        let message = assert_error(&error, "invalid_metadata");
        assert!(
            message.len() < 400,
            "{field}: the value is echoed: {message}"
        );
        assert!(message.contains(field), "{message}");
        assert!(message.contains(&limit.to_string()), "{message}");
    }
    let (_, body) = server.get("/api/v1/policies").await;
    let names: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"TestOversizedInfo"), "{names:?}");

    // As built, the fixture is a fine policy.
    let created = server
        .upload(policy_module("test_oversized_info.wasm"))
        .await;
    assert_eq!(created["name"], "TestOversizedInfo");
}
