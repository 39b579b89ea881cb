//! The web UI in a real browser: starts a server with the demo cluster and runs the
//! `web/tests/ui.test.mjs` scenario (playwright-core driving headless Debian Chromium) against
//! it with the test server's admin token.
//!
//! Needs `node`, `web/node_modules/playwright-core` (`cd web && npm ci`) and Chromium at
//! `/usr/bin/chromium` (or `CHROMIUM_PATH`); `.ci/run` installs them. When one is missing the
//! test fails under CI (env `CI` set) and is skipped, loudly, elsewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{ADMIN_TOKEN, TestServer};
use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH};

/// The whole browser scenario may take this long (a debug build on 2 busy cores).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(600);

fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../web")
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

/// What the browser test needs and this machine lacks.
fn missing_prerequisites() -> Vec<String> {
    let mut missing = Vec::new();
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !node.is_ok_and(|s| s.success()) {
        missing.push("node (Node.js) on PATH".to_string());
    }
    let playwright = web_dir().join("node_modules/playwright-core/package.json");
    if !playwright.is_file() {
        missing.push(format!(
            "{} (run `npm ci` in web/)",
            playwright.parent().unwrap().display()
        ));
    }
    let chromium = chromium();
    if !chromium.is_file() {
        missing.push(format!(
            "{} (apt-get install chromium, or set CHROMIUM_PATH)",
            chromium.display()
        ));
    }
    missing
}

/// Run `node tests/ui.test.mjs`; returns (success, combined output).
fn run_scenario(base: &str, artifacts: &Path) -> (bool, String) {
    let mut child = Command::new("node")
        .arg("tests/ui.test.mjs")
        .current_dir(web_dir())
        .env("REBALANCER_URL", base)
        .env("REBALANCER_TOKEN", ADMIN_TOKEN)
        .env("REBALANCER_UI_ARTIFACTS", artifacts)
        .env("CHROMIUM_PATH", chromium())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    // Drain both pipes on their own threads so a chatty child never blocks on a full pipe.
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for node") {
            break Some(status);
        }
        if started.elapsed() > SCENARIO_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default()
    );
    match status {
        Some(status) => (status.success(), format!("exit: {status}\n{output}")),
        None => (
            false,
            format!("killed after {SCENARIO_TIMEOUT:?} without finishing\n{output}"),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_ui_end_to_end_in_chromium() {
    let missing = missing_prerequisites();
    if !missing.is_empty() {
        let list = missing.join("\n  - ");
        if std::env::var_os("CI").is_some() {
            panic!(
                "the browser test cannot run; missing:\n  - {list}\n(.ci/run installs these in \
                 its \"browser test dependencies\" step)"
            );
        }
        eprintln!(
            "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
             !! SKIPPED: the web UI browser test (server/tests/ui.rs); missing:\n  - {list}\n\
             !! Set CI=1 to make this a failure.\n\
             !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
        );
        return;
    }

    let server = TestServer::start_with_demo().await;

    // The UI is public (outside /api/v1 and its auth); the API it calls is not.
    let anonymous = reqwest::Client::new();
    let page = anonymous.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
    assert!(page.headers().contains_key(CONTENT_SECURITY_POLICY));
    assert!(page.text().await.unwrap().contains("/ui/app.js"));
    let script = anonymous
        .get(server.url("/ui/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    assert_eq!(
        script.headers()[CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(script.headers()[CACHE_CONTROL], "no-cache");
    let etag = script.headers()[ETAG].clone();
    let revalidated = anonymous
        .get(server.url("/ui/app.js"))
        .header(IF_NONE_MATCH, etag)
        .send()
        .await
        .unwrap();
    assert_eq!(revalidated.status(), StatusCode::NOT_MODIFIED);
    let api = anonymous
        .get(server.url("/api/v1/clusters"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);

    let artifacts = tempfile::Builder::new()
        .prefix("rebalancer-ui-test-")
        .tempdir()
        .expect("a temporary directory");
    let base = server.base.clone();
    let dir = artifacts.path().to_path_buf();
    let (ok, output) = tokio::task::spawn_blocking(move || run_scenario(&base, &dir))
        .await
        .expect("the scenario thread");
    if !ok {
        let kept = artifacts.keep();
        panic!(
            "the browser scenario failed (screenshots kept in {}):\n{output}",
            kept.display()
        );
    }
    eprintln!("{output}");
    for shot in [
        "run.png",
        "decisions.png",
        "pod-migration.png",
        "pod-migration-waiting.png",
        "forbidden.png",
        "clusters-800.png",
        "login-401.png",
    ] {
        let path = artifacts.path().join(shot);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(size > 0, "screenshot {} was not written", path.display());
    }
}
