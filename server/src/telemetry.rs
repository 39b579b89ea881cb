//! Telemetry: the process-wide `tracing` subscriber.
//!
//! Owns: log format (text or JSON) and filtering (`RUST_LOG`, default `info` with chatty
//! dependencies quietened). Must not: be called more than once per process by anything but
//! tests (a second call is ignored).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Filter used when `RUST_LOG` is not set. kube-rs's client logs an ERROR for every failed
/// request (`kube_client::client::builder`, each retry of an unreachable API server) and its
/// watcher a WARN with a debug dump for every 403 retry: the Kubernetes backend logs those
/// failures itself, once and then counted, as `reason: message (code)`.
const DEFAULT_FILTER: &str = "info,sqlx=warn,wasmtime=warn,cranelift_codegen=warn,tower_http=info,\
                              kube_client=off,kube_runtime=error";

/// Install the global subscriber, writing to stderr. Returns false when one was already set.
pub fn init(format: LogFormat) -> bool {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.try_init().is_ok(),
        LogFormat::Json => builder.json().try_init().is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::EnvFilter;

    use super::DEFAULT_FILTER;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn kube_clients_per_request_errors_are_filtered_ours_are_not() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(DEFAULT_FILTER))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "kube_client::client::builder", "failed with error client error (Connect)");
            tracing::warn!(target: "kube_runtime::watcher", "watch list error with 403");
            tracing::warn!(target: "rebalancer_kube::repeated", "cluster lease failing");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("failed with error"), "{text}");
        assert!(!text.contains("403"), "{text}");
        assert!(text.contains("cluster lease failing"), "{text}");
    }
}
