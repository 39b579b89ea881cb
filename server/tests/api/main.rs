//! HTTP-level tests: the real server on 127.0.0.1:0 with a temporary database, driven with
//! reqwest. One binary (`cargo test -p rebalancer-server --test api`).

mod support;

mod approval;
mod audit;
mod auth;
mod backend;
mod binary;
mod clusters;
mod docs;
mod metrics;
mod migrations;
mod policies;
mod profiles;
mod restart;
mod runs;
mod triggers;
