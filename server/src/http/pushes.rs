//! Admission of snapshot pushes: how many may read and ingest their body at once, and how
//! long the others wait.
//!
//! Owns: [`SnapshotPushes`] (`--max-concurrent-snapshot-pushes` slots, `--snapshot-push-max-wait`)
//! and its gauges on `/metrics`. A push takes its slot before it reads a byte of its body and
//! keeps it until the ingest is over, so the bodies in memory at once are bounded by the slots:
//! three concurrent 300 MB pushes once held ~1 GB before the first byte was parsed. A waiting
//! push holds no body (the client's bytes wait in the connection).
//! Must not: read bodies or parse documents (`http::clusters` and `ingest` do).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;

/// The slots of snapshot pushes. Shared (`Arc`) by every request.
#[derive(Debug)]
pub struct SnapshotPushes {
    slots: Arc<Semaphore>,
    capacity: usize,
    max_wait: Duration,
    waiting: AtomicUsize,
    refused: AtomicU64,
}

/// A push's slot, released when dropped (after its ingest, even when the client is gone).
#[derive(Debug)]
pub struct PushSlot {
    _permit: OwnedSemaphorePermit,
}

/// One waiting push in the gauge, for as long as it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(gauge: &'a AtomicUsize) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        Waiting(gauge)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl SnapshotPushes {
    /// `capacity` pushes at once (at least one); the others wait up to `max_wait`.
    pub fn new(capacity: usize, max_wait: Duration) -> SnapshotPushes {
        let capacity = capacity.max(1);
        SnapshotPushes {
            slots: Arc::new(Semaphore::new(capacity)),
            capacity,
            max_wait,
            waiting: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// A slot, once one is free; 503 `snapshot_pushes_busy` with `Retry-After` when none
    /// came free within the maximum wait.
    pub async fn admit(&self) -> Result<PushSlot, ApiError> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(PushSlot { _permit: permit });
        }
        let waited = {
            // Counted while waiting, also when the client goes away meanwhile (the request's
            // future is then dropped here).
            let _waiting = Waiting::new(&self.waiting);
            tokio::time::timeout(self.max_wait, self.slots.clone().acquire_owned()).await
        };
        match waited {
            Ok(Ok(permit)) => Ok(PushSlot { _permit: permit }),
            // The semaphore is never closed; treat it as busy all the same.
            Ok(Err(_)) | Err(_) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                let retry_after = self.max_wait.as_secs().clamp(1, u64::from(u32::MAX)) as u32;
                Err(ApiError::busy(
                    "snapshot_pushes_busy",
                    format!(
                        "{} snapshot push(es) are being ingested, the most this server takes at \
                         once (--max-concurrent-snapshot-pushes), and none finished within {} \
                         ms (--snapshot-push-max-wait); retry after {retry_after} s",
                        self.capacity,
                        self.max_wait.as_millis()
                    ),
                    retry_after,
                ))
            }
        }
    }

    /// Pushes holding a slot (reading, parsing or persisting their body).
    pub fn in_progress(&self) -> usize {
        self.capacity - self.slots.available_permits()
    }

    /// Pushes waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Append the gauges and the counter of pushes to a Prometheus text exposition.
    pub fn render_metrics(&self, out: &mut String) {
        let families: [(&str, &str, &str, u64); 3] = [
            (
                "rebalancer_snapshot_pushes_in_progress",
                "gauge",
                "Snapshot pushes holding a slot (reading, parsing or persisting their body).",
                self.in_progress() as u64,
            ),
            (
                "rebalancer_snapshot_pushes_waiting",
                "gauge",
                "Snapshot pushes waiting for a slot (--max-concurrent-snapshot-pushes).",
                self.waiting() as u64,
            ),
            (
                "rebalancer_snapshot_pushes_refused_total",
                "counter",
                "Snapshot pushes answered 503 after waiting --snapshot-push-max-wait for a slot.",
                self.refused.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, value) in families {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_are_taken_released_and_refused_with_retry_after() {
        let pushes = SnapshotPushes::new(2, Duration::ZERO);
        let a = pushes.admit().await.unwrap();
        let b = pushes.admit().await.unwrap();
        assert_eq!((pushes.in_progress(), pushes.waiting()), (2, 0));
        let refused = pushes.admit().await.unwrap_err();
        assert_eq!(refused.status, axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.code, "snapshot_pushes_busy");
        let response = axum::response::IntoResponse::into_response(refused);
        assert_eq!(response.headers()["retry-after"], "1");
        drop(a);
        let c = pushes.admit().await.unwrap();
        assert_eq!(pushes.in_progress(), 2);
        drop((b, c));
        assert_eq!(pushes.in_progress(), 0);
        let mut text = String::new();
        pushes.render_metrics(&mut text);
        assert!(
            text.contains("rebalancer_snapshot_pushes_refused_total 1\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE rebalancer_snapshot_pushes_waiting gauge\n"));
    }

    #[tokio::test]
    async fn a_waiting_push_gets_the_slot_another_frees() {
        let pushes = Arc::new(SnapshotPushes::new(1, Duration::from_secs(3600)));
        let first = pushes.admit().await.unwrap();
        let waiter = tokio::spawn({
            let pushes = pushes.clone();
            async move { pushes.admit().await.map(|_| ()) }
        });
        while pushes.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(pushes.in_progress(), 1);
        drop(first);
        waiter.await.unwrap().unwrap();
        assert_eq!(pushes.waiting(), 0);
    }

    #[tokio::test]
    async fn a_push_given_up_while_waiting_is_no_longer_counted() {
        let pushes = Arc::new(SnapshotPushes::new(1, Duration::from_secs(3600)));
        let _held = pushes.admit().await.unwrap();
        let waiter = tokio::spawn({
            let pushes = pushes.clone();
            async move { pushes.admit().await.map(|_| ()) }
        });
        while pushes.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        assert_eq!(pushes.waiting(), 0);
    }
}
