//! What a test run reports: [`TestRun`] with its accepted [`Proposal`]s, [`Refused`] proposals and
//! log lines, plus the assertions and accessors tests use on it.
//!
//! Plain data; must not run anything.

use super::*;
use crate::policy::Refusal;

/// An accepted proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub pod: u32,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName` of the pod.
    pub node: String,
    pub reason: String,
    pub plugin: String,
    pub plugin_set: String,
}

/// A refused proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub pod: u32,
    pub namespace: String,
    pub name: String,
    pub reason: String,
    pub refusal: Refusal,
}

/// What one policy did in a run.
#[derive(Debug, Clone)]
pub struct TestRun {
    /// Accepted proposals, in order.
    pub proposals: Vec<Proposal>,
    pub refusals: Vec<Refused>,
    pub logs: Vec<LogEntry>,
    /// The policy's result (`Err` also when the args, evictor args or node selector are invalid).
    pub result: Result<(), String>,
    /// The policy changed its state and succeeded, so the change was committed.
    pub state_changed: bool,
}

impl TestRun {
    /// Names of the proposed pods, in order.
    pub fn evicted_names(&self) -> Vec<&str> {
        self.proposals.iter().map(|p| p.name.as_str()).collect()
    }

    /// `(namespace, name)` of the proposed pods, in order.
    pub fn evicted(&self) -> Vec<(&str, &str)> {
        self.proposals
            .iter()
            .map(|p| (p.namespace.as_str(), p.name.as_str()))
            .collect()
    }

    /// Names of the pods proposed from `node`.
    pub fn evicted_from(&self, node: &str) -> Vec<&str> {
        self.proposals
            .iter()
            .filter(|p| p.node == node)
            .map(|p| p.name.as_str())
            .collect()
    }

    pub fn was_evicted(&self, namespace: &str, name: &str) -> bool {
        self.proposals
            .iter()
            .any(|p| p.namespace == namespace && p.name == name)
    }

    /// Names of the pods whose proposals were refused, in order.
    pub fn refused_names(&self) -> Vec<&str> {
        self.refusals.iter().map(|r| r.name.as_str()).collect()
    }

    pub fn log_messages(&self) -> Vec<&str> {
        self.logs.iter().map(|l| l.message.as_str()).collect()
    }

    /// Panics with the error and the policy's logs unless the policy succeeded.
    #[track_caller]
    pub fn assert_ok(&self) -> &Self {
        if let Err(e) = &self.result {
            panic!(
                "policy failed: {e}\nlogs:\n{}",
                self.log_messages().join("\n")
            );
        }
        self
    }
}
