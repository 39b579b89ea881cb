//! What the nodes do to the API in a real cluster, reduced to what a descheduler can observe:
//! the kubelet stand-in, which finishes the graceful termination of deleted pods (its final
//! delete with grace 0, so finalizers still hold a pod), and node status heartbeats.
//!
//! Owns the background tasks of both; they stop with the server. Must not change anything a
//! scheduler reads: heartbeats touch only `status.conditions[*].lastHeartbeatTime`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::http::Shared;

/// When the kubelet stand-in removes a pod whose graceful deletion started (see
/// `FakeApiServer::set_kubelet`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kubelet {
    /// Remove the pod this long after its deletion started, or at the end of its grace period
    /// if that comes sooner (containers that exit quickly on SIGTERM).
    After(Duration),
    /// Remove it at the end of its grace period (containers that ignore SIGTERM).
    Grace,
    /// Never by itself: `FakeApiServer::finish_termination` removes it.
    Manual,
}

impl Default for Kubelet {
    /// `After(300 ms)`.
    fn default() -> Self {
        Kubelet::After(Duration::from_millis(300))
    }
}

impl Kubelet {
    /// When a pod whose deletion started `since`, with this grace, is due.
    fn due(self, since: Instant, grace: Duration) -> Option<Instant> {
        match self {
            Kubelet::After(after) => Some(since + after.min(grace)),
            Kubelet::Grace => Some(since + grace),
            Kubelet::Manual => None,
        }
    }
}

/// The kubelet stand-in's loop: finishes every due pod, then sleeps until the next is due or a
/// deletion (or a change of mode) wakes it, until `stop` changes or its sender is dropped.
pub(crate) async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<()>) {
    let wake = shared.store.lock().kubelet_wake.clone();
    loop {
        let mode = shared.kubelet();
        let now = Instant::now();
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for ((namespace, name), pod) in &shared.store.lock().terminating {
            match mode.due(pod.since, pod.grace) {
                Some(at) if at <= now => {
                    due.push((namespace.clone(), name.clone(), pod.uid.clone()))
                }
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        for (namespace, name, uid) in due {
            shared
                .store
                .finish_termination(&namespace, &name, Some(&*uid));
        }
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.changed() => break,
            () = wake.notified() => {}
            () = sleep => {}
        }
    }
}

/// Heartbeats every `interval` until `stop` changes or its sender is dropped.
pub(crate) async fn heartbeats(
    shared: Arc<Shared>,
    interval: Duration,
    mut stop: watch::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            () = tokio::time::sleep(interval) => {
                shared.store.heartbeat_nodes();
            }
        }
    }
}
