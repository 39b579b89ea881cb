//! # The Kubernetes backend
//!
//! Rebalancer acting on real clusters through kube-rs: live state from watchers instead of
//! pushed snapshots, evictions through the Eviction API, reservations as Koordinator
//! Reservations or placeholder pods, and one actor per cluster through a Lease.
//!
//! # Layout
//! In the order a connected cluster uses them:
//! - [`connect`]: credentials (kubeconfig context or service account) → a kube-rs client whose
//!   own 429 retry is off. Credentials never leave the client.
//! - [`error`]: Kubernetes errors as `reason: message (code)`, permanent or transient.
//! - [`kinds`]: the watched resources, required and optional (discovered).
//! - [`lean`]: [`lean::LeanObject`], the trimmed JSON a watcher keeps of each object.
//! - [`sync`]: [`LiveCluster`]: discovery, watchers, the object cache, debounced snapshot
//!   revisions handed to a [`SnapshotSink`], and the connection status.
//! - [`backend`]: [`KubeBackend`], the `rebalancer_backend::Backend` of a connected cluster.
//! - [`lease`]: [`Leadership`], the Lease loop deciding which server acts.
//!
//! Must not: touch SQL or HTTP (the server implements [`SnapshotSink`] and routes backends), or
//! decide what to move (the engine and the executor do).

pub mod backend;
pub mod connect;
pub mod error;
pub mod kinds;
pub mod lean;
pub mod lease;
pub mod sync;

pub use backend::{ActOptions, KubeBackend, ReservationMode};
pub use connect::{Connection, Source, connect};
pub use lease::{Leadership, LeaseOptions, LeaseStatus};
pub use sync::{ConnectionState, LiveCluster, SnapshotSink, SyncOptions, SyncStatus};
