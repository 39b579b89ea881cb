//! Compiling uploaded modules: bounded in memory and time (in a `rebalancer compile-module`
//! child process), never holding up runs, cached on disk across restarts, and forgotten when
//! the policy is replaced or deleted.
//!
//! The compile bombs are the project's own, written here byte by byte: one function of deeply
//! nested blocks — with an `i32` result, Cranelift's memory grows with the square of the depth
//! (40,000 levels, 120 KB of module, want gigabytes); without, its time does (150,000 levels
//! take tens of seconds).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::process::{BINARY, Process, children, rss_bytes};
use crate::support::{
    ADMIN_TOKEN, TestServer, assert_error, compile_settings, policy_module, shared_compile_cache,
};

fn leb128(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    leb128(body.len(), out);
    out.extend_from_slice(body);
}

/// A component holding one core module with one function `() -> ()` whose body is `depth`
/// nested blocks — of type `[] -> [i32]` (each yielding the constant the innermost pushes) when
/// `with_result`, else `[] -> []`.
fn nested_blocks(depth: usize, with_result: bool) -> Vec<u8> {
    let mut body = vec![0x00]; // no locals
    let block_type = if with_result { 0x7f } else { 0x40 };
    for _ in 0..depth {
        body.extend_from_slice(&[0x02, block_type]);
    }
    if with_result {
        body.extend_from_slice(&[0x41, 0x00]); // i32.const 0
    }
    body.extend(std::iter::repeat_n(0x0b, depth)); // end × depth
    if with_result {
        body.push(0x1a); // drop
    }
    body.push(0x0b);
    let mut code = Vec::new();
    leb128(1, &mut code);
    leb128(body.len(), &mut code);
    code.extend_from_slice(&body);

    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[0x01, 0x60, 0x00, 0x00], &mut module); // type 0: [] -> []
    section(3, &[0x01, 0x00], &mut module); // function 0: type 0
    section(10, &code, &mut module);
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    section(1, &module, &mut component); // a core module section
    component
}

/// `wasm` with a custom section appended: another digest, the same policy.
fn with_custom_section(mut wasm: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    leb128(b"rebalancer-test".len(), &mut body);
    body.extend_from_slice(b"rebalancer-test");
    body.extend_from_slice(payload);
    section(0, &body, &mut wasm);
    wasm
}

/// The `rebalancer` binary in a process of its own, so that its memory can be watched apart
/// from the test's.
struct BinaryServer {
    process: Process,
    _dir: tempfile::TempDir,
}

impl BinaryServer {
    fn start(flags: &[&str]) -> BinaryServer {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(BINARY);
        command
            .args(["serve", "--no-demo"])
            .arg("--database")
            .arg(dir.path().join("r.db"))
            .arg("--policy-cache-dir")
            .arg(shared_compile_cache())
            .args(flags)
            .env("REBALANCER_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null());
        BinaryServer {
            process: Process::start(command),
            _dir: dir,
        }
    }

    /// Upload every module at once while watching the server's resident set: the answers and
    /// the most the resident set grew by.
    async fn uploads_watching_rss(&self, modules: Vec<Vec<u8>>) -> (Vec<(StatusCode, Value)>, u64) {
        let pid = self.process.pid();
        let before = rss_bytes(pid);
        let done = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(before));
        let watcher = {
            let (done, peak) = (done.clone(), peak.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_bytes(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        let client = crate::support::client_with_token(ADMIN_TOKEN);
        let answers = futures::future::join_all(modules.into_iter().map(|wasm| {
            let request = client.post(self.process.url("/api/v1/policies")).body(wasm);
            async move {
                let response = request.send().await.unwrap();
                let status = response.status();
                (status, response.json::<Value>().await.unwrap())
            }
        }))
        .await;
        done.store(true, Ordering::Relaxed);
        watcher.join().unwrap();
        (answers, peak.load(Ordering::Relaxed).saturating_sub(before))
    }

    async fn healthy(&self) -> bool {
        reqwest::get(self.process.url("/healthz"))
            .await
            .is_ok_and(|r| r.status().is_success())
    }
}

/// What the server may grow by while a bomb is compiled in its child: the module, the request,
/// the child's pipes — nothing like the gigabytes the compile itself wants.
const SERVER_GROWTH_BOUND: u64 = 64 << 20;

#[tokio::test]
async fn a_module_that_needs_too_much_memory_to_compile_is_refused_and_the_server_stays_small() {
    let server = BinaryServer::start(&["--policy-compile-memory", "384MiB"]);
    // Three at once (in-process, three of these took the server down): they wait for the
    // compile slot in turn, and each costs its child its life.
    let bombs: Vec<Vec<u8>> = (40_000..40_003).map(|d| nested_blocks(d, true)).collect();
    assert!(bombs[0].len() < 200 << 10, "{} bytes", bombs[0].len());
    let (answers, growth) = server.uploads_watching_rss(bombs).await;
    for (status, body) in answers {
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
        let message = assert_error(&body, "compile_memory");
        assert!(message.contains("384 MiB"), "{message}");
        assert!(message.contains("--policy-compile-memory"), "{message}");
    }
    assert!(
        growth < SERVER_GROWTH_BOUND,
        "the server grew by {} MiB",
        growth >> 20
    );
    assert!(
        children(server.process.pid()).is_empty(),
        "no compiler left"
    );
    assert!(server.healthy().await);
}

#[tokio::test]
async fn a_module_that_takes_too_long_to_compile_is_refused_and_its_compiler_killed() {
    let server = BinaryServer::start(&["--policy-compile-timeout-ms", "1000"]);
    let bomb = nested_blocks(150_000, false);
    let (answers, growth) = server.uploads_watching_rss(vec![bomb]).await;
    let (status, body) = &answers[0];
    assert_eq!(*status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let message = assert_error(body, "compile_timeout");
    assert!(message.contains("1000 ms"), "{message}");
    assert!(
        growth < SERVER_GROWTH_BOUND,
        "the server grew by {} MiB",
        growth >> 20
    );
    assert!(
        children(server.process.pid()).is_empty(),
        "the compiler was killed"
    );
    assert!(server.healthy().await);
}

#[tokio::test]
async fn a_slow_compile_does_not_hold_up_runs() {
    // One evaluation at a time: were the compile holding an evaluation permit, the run would
    // wait for it.
    let server = TestServer::start_with(|settings| {
        settings.max_concurrent_evaluations = 1;
        settings.compile.timeout_ms = 20_000;
    })
    .await;
    let upload = {
        let request = server
            .client
            .post(server.url("/api/v1/policies"))
            .body(nested_blocks(150_000, false));
        tokio::spawn(async move { request.send().await.unwrap() })
    };
    // Let the upload reach the compiler.
    while children(std::process::id()).is_empty() && !upload.is_finished() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, run) = server.run("demo", "default").await;
    assert!(status.is_success(), "{run:#}");
    assert!(
        !upload.is_finished(),
        "the run finished while the module was still compiling"
    );
    let response = upload.await.unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = response.json().await.unwrap();
    assert_error(&body, "compile_timeout");
}

fn cached(dir: &std::path::Path, digest: &str) -> bool {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(digest))
}

#[tokio::test]
async fn compiled_policies_survive_a_restart_on_disk_and_leave_when_replaced_or_deleted() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_path_buf();
    let server = TestServer::start_with(move |settings| {
        settings.demo = false;
        settings.compile = compile_settings(&dir);
    })
    .await;
    let builtins = server.state().engine.compile_stats().compiled;
    assert!(builtins >= 12, "{builtins}");

    let wasm = policy_module("test_misbehaving.wasm");
    let (status, first) = server.post_bytes("/api/v1/policies", wasm.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{first:#}");
    let first_digest = first["digest"].as_str().unwrap().to_string();
    assert!(cached(cache.path(), &first_digest));

    // A restart compiles nothing: the built-ins and the upload come from the disk cache.
    let server = server.restart().await;
    let stats = server.state().engine.compile_stats();
    assert_eq!(stats.compiled, 0, "{stats:?}");
    assert_eq!(stats.loaded, builtins + 1, "{stats:?}");
    let (status, policy) = server.get("/api/v1/policies/TestMisbehaving").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(policy["loaded"], true, "{policy:#}");

    // Replaced by another module of the same name: the old code leaves the cache.
    let (status, second) = server
        .post_bytes(
            "/api/v1/policies",
            with_custom_section(wasm, b"a second build"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{second:#}");
    let second_digest = second["digest"].as_str().unwrap().to_string();
    assert_ne!(second_digest, first_digest);
    assert!(!cached(cache.path(), &first_digest));
    assert!(cached(cache.path(), &second_digest));

    let (status, body) = server.delete("/api/v1/policies/TestMisbehaving").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body:#}");
    assert!(!cached(cache.path(), &second_digest));
    assert_eq!(
        server.get("/api/v1/policies/TestMisbehaving").await.0,
        StatusCode::NOT_FOUND
    );
}
