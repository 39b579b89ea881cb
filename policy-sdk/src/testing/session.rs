//! The native runner: [`TestSession`] (a snapshot with its index, resolved evictor and one run's
//! state, so several policies can share a run) and [`run`], which evaluates a [`Policy`] against
//! the same [`Evictor`](crate::evictor::Evictor) the server uses.
//!
//! Owns running; the results it reports are [`super::outcome`].

use super::*;
use crate::evictor::{ClusterIndex, Evictor, EvictorConfig, RunState};
use crate::policy::{ArgError, Context, ExtensionPoint, Policy, evaluate};
use crate::state::StateScope;
use crate::view::Cluster;

/// Run one extension point of `P` against `cluster` in a fresh run (see [`TestCluster::run`]).
pub fn run<P: Policy>(cluster: &TestCluster, point: ExtensionPoint, args: &str) -> TestRun {
    cluster.run::<P>(point, args)
}

/// A snapshot with its index, evictor configuration and the state of one run.
pub struct TestSession {
    pub(super) bytes: rkyv::util::AlignedVec,
    pub(super) index: ClusterIndex,
    pub(super) config: Result<EvictorConfig, Vec<ArgError>>,
    pub(super) nodes_in_scope: Result<Vec<u32>, String>,
    pub(super) state: RunState,
    pub(super) logs: Vec<LogEntry>,
}

impl std::fmt::Debug for TestSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestSession")
            .field("cluster", &self.cluster())
            .field("proposals", &self.state.proposals().len())
            .finish()
    }
}

fn arg_errors(errors: &[ArgError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl TestSession {
    pub fn cluster(&self) -> Cluster<'_> {
        // SAFETY: `bytes` came from `model::to_bytes` and was validated in `TestCluster::session`.
        unsafe { Cluster::from_bytes_unchecked(&self.bytes) }
    }

    pub fn index(&self) -> &ClusterIndex {
        &self.index
    }

    /// The resolved evictor configuration, or why the evictor args were rejected.
    pub fn config(&self) -> Result<&EvictorConfig, &[ArgError]> {
        self.config.as_ref().map_err(Vec::as_slice)
    }

    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Id of the pod `namespace/name`. Panics when there is none.
    pub fn pod_id(&self, namespace: &str, name: &str) -> u32 {
        self.cluster()
            .pods()
            .find(|p| p.namespace() == namespace && p.name() == name)
            .map(|p| p.id)
            .unwrap_or_else(|| panic!("no pod {namespace}/{name} in the test cluster"))
    }

    /// Id of the node `name`. Panics when there is none.
    pub fn node_id(&self, name: &str) -> u32 {
        self.cluster()
            .nodes()
            .find(|n| n.name() == name)
            .map(|n| n.id)
            .unwrap_or_else(|| panic!("no node {name} in the test cluster"))
    }

    /// The evictor as a plugin of plugin set `default` sees it (its log lines stay in it). Panics
    /// when the evictor args or the node selector are invalid.
    pub fn evictor(&mut self, plugin: &'static str) -> Evictor<'_> {
        let config = match &self.config {
            Ok(c) => c,
            Err(e) => panic!("invalid evictor args: {}", arg_errors(e)),
        };
        let nodes = match &self.nodes_in_scope {
            Ok(n) => n,
            Err(e) => panic!("invalid node selector: {e}"),
        };
        // SAFETY: as in `cluster`.
        let cluster = unsafe { Cluster::from_bytes_unchecked(&self.bytes) };
        Evictor::new(
            cluster,
            &self.index,
            config,
            &mut self.state,
            nodes,
            plugin,
            "default",
        )
    }

    /// Run `P` as a plugin of plugin set `default`, continuing this session's run.
    pub fn run<P: Policy>(&mut self, point: ExtensionPoint, args: &str) -> TestRun {
        self.run_in::<P>("default", point, args)
    }

    /// Run `P` as a plugin of `plugin_set`, continuing this session's run. Its state starts
    /// empty (see [`TestSession::run_with_state`]).
    pub fn run_in<P: Policy>(
        &mut self,
        plugin_set: &str,
        point: ExtensionPoint,
        args: &str,
    ) -> TestRun {
        let mut state = StateScope::default();
        self.run_in_with_state::<P>(plugin_set, point, args, &mut state)
    }

    /// Run `P` as a plugin of plugin set `default` with `state` as its policy state, committing
    /// what it changes into `state` only if it succeeds, as the server does. Pass the same
    /// `state` to the runs of several sessions (one per simulated cluster revision) to test a
    /// policy that remembers.
    pub fn run_with_state<P: Policy>(
        &mut self,
        point: ExtensionPoint,
        args: &str,
        state: &mut StateScope,
    ) -> TestRun {
        self.run_in_with_state::<P>("default", point, args, state)
    }

    /// [`TestSession::run_with_state`] as a plugin of `plugin_set`.
    pub fn run_in_with_state<P: Policy>(
        &mut self,
        plugin_set: &str,
        point: ExtensionPoint,
        args: &str,
        state: &mut StateScope,
    ) -> TestRun {
        let mut scope = state.reloaded();
        let (p0, r0, l0) = (
            self.state.proposals().len(),
            self.state.refusals().len(),
            self.logs.len(),
        );
        let plugin = P::info().name;
        // SAFETY: as in `cluster`.
        let cluster = unsafe { Cluster::from_bytes_unchecked(&self.bytes) };
        let result = match (&self.config, &self.nodes_in_scope) {
            (Err(e), _) => Err(format!("invalid evictor args: {}", arg_errors(e))),
            (_, Err(e)) => Err(format!("invalid node selector: {e}")),
            (Ok(config), Ok(nodes)) => {
                let mut evictor = Evictor::new(
                    cluster,
                    &self.index,
                    config,
                    &mut self.state,
                    nodes,
                    &plugin,
                    plugin_set,
                )
                .with_scope(&mut scope);
                let mut ctx = Context::new(cluster, &mut evictor);
                let result = evaluate::<P>(&mut ctx, point, args);
                self.logs.append(&mut evictor.logs);
                result
            }
        };
        let state_changed = result.is_ok() && scope.changed();
        if state_changed {
            *state = scope.reloaded();
        }
        let describe = |pod: u32| {
            if (pod as usize) < cluster.pod_count() {
                let p = cluster.pod(pod);
                (
                    p.namespace().to_owned(),
                    p.name().to_owned(),
                    p.node_name().to_owned(),
                )
            } else {
                (String::new(), format!("<unknown pod {pod}>"), String::new())
            }
        };
        TestRun {
            proposals: self.state.proposals()[p0..]
                .iter()
                .map(|a| {
                    let (namespace, name, node) = describe(a.pod);
                    Proposal {
                        pod: a.pod,
                        namespace,
                        name,
                        node,
                        reason: a.reason.clone(),
                        plugin: a.plugin.clone(),
                        plugin_set: a.plugin_set.clone(),
                    }
                })
                .collect(),
            refusals: self.state.refusals()[r0..]
                .iter()
                .map(|r| {
                    let (namespace, name, _) = describe(r.pod);
                    Refused {
                        pod: r.pod,
                        namespace,
                        name,
                        reason: r.reason.clone(),
                        refusal: r.refusal.clone(),
                    }
                })
                .collect(),
            logs: self.logs[l0..].to_vec(),
            result,
            state_changed,
        }
    }
}
