//! The test server, HTTP helpers and Kubernetes object builders.

use std::path::PathBuf;
use std::time::Duration;

use rebalancer_server::app::{self, Server};
use rebalancer_server::config::{Secret, Settings};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt as _};

/// The admin token every test server is started with (as `REBALANCER_ADMIN_TOKEN` would set it).
pub const ADMIN_TOKEN: &str = "rb_test-admin-token-0123456789abcdef";

/// A server on a random port with its own database directory.
pub struct TestServer {
    server: Option<Server>,
    pub base: String,
    /// Sends the admin token with every request, so tests that are not about authentication
    /// need not think about it. Use [`TestServer::call`] to call with another token or none.
    pub client: reqwest::Client,
    dir: tempfile::TempDir,
    configure: Configure,
}

/// Adjusts the settings of a test server (kept for restarts).
type Configure = std::sync::Arc<dyn Fn(&mut Settings) + Send + Sync>;

/// A client that sends `Authorization: Bearer <token>` with every request.
pub fn client_with_token(token: &str) -> reqwest::Client {
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).expect("a header-safe token"),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("an HTTP client")
}

/// Settings of a test server: a fresh database and the known admin token.
fn test_settings(dir: &tempfile::TempDir) -> Settings {
    let mut settings = Settings::new("127.0.0.1:0".parse().unwrap(), database(dir));
    settings.admin_token = Some(Secret::new(ADMIN_TOKEN));
    settings.compile = compile_settings(&shared_compile_cache());
    settings
}

/// Compiles as the server binary does them: in `rebalancer compile-module` child processes.
pub fn compile_settings(cache_dir: &std::path::Path) -> rebalancer_engine::CompileSettings {
    rebalancer_engine::CompileSettings {
        isolation: rebalancer_engine::Isolation::Subprocess {
            program: env!("CARGO_BIN_EXE_rebalancer").into(),
        },
        cache_dir: Some(cache_dir.to_path_buf()),
        ..rebalancer_engine::CompileSettings::default()
    }
}

/// One compiled-policy cache for every test server (and every test run): the built-ins are
/// compiled once, not once per server. Tests that look at the cache itself use their own.
pub fn shared_compile_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compiled-policies")
}

fn no_demo(settings: &mut Settings) {
    settings.demo = false;
}

impl TestServer {
    /// A ready server without the demo cluster.
    pub async fn start() -> TestServer {
        TestServer::start_with(no_demo).await
    }

    /// A ready server with the demo cluster loaded.
    pub async fn start_with_demo() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    /// A ready server with settings adjusted by `configure` (the demo is on by default).
    pub async fn start_with(
        configure: impl Fn(&mut Settings) + Send + Sync + 'static,
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        TestServer::start_in(dir, std::sync::Arc::new(configure)).await
    }

    async fn start_in(dir: tempfile::TempDir, configure: Configure) -> TestServer {
        let mut settings = test_settings(&dir);
        configure(&mut settings);
        let scheme = if settings.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let mut server = app::spawn(settings).await.expect("the server starts");
        server.wait_ready().await.expect("the server gets ready");
        TestServer {
            base: format!("{scheme}://{}", server.addr),
            server: Some(server),
            client: client_with_token(ADMIN_TOKEN),
            dir,
            configure,
        }
    }

    /// Spawn without waiting for readiness.
    pub async fn spawn_unready() -> (Server, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut settings = test_settings(&dir);
        settings.demo = false;
        let server = app::spawn(settings).await.expect("the server starts");
        (server, dir)
    }

    /// The running server's state (its store, metrics…), for checks below the API.
    pub fn state(&self) -> &rebalancer_server::http::AppState {
        &self.server.as_ref().expect("the server is running").state
    }

    pub fn database(&self) -> PathBuf {
        database(&self.dir)
    }

    /// Stop the server (gracefully) and start a new one on the same database file.
    pub async fn restart(mut self) -> TestServer {
        self.stop().await;
        let TestServer { dir, configure, .. } = self;
        TestServer::start_in(dir, configure).await
    }

    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            // A shutdown that never finishes would hang the whole suite (and CI) instead of
            // failing this test: bound it.
            tokio::time::timeout(std::time::Duration::from_secs(60), server.stop())
                .await
                .expect("the server stops within 60 s")
                .expect("the server stops cleanly");
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let bytes = response.bytes().await.expect("response body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, body)
    }

    /// A request with `token` as the bearer token (`None`: no Authorization header at all).
    pub async fn call(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let client = match token {
            Some(token) => client_with_token(token),
            None => reqwest::Client::new(),
        };
        let mut request = client.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(body);
        }
        self.send(request).await
    }

    /// Create a token (as admin) and return its secret.
    pub async fn create_token(&self, name: &str, role: &str) -> String {
        let (status, body) = self
            .post_json("/api/v1/tokens", &json!({"name": name, "role": role}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body:#}");
        body["token"].as_str().expect("the token").to_string()
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.client.get(self.url(path))).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.client.delete(self.url(path))).await
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.send(self.client.put(self.url(path)).json(body)).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.send(self.client.post(self.url(path)).json(body)).await
    }

    pub async fn put_bytes(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> (StatusCode, Value) {
        self.send(
            self.client
                .put(self.url(path))
                .header("content-type", content_type)
                .body(body),
        )
        .await
    }

    pub async fn post_bytes(&self, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
        self.send(
            self.client
                .post(self.url(path))
                .header("content-type", "application/wasm")
                .body(body),
        )
        .await
    }

    /// Push a snapshot (JSON) and expect success.
    pub async fn push(&self, cluster: &str, list: &Value) -> Value {
        let (status, body) = self
            .put_json(&format!("/api/v1/clusters/{cluster}/snapshot"), list)
            .await;
        assert!(status.is_success(), "{status}: {body:#}");
        body
    }

    /// Store a profile and expect success.
    pub async fn put_profile(&self, name: &str, document: &Value) -> Value {
        let (status, body) = self
            .put_json(&format!("/api/v1/profiles/{name}"), document)
            .await;
        assert!(status.is_success(), "{status}: {body:#}");
        body
    }

    /// Upload a policy module and expect success.
    pub async fn upload(&self, wasm: Vec<u8>) -> Value {
        let (status, body) = self.post_bytes("/api/v1/policies", wasm).await;
        assert!(status.is_success(), "{status}: {body:#}");
        body
    }

    /// Run a profile and return (status, body).
    pub async fn run(&self, cluster: &str, profile: &str) -> (StatusCode, Value) {
        self.post_json(
            "/api/v1/runs",
            &json!({"cluster": cluster, "profile": profile}),
        )
        .await
    }
}

fn database(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("rebalancer.db")
}

/// Assert the API's error shape and code; returns the message.
#[track_caller]
pub fn assert_error(body: &Value, code: &str) -> String {
    let object = body
        .as_object()
        .unwrap_or_else(|| panic!("not an error object: {body:#}"));
    assert_eq!(
        object.keys().map(String::as_str).collect::<Vec<_>>(),
        ["code", "details", "message"],
        "{body:#}"
    );
    assert_eq!(body["code"], code, "{body:#}");
    let message = body["message"].as_str().expect("message is a string");
    assert!(!message.is_empty());
    message.to_string()
}

/// A policy module built by rebalancer-builtins (`test_misbehaving.wasm`, …).
pub fn policy_module(file: &str) -> Vec<u8> {
    let path = std::path::Path::new(rebalancer_builtins::WASM_DIR).join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn wat(text: &str) -> Vec<u8> {
    wat::parse_str(text).expect("valid WAT")
}

// ---- Kubernetes objects -------------------------------------------------------------------

/// A kubectl-style `v1 List`.
pub fn list(items: impl IntoIterator<Item = Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": items.into_iter().collect::<Vec<_>>(),
    })
}

/// A Ready node with 4 cpu, 8Gi, 110 pods allocatable.
pub struct NodeBuilder {
    name: String,
    cpu: String,
    memory: String,
    ready: bool,
}

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder {
        name: name.to_string(),
        cpu: "4".into(),
        memory: "8Gi".into(),
        ready: true,
    }
}

impl NodeBuilder {
    pub fn cpu(mut self, cpu: &str) -> Self {
        self.cpu = cpu.into();
        self
    }

    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }

    pub fn build(self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "uid": format!("uid-node-{}", self.name),
                "labels": {"kubernetes.io/hostname": self.name},
                "creationTimestamp": "2020-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]
            },
            "spec": {},
            "status": {
                "allocatable": {"cpu": self.cpu, "memory": self.memory, "pods": "110"},
                "capacity": {"cpu": self.cpu, "memory": self.memory, "pods": "110"},
                "conditions": [{"type": "Ready", "status": if self.ready { "True" } else { "False" }}]
            }
        })
    }
}

/// A Running pod with one container.
pub struct PodBuilder {
    namespace: String,
    name: String,
    node: Option<String>,
    owner: Option<(String, String)>,
    cpu: String,
    memory: String,
}

pub fn pod(namespace: &str, name: &str) -> PodBuilder {
    PodBuilder {
        namespace: namespace.to_string(),
        name: name.to_string(),
        node: None,
        owner: None,
        cpu: "100m".into(),
        memory: "128Mi".into(),
    }
}

impl PodBuilder {
    pub fn on(mut self, node: &str) -> Self {
        self.node = Some(node.into());
        self
    }

    pub fn owned_by(mut self, kind: &str, name: &str) -> Self {
        self.owner = Some((kind.into(), name.into()));
        self
    }

    pub fn requests(mut self, cpu: &str, memory: &str) -> Self {
        self.cpu = cpu.into();
        self.memory = memory.into();
        self
    }

    pub fn build(self) -> Value {
        let mut metadata = json!({
            "name": self.name,
            "namespace": self.namespace,
            "uid": format!("uid-{}-{}", self.namespace, self.name),
            "creationTimestamp": "2020-01-01T00:00:00Z",
            "labels": {"app": self.owner.as_ref().map_or("bare", |(_, n)| n.as_str())}
        });
        if let Some((kind, name)) = &self.owner {
            metadata["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": kind, "name": name,
                "uid": format!("uid-{kind}-{name}"), "controller": true
            }]);
        }
        let mut spec = json!({
            "containers": [{
                "name": "main",
                "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": self.cpu, "memory": self.memory}}
            }]
        });
        if let Some(node) = &self.node {
            spec["nodeName"] = json!(node);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "phase": if self.node.is_some() { "Running" } else { "Pending" },
                "startTime": "2020-01-01T00:00:05Z",
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        })
    }
}

/// Three nodes; `n1` holds three replicas of `web` plus two other pods, the others are empty.
pub fn small_cluster() -> Value {
    list([
        node("n1").build(),
        node("n2").build(),
        node("n3").cpu("8").build(),
        pod("shop", "web-1")
            .on("n1")
            .owned_by("ReplicaSet", "web")
            .requests("500m", "512Mi")
            .build(),
        pod("shop", "web-2")
            .on("n1")
            .owned_by("ReplicaSet", "web")
            .requests("500m", "512Mi")
            .build(),
        pod("shop", "web-3")
            .on("n1")
            .owned_by("ReplicaSet", "web")
            .requests("500m", "512Mi")
            .build(),
        pod("shop", "db-0")
            .on("n1")
            .owned_by("StatefulSet", "db")
            .requests("1", "2Gi")
            .build(),
        pod("batch", "job-1")
            .on("n2")
            .owned_by("Job", "job")
            .build(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "uid": "uid-ns-shop"}}),
    ])
}

/// A profile that proposes every pod older than a minute (the builders' pods are all old):
/// PodLifeTime with `maxPodLifeTimeSeconds: 60`.
pub fn lifetime_profile() -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "everything-old",
            "pluginConfig": [
                {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}},
                {"name": "DefaultEvictor", "args": {}}
            ],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}}
        }]
    })
}

/// The value of the unlabelled series `name` (0 when absent).
pub fn metric_value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Sum of every series of the Prometheus family `name` whose labels contain `filter`.
pub fn metric_sum(text: &str, name: &str, filter: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(filter))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Everything the server sends until it closes the connection (a TLS stream counts a missing
/// close_notify as the end too). The bound only keeps a server that never closes from hanging
/// the suite.
pub async fn until_closed(stream: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) => return,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof
                    ) =>
                {
                    return;
                }
                Err(e) => panic!("reading from the server: {e}"),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server kept the connection open; it sent {:?}",
        String::from_utf8_lossy(&received)
    );
    received
}
