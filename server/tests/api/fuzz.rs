//! Property tests of the three inputs a client hands the server whole — snapshots, profiles and
//! policy modules —, run against a real server: whatever arrives, the answer is a 2xx or a 4xx
//! (never a 5xx, never a dropped connection), and the server is healthy afterwards.
//!
//! Inputs are valid documents with one part replaced by something generated (any JSON value, a
//! value nested thousands deep, a huge string, a negative or absurd number), or bytes mangled.
//! The number of cases is bounded, so the suite runs in CI in bounded time; raise it with
//! `PROPTEST_CASES=10000 cargo test -p rebalancer-server --test api fuzz::`.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, policy_module, small_cluster};

/// Cases per input kind unless `PROPTEST_CASES` says otherwise.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
        Just(json!("-4")),
        Just(json!("abc%")),
        Just(json!("../../x")),
        Just(json!("1e999")),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A value nested `depth` deep, in arrays or objects.
fn deep(depth: usize, objects: bool) -> Value {
    // Built by hand: `json!` would copy the whole value at every level.
    let mut value = Value::String("bottom".into());
    for _ in 0..depth {
        value = if objects {
            Value::Object([("a".to_string(), value)].into_iter().collect())
        } else {
            Value::Array(vec![value])
        };
    }
    value
}

/// What goes in place of a part of a valid document.
fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => any_json(),
        1 => (1usize..20_000, any::<bool>()).prop_map(|(d, o)| deep(d, o)),
        1 => (1usize..(64 << 10)).prop_map(|n| Value::String("x".repeat(n))),
        1 => Just(json!(-1)),
        1 => Just(json!(u64::MAX)),
    ]
}

/// `value` with the part at `route` (indices taken modulo each level's length) replaced.
fn replace_at(value: &mut Value, route: &[usize], with: Value) {
    let Some((&step, rest)) = route.split_first() else {
        *value = with;
        return;
    };
    let child = match value {
        Value::Array(items) if !items.is_empty() => {
            let n = items.len();
            &mut items[step % n]
        }
        Value::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(step % map.len()).cloned().unwrap();
            map.get_mut(&key).unwrap()
        }
        _ => {
            *value = with;
            return;
        }
    };
    replace_at(child, rest, with)
}

/// How deep `value` nests (YAML's writer, on the test's side, is slow with deep values).
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// A document with one part replaced, sent as JSON or as YAML.
fn mutated(base: Value) -> impl Strategy<Value = (Vec<u8>, &'static str)> {
    (
        prop::collection::vec(any::<usize>(), 0..8),
        replacement(),
        any::<bool>(),
    )
        .prop_map(move |(route, with, yaml)| {
            let mut document = base.clone();
            replace_at(&mut document, &route, with);
            if yaml && depth(&document) < 64 {
                // YAML's own writer recurses too: keep it to what it can write.
                match serde_yaml::to_string(&document) {
                    Ok(text) if !text.is_empty() => (text.into_bytes(), "application/yaml"),
                    _ => (serde_json::to_vec(&document).unwrap(), "application/json"),
                }
            } else {
                (serde_json::to_vec(&document).unwrap(), "application/json")
            }
        })
}

struct Target {
    server: TestServer,
    runtime: tokio::runtime::Runtime,
}

impl Target {
    fn start(demo: bool) -> Target {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(async {
            if demo {
                TestServer::start_with_demo().await
            } else {
                TestServer::start().await
            }
        });
        Target { server, runtime }
    }

    /// Send a body; the status, or an error if the connection broke.
    fn send(&self, method: reqwest::Method, path: &str, body: Vec<u8>, kind: &str) -> StatusCode {
        let request = self
            .server
            .client
            .request(method, self.server.url(path))
            .header("content-type", kind)
            .body(body);
        self.runtime
            .block_on(async { request.send().await.map(|r| r.status()) })
            .unwrap_or_else(|e| panic!("the server dropped the request: {e}"))
    }

    fn healthy(&self) -> bool {
        let request = self.server.client.get(self.server.url("/healthz"));
        self.runtime
            .block_on(async { request.send().await })
            .is_ok_and(|r| r.status().is_success())
    }
}

fn check(target: &Target, status: StatusCode) -> Result<(), TestCaseError> {
    prop_assert!(
        !status.is_server_error(),
        "answered {status}: a 5xx for client input"
    );
    prop_assert!(target.healthy(), "the server is no longer healthy");
    Ok(())
}

/// Run `f` on a thread with a stack large enough for the test's own handling (building,
/// serialising and dropping) of values nested 20,000 deep: the server must cope with them on its
/// ordinary stacks, the test only has to make them.
fn with_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
}

#[test]
fn snapshot_pushes_never_crash_the_server() {
    with_big_stack(snapshot_pushes);
}

fn snapshot_pushes() {
    let target = Target::start(false);
    let mut runner = TestRunner::new(Config {
        cases: cases(48),
        ..Config::default()
    });
    runner
        .run(&mutated(small_cluster()), |(body, kind)| {
            let status = target.send(
                reqwest::Method::PUT,
                "/api/v1/clusters/fuzz/snapshot",
                body,
                kind,
            );
            check(&target, status)
        })
        .unwrap();
}

#[test]
fn profile_documents_never_crash_the_server() {
    with_big_stack(profile_documents);
}

fn profile_documents() {
    let target = Target::start(true);
    let document = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": 2,
        "profiles": [{
            "name": "p",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": true}},
                {"name": "LowNodeUtilization", "args": {
                    "thresholds": {"cpu": 20, "memory": 20},
                    "targetThresholds": {"cpu": 50, "memory": 50}}},
                {"name": "RemoveDuplicates"}
            ],
            "plugins": {
                "balance": {"enabled": ["LowNodeUtilization", "RemoveDuplicates"]}
            }
        }]
    });
    let mut runner = TestRunner::new(Config {
        cases: cases(48),
        ..Config::default()
    });
    runner
        .run(&mutated(document), |(body, kind)| {
            let status = target.send(reqwest::Method::PUT, "/api/v1/profiles/fuzz", body, kind);
            check(&target, status)
        })
        .unwrap();
}

#[test]
fn policy_uploads_never_crash_the_server() {
    with_big_stack(policy_uploads);
}

fn policy_uploads() {
    let target = Target::start(false);
    let module = policy_module("test_misbehaving.wasm");
    let len = module.len();
    // Each upload is compiled in a child process: fewer cases.
    let mangled = prop_oneof![
        // Bytes overwritten at random places.
        prop::collection::vec((0..len, any::<u8>()), 1..16).prop_map({
            let module = module.clone();
            move |edits| {
                let mut bytes = module.clone();
                for (at, byte) in edits {
                    bytes[at] = byte;
                }
                bytes
            }
        }),
        // Cut short.
        (0..len).prop_map({
            let module = module.clone();
            move |end| module[..end].to_vec()
        }),
        // A component header, then anything.
        prop::collection::vec(any::<u8>(), 0..4096).prop_map(|tail| {
            let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
            bytes.extend(tail);
            bytes
        }),
    ];
    let mut runner = TestRunner::new(Config {
        cases: cases(16),
        ..Config::default()
    });
    runner
        .run(&mangled, |bytes| {
            let status = target.send(
                reqwest::Method::POST,
                "/api/v1/policies",
                bytes,
                "application/wasm",
            );
            check(&target, status)
        })
        .unwrap();
}
