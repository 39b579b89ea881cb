//! A failure that repeats, logged so that people can follow it without drowning in it.
//!
//! Owns [`Repeated`]: the first failure of a run of failures (and a failure whose text differs
//! from the previous one) is a WARN with its error; while the same error goes on, only a count,
//! at the 10th, 100th, 1000th… failure; the first success after a run of failures is an INFO
//! saying how many there were. Must not: decide whether or when to retry (callers do, with
//! their own schedule), or hold anything but the count and the last error's text.
//!
//! Shared by the Kubernetes backend (a cluster's Lease loop, its discovery) and the executor
//! (a pod migration's backend calls, a reservation's release), so every retried failure in
//! the log reads the same way.

/// The state of one repeating operation.
#[derive(Debug)]
pub struct Repeated {
    cluster: String,
    /// What is failing, for the log: `cluster lease`, `pod migration 12`.
    what: String,
    failures: u64,
    last: Option<String>,
}

impl Repeated {
    pub fn new(cluster: &str, what: impl Into<String>) -> Repeated {
        Repeated {
            cluster: cluster.to_owned(),
            what: what.into(),
            failures: 0,
            last: None,
        }
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Note a failure; logs it when it starts a run, changes, or reaches a power of ten.
    pub fn failed(&mut self, error: &str) {
        self.failures += 1;
        let changed = self.last.as_deref() != Some(error);
        if changed {
            tracing::warn!(
                cluster = %self.cluster, what = %self.what, error, failures = self.failures,
                "{} failing; retrying (repeats are counted, not logged)", self.what
            );
            self.last = Some(error.to_owned());
        } else if self.failures >= 10 && is_power_of_ten(self.failures) {
            tracing::warn!(
                cluster = %self.cluster, what = %self.what, error, failures = self.failures,
                "{} still failing", self.what
            );
        } else {
            tracing::debug!(cluster = %self.cluster, what = %self.what, error, failures = self.failures, "{} failed again", self.what);
        }
    }

    /// Note a success; logs the end of a run of failures.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(
                cluster = %self.cluster, what = %self.what, failures = self.failures,
                "{} works again", self.what
            );
        }
        self.failures = 0;
        self.last = None;
    }
}

fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_runs_of_failures() {
        let mut r = Repeated::new("east", "cluster lease");
        r.failed("get: Forbidden: no (403)");
        r.failed("get: Forbidden: no (403)");
        assert_eq!(r.failures(), 2);
        r.succeeded();
        assert_eq!(r.failures(), 0);
        assert!(r.last.is_none());
        r.failed("x");
        assert_eq!(r.last.as_deref(), Some("x"));
    }

    #[test]
    fn powers_of_ten() {
        let logged: Vec<u64> = (1..=1000).filter(|n| is_power_of_ten(*n)).collect();
        assert_eq!(logged, [1, 10, 100, 1000]);
    }
}
