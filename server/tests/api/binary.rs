//! The `rebalancer` binary itself: configuration from the environment, bad flags, SIGTERM.

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
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();

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
    let clusters: Value = client
        .get(format!("{base}/api/v1/clusters"))
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
}
