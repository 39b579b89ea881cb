//! A policy written outside this repository (issue #25): `rebalancer new-policy DIR` in a
//! temporary directory, the SDK as a path dependency, then the crate's own `cargo test`, its
//! `wasm32-wasip2` build, and an upload and a run on a real server.
//!
//! cargo runs `--offline` (every crate the SDK needs is in the workspace's lockfile, which the
//! new crate carries, so this build has already fetched them) with a target directory of its
//! own beside this build's (`<target>/new-policy`), kept between runs so that only the new
//! crate is compiled again. This test never skips: a missing `wasm32-wasip2` target or crate
//! fails it, with cargo's output.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{TestServer, small_cluster};

const BINARY: &str = env!("CARGO_BIN_EXE_rebalancer");

/// `<target>/new-policy`, `<target>` being the directory this test's binary was built in.
fn target_dir() -> PathBuf {
    Path::new(BINARY)
        .ancestors()
        .nth(2)
        .expect("the binary is in <target>/<profile>/")
        .join("new-policy")
}

/// `cargo ARGS` in `dir`, with this build's compiler settings removed (as the built-in
/// policies' build script does): its output on failure.
fn cargo(dir: &Path, args: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(dir)
        .args(args)
        .arg("--offline")
        .env("CARGO_TARGET_DIR", target_dir());
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "RUSTDOCFLAGS",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        command.env_remove(var);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("could not start cargo {args:?}: {e}"));
    assert!(
        output.status.success(),
        "cargo {args:?} in {} failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_made_outside_the_repository_tests_builds_and_uploads() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("old-pods");
    let output = Command::new(BINARY)
        .arg("new-policy")
        .arg(&dir)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(printed.contains("plugin OldPods"), "{printed}");
    let sdk =
        std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy-sdk")).unwrap();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!("path = \"{}\"", sdk.display())),
        "{manifest}"
    );

    // Its own tests, natively, with the SDK's testing harness; then the component.
    let blocking = {
        let dir = dir.clone();
        move || {
            cargo(&dir, &["test"]);
            cargo(
                &dir,
                &["build", "--target", "wasm32-wasip2", "--profile", "policy"],
            );
        }
    };
    tokio::task::spawn_blocking(blocking).await.unwrap();
    let wasm = target_dir().join("wasm32-wasip2/policy/old_pods.wasm");
    let module = std::fs::read(&wasm).unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));

    // Uploaded to a real server, enabled in a profile and run.
    let server = TestServer::start().await;
    server.push("c1", &small_cluster()).await;
    let uploaded = server.upload(module).await;
    assert_eq!(uploaded["name"], "OldPods", "{uploaded:#}");
    server
        .put_profile(
            "old",
            &json!({
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "profiles": [{
                    "name": "old",
                    "pluginConfig": [{"name": "OldPods", "args": {"maxAgeSeconds": 60}}],
                    "plugins": {"deschedule": {"enabled": ["OldPods"]}}
                }]
            }),
        )
        .await;
    let (status, run) = server.run("c1", "old").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let id = run["id"].as_i64().unwrap();
    let (status, decisions) = server.get(&format!("/api/v1/decisions?run={id}")).await;
    assert_eq!(status, StatusCode::OK, "{decisions:#}");
    let items = decisions["items"].as_array().unwrap();
    assert!(!items.is_empty(), "{run:#}\n{decisions:#}");
    assert!(
        items.iter().all(|d| d["plugin"] == "OldPods"),
        "{decisions:#}"
    );
}
