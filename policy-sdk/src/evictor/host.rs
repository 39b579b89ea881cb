//! [`Evictor`]: the cheap per-plugin-call view over the shared pieces (snapshot, [`ClusterIndex`],
//! [`EvictorConfig`], [`RunState`]) that implements the policy-facing [`Host`] trait.
//!
//! Owns construction and the [`Host`] mapping only: the Filter/PreEvictionFilter rules are in
//! [`super::filter`], proposals and admission in [`super::propose`].

use super::config::EvictorConfig;
use super::index::ClusterIndex;
use super::node_fit::node_fit_error;
use super::state::{LogEntry, RunState};
use std::fmt;

use crate::policy::{Host, LogLevel, Refusal};
use crate::state::StateScope;
use crate::view::Cluster;

/// Serves [`Host::object_json`]: the full object of a `kind` (`Pod`, `Node`, …) by table index.
pub type ObjectJsonFn<'a> = dyn FnMut(&str, u32) -> Option<String> + 'a;

/// The evictor for one plugin call: cheap to build ([`Evictor::new`]), borrows the shared
/// pieces, owns only the log lines the policy writes. Implements [`Host`]. `index` and `state`
/// must have been built from `cluster`.
pub struct Evictor<'a> {
    pub cluster: Cluster<'a>,
    pub index: &'a ClusterIndex,
    pub config: &'a EvictorConfig,
    pub state: &'a mut RunState,
    /// What [`Host::nodes`] returns: ready nodes matching the policy's nodeSelector, ascending.
    pub nodes_in_scope: &'a [u32],
    pub plugin: &'a str,
    pub plugin_set: &'a str,
    /// What [`Host::log`] collected, in order.
    pub logs: Vec<LogEntry>,
    /// Serves [`Host::object_json`]; `None` answers `None`.
    pub object_json: Option<&'a mut ObjectJsonFn<'a>>,
    /// The policy's state scope; `None`: state is unavailable (reads find nothing, writes are
    /// refused).
    pub scope: Option<&'a mut StateScope>,
}

impl<'a> Evictor<'a> {
    pub fn new(
        cluster: Cluster<'a>,
        index: &'a ClusterIndex,
        config: &'a EvictorConfig,
        state: &'a mut RunState,
        nodes_in_scope: &'a [u32],
        plugin: &'a str,
        plugin_set: &'a str,
    ) -> Self {
        Evictor {
            cluster,
            index,
            config,
            state,
            nodes_in_scope,
            plugin,
            plugin_set,
            logs: Vec::new(),
            object_json: None,
            scope: None,
        }
    }

    /// Serve the state calls from `scope`.
    pub fn with_scope(mut self, scope: &'a mut StateScope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Answer [`Host::object_json`] with `f`.
    pub fn with_object_json(mut self, f: &'a mut ObjectJsonFn<'a>) -> Self {
        self.object_json = Some(f);
        self
    }
}

impl fmt::Debug for Evictor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Evictor")
            .field("plugin", &self.plugin)
            .field("plugin_set", &self.plugin_set)
            .field("proposals", &self.state.proposals.len())
            .finish()
    }
}

impl Host for Evictor<'_> {
    fn nodes(&mut self) -> Vec<u32> {
        self.nodes_in_scope.to_vec()
    }

    fn filter(&mut self, pods: &[u32]) -> Vec<u32> {
        pods.iter()
            .copied()
            .filter(|&p| self.passes_filter(p))
            .collect()
    }

    fn pre_eviction_filter(&mut self, pods: &[u32]) -> Vec<u32> {
        pods.iter()
            .copied()
            .filter(|&p| self.passes_pre_eviction_filter(p))
            .collect()
    }

    fn propose_eviction(&mut self, pod: u32, reason: &str) -> Result<(), Refusal> {
        self.propose(pod, reason)
    }

    fn node_fit(&mut self, pod: u32, candidates: &[u32]) -> Vec<u32> {
        if !self.valid_pod(pod) {
            return Vec::new();
        }
        let pod_ref = self.cluster.pod(pod);
        candidates
            .iter()
            .copied()
            .filter(|&n| {
                self.valid_node(n)
                    && node_fit_error(self.index, pod_ref, self.cluster.node(n)).is_none()
            })
            .collect()
    }

    fn object_json(&mut self, kind: &str, index: u32) -> Option<String> {
        self.object_json.as_mut().and_then(|f| f(kind, index))
    }

    fn state_get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.scope.as_ref()?.get(key).map(<[u8]>::to_vec)
    }

    fn state_put(&mut self, key: &str, value: &[u8]) -> Result<(), String> {
        match self.scope.as_mut() {
            Some(scope) => scope.put(key, value),
            None => Err("policy state is not available here".into()),
        }
    }

    fn state_remove(&mut self, key: &str) -> bool {
        self.scope.as_mut().is_some_and(|s| s.remove(key))
    }

    fn state_keys(&mut self) -> Vec<String> {
        self.scope.as_ref().map(|s| s.keys()).unwrap_or_default()
    }

    fn log(&mut self, level: LogLevel, message: &str) {
        self.logs.push(LogEntry {
            level,
            plugin: self.plugin.to_owned(),
            plugin_set: self.plugin_set.to_owned(),
            message: message.to_owned(),
        });
    }
}
