//! Writes that outlive their caller, and the shutdown barrier that waits for them.
//!
//! Owns: [`InFlight`] — run a piece of work to completion even when the caller goes away
//! ([`InFlight::detached`]), and let shutdown wait for every such piece before the database
//! closes ([`InFlight::drain`]).
//! Must not: know what the work is; HTTP handlers and pipeline stages both hold a clone.

use tokio_util::task::TaskTracker;

/// Cheap to clone; every clone tracks the same set of tasks.
#[derive(Clone, Default)]
pub struct InFlight {
    /// Counts tasks rather than locking: work started while a drain waits (or by another
    /// detached task) is waited for too, and can never deadlock against the drain, which a
    /// read-write lock would (a writer waiting blocks every new reader).
    tasks: TaskTracker,
}

impl InFlight {
    /// Run `work` to completion even when the caller goes away: a client disconnecting in the
    /// middle of a write must not leave the database and the in-memory state out of step (or a
    /// run stuck `running`). Shutdown waits for these tasks.
    pub async fn detached<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        self.tasks.spawn(work).await
    }

    /// Wait until every detached task has finished, those started while waiting included
    /// (shutdown, before closing the database).
    pub async fn drain(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn drain_waits_for_work_even_when_the_caller_left() {
        let in_flight = InFlight::default();
        let finished = Arc::new(AtomicBool::new(false));
        let caller = tokio::spawn({
            let (in_flight, finished) = (in_flight.clone(), finished.clone());
            async move {
                in_flight
                    .detached(async move {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        finished.store(true, Ordering::SeqCst);
                    })
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        caller.abort();
        in_flight.drain().await;
        assert!(finished.load(Ordering::SeqCst));
    }

    /// Work that starts more work while shutdown is already draining: both finish, and the
    /// drain returns. (With the read-write lock this replaced, the inner `detached` queued
    /// behind the waiting drain, which waited for the outer task: a deadlock.)
    #[tokio::test]
    async fn work_started_by_work_during_a_drain_finishes() {
        let in_flight = InFlight::default();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let outer = {
            let in_flight = in_flight.clone();
            tokio::spawn(async move {
                let inner = in_flight.clone();
                in_flight
                    .detached(async move {
                        started_rx.await.expect("the drain started");
                        inner.detached(async { 7 }).await.expect("inner work")
                    })
                    .await
            })
        };
        tokio::task::yield_now().await;
        let drain = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.drain().await }
        });
        tokio::task::yield_now().await;
        started_tx.send(()).expect("the outer task waits");
        tokio::time::timeout(Duration::from_secs(10), drain)
            .await
            .expect("the drain returns")
            .expect("the drain task");
        assert_eq!(outer.await.expect("outer").expect("outer work"), 7);
    }
}
