//! Telemetry: the process-wide `tracing` subscriber.
//!
//! Owns: log format (text or JSON) and filtering (`RUST_LOG`, default `info` with chatty
//! dependencies quietened). Must not: be called more than once per process by anything but
//! tests (a second call is ignored).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Filter used when `RUST_LOG` is not set.
const DEFAULT_FILTER: &str = "info,sqlx=warn,wasmtime=warn,cranelift_codegen=warn,tower_http=info";

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
