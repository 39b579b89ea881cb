//! The `rebalancer` binary in a process of its own: for what only a real process shows — its
//! log as it writes it, its resident set apart from the test's, its children, a crash.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BINARY: &str = env!("CARGO_BIN_EXE_rebalancer");

/// A running `rebalancer serve`, logging JSON to a pipe the test reads.
pub struct Process {
    child: Child,
    /// Every log line that parsed as JSON, in order, for [`Process::wait_for`].
    lines: mpsc::Receiver<Value>,
    /// Every line of stderr as written, JSON or not.
    log: Arc<Mutex<Vec<String>>>,
    pub base: String,
}

impl Process {
    /// Start `command` (the binary with its flags and environment; stderr, the log format and
    /// the listen address are set here) and wait until it is ready.
    pub fn start(mut command: Command) -> Process {
        command
            .env("REBALANCER_LISTEN", "127.0.0.1:0")
            .env("REBALANCER_LOG_FORMAT", "json")
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the binary starts");
        let (tx, lines) = mpsc::channel::<Value>();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let written = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(value);
                }
                written.lock().unwrap().push(line);
            }
        });
        let mut process = Process {
            child,
            lines,
            log,
            base: String::new(),
        };
        let listening = process.wait_for("listening");
        process.base = format!(
            "http://{}",
            listening["fields"]["addr"].as_str().expect("the address")
        );
        process.wait_for("ready");
        process
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The next log line whose message is `message` (3 minutes at most: a cold start compiles
    /// the built-ins on a loaded 2-core machine).
    pub fn wait_for(&mut self, message: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line["fields"]["message"] == message => return line,
                Ok(_) => {}
                Err(_) => panic!(
                    "no log line {message:?}; the log so far:\n{}",
                    self.log_tail(30)
                ),
            }
        }
    }

    /// Wait (60 s at most) for the process to end by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the process did not end; its last log lines:\n{}",
                self.log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, and wait for the graceful stop; the whole log.
    pub fn terminate(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.wait_exit();
        assert!(
            status.success(),
            "{status}; the log:\n{}",
            self.log_tail(30)
        );
        // The reader thread sees the pipe close after the exit: wait for the last line.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && !self
                .log
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("\"stopped\""))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.log.lock().unwrap().join("\n")
    }

    fn log_tail(&self, lines: usize) -> String {
        let log = self.log.lock().unwrap();
        log[log.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The resident set of process `pid`, in bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

/// The children of process `pid` (every thread's).
pub fn children(pid: u32) -> Vec<String> {
    let mut all = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            all.extend(list.split_whitespace().map(str::to_string));
        }
    }
    all
}
