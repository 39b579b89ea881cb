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
//! - [`auth`]: API tokens and roles, the admin token at first start; [`audit`]: the audit log.
//! - [`http`]: the REST API (axum + utoipa), error shape, OpenAPI document, Swagger UI.
//! - [`store`]: SQLite persistence; all SQL lives here.
//! - [`cluster`]: cluster state — ingest of Kubernetes objects, snapshots, utilization,
//!   scheduling predicates and PDB arithmetic.
//! - [`engine`]: the wasmtime host — module validation, sandbox, policy registry.
//! - [`profile`]: profiles = DeschedulerPolicy documents → [`profile::ProfileSpec`].
//! - [`run`]: one profile evaluated over one snapshot, as one descheduler cycle.
//! - [`approval`]: approving and rejecting decisions, auto-approve rules, proposal expiry.
//! - [`executor`]: arbitration and the pod-migration state machine (background task).
//! - [`backend`]: where pod migrations act — the [`backend::Backend`] trait and the simulated
//!   backend (scheduler, PDB-aware evictions and controllers over the stored cluster).
//! - [`trigger`]: what starts runs (REST, schedules, cluster changes) and executing them.
//! - [`metrics`]: Prometheus counters and histograms, rendered at `/metrics`.
//! - [`demo`]: the simulated demo cluster; [`bench`]: `rebalancer bench`.

pub mod app;
pub mod approval;
pub mod audit;
pub mod auth;
pub mod backend;
pub mod config;
pub mod executor;
pub mod http;
pub mod metrics;
pub mod telemetry;
pub mod trigger;
