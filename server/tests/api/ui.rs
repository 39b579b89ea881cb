//! The web UI in a real browser: runs every `web/tests/*.test.mjs` scenario (playwright-core
//! driving headless Debian Chromium, on the shared `web/tests/harness.mjs`), each against its own
//! fresh server with the demo cluster and the test server's admin token.
//!
//! `REBALANCER_UI_SCENARIOS=ui,decisions` runs only those scenario files;
//! `REBALANCER_UI_ARTIFACTS=<dir>` keeps the screenshots there (otherwise a temporary directory,
//! kept only when a scenario fails).
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

/// The scenario files `web/tests/*.test.mjs`, sorted, less those `REBALANCER_UI_SCENARIOS`
/// (a comma-separated list of names without `.test.mjs`) leaves out.
fn scenarios() -> Vec<String> {
    let wanted: Option<Vec<String>> = std::env::var("REBALANCER_UI_SCENARIOS")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let mut found: Vec<String> = std::fs::read_dir(web_dir().join("tests"))
        .expect("web/tests is readable")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".test.mjs")?.to_string();
            Some(stem)
        })
        .filter(|stem| wanted.as_ref().is_none_or(|w| w.contains(stem)))
        .collect();
    found.sort();
    found
}

/// Run `node tests/<name>.test.mjs`; returns (success, combined output).
fn run_scenario(name: &str, base: &str, artifacts: &Path) -> (bool, String) {
    let mut child = Command::new("node")
        .arg(format!("tests/{name}.test.mjs"))
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

    drop(server);

    let kept_dir = std::env::var_os("REBALANCER_UI_ARTIFACTS").map(PathBuf::from);
    let artifacts = tempfile::Builder::new()
        .prefix("rebalancer-ui-test-")
        .tempdir()
        .expect("a temporary directory");
    let dir = kept_dir
        .clone()
        .unwrap_or_else(|| artifacts.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("the artifacts directory");
    let names = scenarios();
    assert!(
        !names.is_empty(),
        "no web/tests/*.test.mjs scenario (or none named in REBALANCER_UI_SCENARIOS)"
    );
    let mut failures = Vec::new();
    for name in names {
        // A fresh server per scenario: no scenario sees another's runs, decisions or tokens.
        let server = TestServer::start_with_demo().await;
        let base = server.base.clone();
        let scenario_dir = dir.clone();
        let scenario = name.clone();
        let started = Instant::now();
        let (ok, output) =
            tokio::task::spawn_blocking(move || run_scenario(&scenario, &base, &scenario_dir))
                .await
                .expect("the scenario thread");
        drop(server);
        eprintln!(
            "===== scenario {name}: {} in {:.1} s =====\n{output}",
            if ok { "passed" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if !ok {
            failures.push(name);
        }
    }
    if !failures.is_empty() {
        let kept = match kept_dir {
            Some(dir) => dir,
            None => artifacts.keep(),
        };
        panic!(
            "browser scenario(s) failed: {} (output above; screenshots kept in {})",
            failures.join(", "),
            kept.display()
        );
    }
    let shots = std::fs::read_dir(&dir)
        .expect("the artifacts directory")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "png"))
        })
        .count();
    assert!(shots > 0, "no screenshot was written to {}", dir.display());
}
