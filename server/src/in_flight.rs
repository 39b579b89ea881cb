//! Writes that outlive their caller, and the shutdown barrier that waits for them.
//!
//! Owns: [`InFlight`] — run a piece of work to completion even when the caller goes away
//! ([`InFlight::detached`]), and let shutdown wait for every such piece before the database
//! closes ([`InFlight::drain`]).
//! Must not: know what the work is; HTTP handlers and pipeline stages both hold a clone.

use std::sync::Arc;

use tokio::sync::RwLock;

/// Cheap to clone; every clone guards the same set of tasks.
#[derive(Clone, Default)]
pub struct InFlight {
    /// Held (shared) by every detached task; [`InFlight::drain`] takes it exclusively.
    guard: Arc<RwLock<()>>,
}

impl InFlight {
    /// Run `work` to completion even when the caller goes away: a client disconnecting in the
    /// middle of a write must not leave the database and the in-memory state out of step (or a
    /// run stuck `running`). Shutdown waits for these tasks.
    pub async fn detached<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let guard = self.guard.clone().read_owned().await;
        tokio::spawn(async move {
            let _guard = guard;
            work.await
        })
        .await
    }

    /// Wait until every detached task has finished (shutdown, before closing the database).
    pub async fn drain(&self) {
        drop(self.guard.write().await);
    }
}
