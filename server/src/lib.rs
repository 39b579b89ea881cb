//! # Rebalancer server
//!
//! Holds a cluster's state, runs WebAssembly descheduling policies over it and records the
//! pod moves they propose. `main.rs` only parses the command line and calls [`app::run`].
//!
//! # Layout
//! In pipeline order:
//! - [`config`]: command line and environment → validated [`config::Settings`].
//! - [`telemetry`]: the `tracing` subscriber.
//! - [`app`]: start-up sequence, wiring of every stage's handles, the supervised server.
//! - [`in_flight`]: writes that outlive their caller, and the shutdown barrier for them.
//! - [`auth`]: API tokens and roles, the admin token at first start; [`audit`]: the audit log.
//! - [`http`]: the REST API (axum + utoipa) and its [`http::AppState`], error shape, OpenAPI
//!   document, Swagger UI.
//! - [`ingest`]: snapshot push and start-up load → parsed, built, persisted, swapped into
//!   `rebalancer_cluster::Clusters`.
//! - [`trigger`]: what starts runs (REST, schedules, cluster changes) and executing them
//!   (a profile evaluated by `rebalancer_engine` over one snapshot).
//! - [`approval`]: approving and rejecting decisions, auto-approve rules, proposal expiry.
//! - [`executor`]: arbitration and the pod-migration state machine (background task).
//! - [`retention`]: deleting history past its keep time, batch by batch (background task).
//! - [`webhooks`]: the change feed turned into signed deliveries to portals, retried with
//!   backoff (background task).
//! - [`backend`]: where pod migrations act — the simulated backend (scheduler, PDB-aware
//!   evictions and controllers over the stored cluster) and [`backend::Backends`], which routes
//!   each cluster to its backend (the contract is `rebalancer_backend`).
//! - [`managed`]: Kubernetes clusters the operator connected (`rebalancer_kube`): live sync,
//!   Leases, their backends, and whether this server may act on each.
//! - [`whatif`]: the balance thresholds of a profile, for the balance and what-if views
//!   (`rebalancer_cluster::whatif` computes them).
//! - [`eval`]: `rebalancer eval`, a run offline on a snapshot file (no database, no server) with
//!   the same parsing, sandbox and cycle as the server's.
//! - [`metrics`]: Prometheus counters and histograms, rendered at `/metrics`.
//! - [`strict_json`]: request bodies take a JSON object where the API document says object,
//!   and an integer written `192.0` where it says integer.
//! - [`new_policy`]: `rebalancer new-policy DIR`, a policy crate of one's own from the example.
//!
//! Elsewhere: `rebalancer_store` (SQLite, all SQL), `rebalancer_cluster` (cluster state),
//! `rebalancer_backend` (the backend contract), `rebalancer_kube` (the Kubernetes backend),
//! `rebalancer_engine` (the wasmtime host, profiles, runs), `rebalancer_builtins`,
//! `rebalancer_sim` (the demo cluster) and `rebalancer_bench`.
//!
//! Pipeline stages take the few handles they use (`&Store`, a small `Deps` struct); only
//! `http` holds the whole [`http::AppState`], and nothing outside `http` but `app` imports it.

pub mod app;
pub mod approval;
pub mod audit;
pub mod auth;
pub mod backend;
pub mod config;
pub mod eval;
pub mod executor;
pub mod http;
pub mod in_flight;
pub mod ingest;
pub mod managed;
pub mod metrics;
pub mod new_policy;
pub mod retention;
pub mod strict_json;
pub mod telemetry;
pub mod trigger;
pub mod webhooks;
pub mod whatif;
