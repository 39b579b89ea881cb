//! The fake driven through kube-rs's real client: one test binary, one module per area.

mod common;
mod deletion;
mod discovery;
mod events;
mod eviction;
mod list_watch;
mod load;
mod outage;
mod rbac;
mod strict;
mod writes;
