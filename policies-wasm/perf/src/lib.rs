//! # policies-perf
//!
//! The built-in policies timed natively on a synthetic cluster the size of Rebalancer's reference
//! cluster (150,000 pods on 5,000 nodes). The library holds the cluster builder ([`cluster`]),
//! a host that admits everything ([`host`]), the timing loop ([`time_best_of`]) and the budget
//! tally ([`Budgets`]); the benchmark `benches/reference_cluster.rs` times every built-in against
//! its budget and checks what each proposes. Timings only mean something in release builds,
//! which `cargo bench` makes:
//!
//! `cargo bench -p policies-perf`
//!
//! Not published and not a dependency of any policy or of the server.

pub mod cluster;
pub mod host;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rebalancer_policy_sdk::{Cluster, Context};

pub use cluster::{NODES, PODS};
pub use host::PassThroughHost;

/// Timed runs never overlap, even if callers run on several threads.
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

/// The timings over their budget in one benchmark run, reported at its end (a benchmark, not a
/// test, says whether something is fast enough: no test may assert time).
#[derive(Debug, Default)]
pub struct Budgets {
    over: Vec<String>,
}

impl Budgets {
    /// Record `what` as over budget unless `best` is under `millis`. Debug builds record
    /// nothing: their timings mean nothing.
    pub fn check(&mut self, what: &str, best: Duration, millis: u128) {
        if !cfg!(debug_assertions) && best.as_millis() >= millis {
            self.over
                .push(format!("{what}: {best:?}, budget {millis} ms"));
        }
    }

    /// Every timing over its budget so far.
    pub fn over(&self) -> &[String] {
        &self.over
    }
}
