//! Helpers shared by the kube-client tests.

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::core::Status;
use rebalancer_kube_fake::FakeApiServer;
use serde_json::{Value, json};

/// A client for `server`. Retries of 429/503/504 are off: kube's default retry layer would
/// retry a PDB's 429 fifteen times with exponential backoff.
pub fn client(server: &FakeApiServer) -> kube::Client {
    let mut config = kube::Config::new(server.url().parse().expect("the fake's URL parses"));
    config.default_retry = false;
    kube::Client::try_from(config).expect("a client for the fake")
}

/// A pod object, Running and Ready on `node`.
pub fn pod(namespace: &str, name: &str, labels: Value, node: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// A client authenticating with a kubeconfig that carries `token`.
pub async fn client_with_token(server: &FakeApiServer, token: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_with_token("t", token))
        .expect("the fake's kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a config from the fake's kubeconfig");
    config.default_retry = false;
    kube::Client::try_from(config).expect("a client for the fake")
}

/// The uid of a stored object.
pub fn uid_of(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .expect("a stored object has a uid")
        .to_string()
}

/// The next item of a stream; panics if none comes within 30 s (a hang guard, not a timing
/// assertion) or the stream ends.
pub async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the stream produced nothing for 30 s")
        .expect("the stream ended")
}

/// The `Status` of an API error; panics on any other outcome.
pub fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}
