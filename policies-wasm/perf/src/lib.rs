//! # policies-perf
//!
//! The built-in policies timed natively on a synthetic cluster the size of Rebalancer's reference
//! cluster (150,000 pods on 5,000 nodes). The library holds the cluster builder ([`cluster`]),
//! a host that admits everything ([`host`]) and the timing loop ([`time_best_of`]); the tests in
//! `tests/reference_cluster.rs` time every built-in and check what each proposes. They are
//! `#[ignore]`d (slow in debug builds, meaningful only in release):
//!
//! `cargo test -p policies-perf --release -- --ignored --nocapture`
//!
//! Not published and not a dependency of any policy or of the server.

pub mod cluster;
pub mod host;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rebalancer_policy_sdk::{Cluster, Context};

pub use cluster::{NODES, PODS};
pub use host::PassThroughHost;

/// Timed runs never overlap, even when the test harness runs tests on several threads.
static TIMING: Mutex<()> = Mutex::new(());

/// The fastest of `runs` passes of `pass` over `cluster`, each with a fresh [`PassThroughHost`],
/// and the last pass's result. `check` sees every pass's result and host (outside the timing).
pub fn time_best_of<T>(
    cluster: Cluster<'_>,
    runs: usize,
    mut pass: impl FnMut(&mut Context<'_>) -> Result<T, String>,
    mut check: impl FnMut(&T, &PassThroughHost),
) -> (Duration, T, PassThroughHost) {
    assert!(runs > 0, "at least one run");
    let _exclusive = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let fresh = PassThroughHost::new(cluster);
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let mut host = fresh.clone();
        let mut ctx = Context::new(cluster, &mut host);
        let start = Instant::now();
        let result = pass(&mut ctx).expect("the pass runs");
        best = best.min(start.elapsed());
        check(&result, &host);
        last = Some((result, host));
    }
    let (result, host) = last.expect("at least one run");
    (best, result, host)
}

/// In release builds, `best` must be under `millis` (debug timings mean nothing).
#[track_caller]
pub fn assert_faster_than(best: Duration, millis: u128) {
    if !cfg!(debug_assertions) {
        assert!(best.as_millis() < millis, "took {best:?}");
    }
}
