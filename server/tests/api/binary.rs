//! The `rebalancer` binary itself: configuration from the environment, bad flags, SIGTERM, the
//! admin token (from `REBALANCER_ADMIN_TOKEN`, or printed once at the first start).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_rebalancer");

#[test]
fn a_bad_flag_value_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(BINARY)
        .args(["serve", "--policy-timeout-ms", "0", "--database"])
        .arg(dir.path().join("never.db"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--policy-timeout-ms"), "{stderr}");
    assert!(!dir.path().join("never.db").exists());
}

#[tokio::test]
async fn serves_from_environment_settings_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("env.db");
    let mut child = Command::new(BINARY)
        .env("REBALANCER_LISTEN", "127.0.0.1:0")
        .env("REBALANCER_DATABASE", &database)
        .env("REBALANCER_NO_DEMO", "true")
        .env("REBALANCER_LOG_FORMAT", "json")
        .env("REBALANCER_ADMIN_TOKEN", ENV_TOKEN)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let printed = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());

    // Log lines, as JSON, read on a thread.
    let (lines_tx, lines) = mpsc::channel::<Value>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                let _ = lines_tx.send(value);
            }
        }
    });
    let wait_for = |message: &str| -> Value {
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no log line {message:?}"));
            if line["fields"]["message"] == message {
                return line;
            }
        }
    };

    let listening = wait_for("listening");
    let addr = listening["fields"]["addr"].as_str().unwrap().to_string();
    assert_eq!(
        listening["fields"]["database"].as_str().unwrap(),
        database.display().to_string()
    );
    wait_for("ready");

    let base = format!("http://{addr}");
    let client = reqwest::Client::new();
    let anonymous = client
        .get(format!("{base}/api/v1/clusters"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), reqwest::StatusCode::UNAUTHORIZED);
    let clusters: Value = client
        .get(format!("{base}/api/v1/clusters"))
        .bearer_auth(ENV_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        clusters["items"],
        serde_json::json!([]),
        "REBALANCER_NO_DEMO=true keeps the demo out"
    );
    assert!(database.exists());

    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let shutdown = wait_for("shutting down");
    assert_eq!(shutdown["fields"]["signal"], "SIGTERM");
    wait_for("stopped");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let printed = printed.join().unwrap();
    assert!(
        !printed.contains("REBALANCER_ADMIN_TOKEN="),
        "no token is generated when one is configured: {printed}"
    );
}

/// The contract: with `REBALANCER_ADMIN_TOKEN=T` set, `T` is an admin token.
const ENV_TOKEN: &str = "env-admin-token-for-the-binary-test";

#[tokio::test]
async fn the_first_start_prints_an_admin_token_once_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BINARY)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--no-demo",
            "--log-format",
            "json",
        ])
        .arg("--database")
        .arg(dir.path().join("first.db"))
        .env_remove("REBALANCER_ADMIN_TOKEN")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = mpsc::channel::<Value>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                let _ = lines_tx.send(value);
            }
        }
    });
    let (token_tx, token_rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(token) = line.trim().strip_prefix("REBALANCER_ADMIN_TOKEN=") {
                let _ = token_tx.send(token.to_string());
            }
        }
    });
    let mut addr = None;
    let mut logged_secret = false;
    let token = token_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("an admin token on stdout");
    assert!(token.starts_with("rb_"), "{token}");
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(120))
            .expect("the server gets ready");
        logged_secret |= line.to_string().contains(&token);
        if line["fields"]["message"] == "listening" {
            addr = line["fields"]["addr"].as_str().map(str::to_string);
        }
        if line["fields"]["message"] == "ready" {
            break;
        }
    }
    assert!(!logged_secret, "the token must never reach the log");
    let base = format!("http://{}", addr.expect("a listening line"));
    let client = reqwest::Client::new();
    let tokens = client
        .get(format!("{base}/api/v1/tokens"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(tokens.status(), reqwest::StatusCode::OK);
    let tokens: Value = tokens.json().await.unwrap();
    assert_eq!(tokens["items"][0]["role"], "admin", "{tokens:#}");
    assert_eq!(tokens["items"][0]["origin"], "bootstrap", "{tokens:#}");
    let wrong = client
        .get(format!("{base}/api/v1/tokens"))
        .bearer_auth(format!("{token}x"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), reqwest::StatusCode::UNAUTHORIZED);
    assert!(token_rx.try_recv().is_err(), "printed once");

    child.kill().unwrap();
    child.wait().unwrap();
}
