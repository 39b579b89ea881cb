//! # Rebalancer server
//!
//! Holds a cluster's state, runs WebAssembly descheduling policies over it and records the
//! pod moves they propose. `main.rs` only parses the command line and calls [`app::run`].
//!
//! # Layout
//! In pipeline order:
//! - [`config`]: command line and environment → validated [`config::Settings`].
//! - [`telemetry`]: the `tracing` subscriber.
//! - [`app`]: start-up sequence, shared [`app::AppState`], the supervised server.
//! - [`http`]: the REST API (axum + utoipa), error shape, OpenAPI document, Swagger UI.
//! - [`store`]: SQLite persistence; all SQL lives here.
//! - [`cluster`]: cluster state — ingest of Kubernetes objects, snapshots, utilization.
//! - [`engine`]: the wasmtime host — module validation, sandbox, policy registry.
//! - [`profile`]: profiles = DeschedulerPolicy documents → [`profile::ProfileSpec`].
//! - [`run`]: one profile evaluated over one snapshot, as one descheduler cycle.
//! - [`demo`]: the simulated demo cluster; [`bench`]: `rebalancer bench`.

pub mod app;
pub mod bench;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod engine;
pub mod http;
pub mod profile;
pub mod run;
pub mod store;
pub mod telemetry;
