//! [`PassThroughHost`]: a [`Host`] that admits everything, so a timing measures the policy alone
//! (no evictor rules, limits or PDBs), and counts what the policy asked of it.
//!
//! Must not make decisions: every pod passes, every proposal is accepted.

use rebalancer_policy_sdk::state::StateScope;
use rebalancer_policy_sdk::{Cluster, Host, LogLevel, Refusal};

/// A host that admits everything: Ready nodes, every pod passes both filters, every proposal is
/// accepted. Measures the policy alone.
#[derive(Debug, Default, Clone)]
pub struct PassThroughHost {
    pub ready_nodes: Vec<u32>,
    pub proposals: usize,
    pub host_calls: usize,
    /// The policy's state, kept in memory.
    pub scope: StateScope,
}

impl Host for PassThroughHost {
    fn nodes(&mut self) -> Vec<u32> {
        self.ready_nodes.clone()
    }
    fn filter(&mut self, pods: &[u32]) -> Vec<u32> {
        self.host_calls += 1;
        pods.to_vec()
    }
    fn pre_eviction_filter(&mut self, pods: &[u32]) -> Vec<u32> {
        self.host_calls += 1;
        pods.to_vec()
    }
    fn propose_eviction(&mut self, _pod: u32, _reason: &str) -> Result<(), Refusal> {
        self.proposals += 1;
        Ok(())
    }
    fn node_fit(&mut self, _pod: u32, candidates: &[u32]) -> Vec<u32> {
        candidates.to_vec()
    }
    fn object_json(&mut self, _kind: &str, _index: u32) -> Option<String> {
        None
    }
    fn log(&mut self, _level: LogLevel, _message: &str) {}
    fn state_get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.scope.get(key).map(<[u8]>::to_vec)
    }
    fn state_put(&mut self, key: &str, value: &[u8]) -> Result<(), String> {
        self.scope.put(key, value)
    }
    fn state_remove(&mut self, key: &str) -> bool {
        self.scope.remove(key)
    }
    fn state_keys(&mut self) -> Vec<String> {
        self.scope.keys()
    }
}

impl PassThroughHost {
    /// A fresh host whose nodes in scope are the cluster's Ready nodes.
    pub fn new(cluster: Cluster<'_>) -> Self {
        PassThroughHost {
            ready_nodes: cluster
                .nodes()
                .filter(|n| n.is_ready())
                .map(|n| n.id)
                .collect(),
            ..PassThroughHost::default()
        }
    }
}
