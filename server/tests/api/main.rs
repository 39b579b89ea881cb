//! The server's integration tests, one binary (`cargo test -p rebalancer-server --test api`):
//! the real server on 127.0.0.1:0 with a temporary database, driven with reqwest; `crash` starts
//! the real `rebalancer` process and kills it at each pod-migration step; `ui` drives the web UI
//! in headless Chromium; `kube` runs the Kubernetes backend against an in-process fake API
//! server (and crashes the binary at every step there); `webhooks` delivers to a local receiver.

mod process;
mod support;

mod approval;
mod audit;
mod auth;
mod backend;
mod binary;
mod clusters;
mod compile;
mod cors;
mod crash;
mod docs;
mod eval;
mod fuzz;
mod koordinator;
mod kube;
mod kube_real;
mod kube_state;
mod live;
mod logs;
mod metrics;
mod migrations;
mod new_policy;
mod policies;
mod profiles;
mod python_policy;
mod queue;
mod restart;
mod retention;
mod runs;
mod schema_rules;
mod shutdown;
mod timeouts;
mod tls;
mod triggers;
mod ui;
mod webhooks;
mod whatif;
