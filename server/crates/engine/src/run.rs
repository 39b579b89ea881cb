//! A run: one profile evaluated over one cluster snapshot, the way one descheduler cycle runs.
//!
//! Owns the cycle's order and shared state: nodes in scope (Ready + the profile's nodeSelector;
//! fewer than two → the cycle is skipped), the deschedule plugins of every plugin set first, then
//! the balance plugins, one [`RunState`] (limits, proposed-so-far = terminating) threaded through
//! all of them, and the report. Must not touch SQL or HTTP: callers persist the report.
//!
//! The same [`cycle`] runs with the policies compiled to wasm ([`execute`]) or, in the
//! benchmark (`rebalancer-bench`, the only place that links policies natively), linked natively
//! for the wasm-vs-native comparison.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rebalancer_policy_sdk::ExtensionPoint;
use rebalancer_policy_sdk::evictor::{
    ClusterIndex, DefaultEvictorArgs, EvictorConfig, Limits, RunState,
};
use rebalancer_policy_sdk::k8s::selector::Selector;
use rebalancer_policy_sdk::state::StateScope;
use serde::{Deserialize, Serialize};

use rebalancer_cluster::ClusterSnapshot;

use crate::profile::{PluginSpec, ProfileError, ProfileSpec};
use crate::wasm::{EvalSession, Evaluation, PolicyFailure, PolicyLog, PolicyRegistry};

/// Log lines kept per policy outcome in a report (the rest are counted).
const MAX_LOGS_IN_REPORT: usize = 200;

/// The state scope (plugin set, policy) where the evictor's `cooldown` remembers, profile-wide,
/// when a pod of each owner was last proposed: owner uid → ms (8 bytes, little-endian).
pub const COOLDOWN_SCOPE: (&str, &str) = ("*", "DefaultEvictor.cooldown");
/// Its size cap: the host's own bookkeeping, about 45 bytes per owner.
const COOLDOWN_MAX_BYTES: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the profile cannot run on this cluster")]
    InvalidProfile(Vec<ProfileError>),
}

/// What a run did.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// Ready nodes matching the profile's nodeSelector.
    pub nodes_in_scope: u32,
    /// Why the cycle did nothing, when it was skipped.
    pub skipped: Option<String>,
    pub policies: Vec<PolicyOutcome>,
    /// Proposals accepted in the whole cycle.
    #[serde(default)]
    pub proposal_count: usize,
    /// The proposals themselves. Not serialised: a run stores them as its decisions
    /// (`GET /api/v1/decisions?run={id}`), so the run object stays small on large clusters.
    #[serde(skip)]
    #[schema(ignore)]
    pub proposals: Vec<Proposal>,
    /// The refused proposals, in order: the first
    /// [`MAX_RECORDED_REFUSALS`](rebalancer_policy_sdk::evictor::MAX_RECORDED_REFUSALS) of the
    /// cycle (each policy's `refusals` counts them all). Not serialised: for callers that show
    /// them (`rebalancer eval`).
    #[serde(skip)]
    #[schema(ignore)]
    pub refusals: Vec<RefusedProposal>,
    /// Wall time of the whole cycle, in milliseconds.
    pub duration_ms: f64,
    /// `wasm` or `native`.
    pub mode: String,
    /// The policy state scopes that succeeding evaluations changed, to commit with the run.
    /// Not serialised.
    #[serde(skip)]
    #[schema(ignore)]
    pub state_updates: Vec<StateUpdate>,
}

/// The policy state scopes of one profile on one cluster, as loaded before a run: the scope of
/// each (plugin set, policy) that has one, with the version it was loaded at.
#[derive(Debug, Clone, Default)]
pub struct PolicyStates {
    pub scopes: HashMap<(String, String), (StateScope, i64)>,
    /// The size cap of a scope (keys plus values), for scopes created by this run.
    pub max_bytes: usize,
}

impl PolicyStates {
    pub fn new(max_bytes: usize) -> Self {
        PolicyStates {
            scopes: HashMap::new(),
            max_bytes,
        }
    }

    /// The scope of `plugin` in `plugin_set` and the version it was loaded at (0: none yet).
    fn take(&mut self, plugin_set: &str, plugin: &str) -> (StateScope, i64) {
        self.scopes
            .remove(&(plugin_set.to_owned(), plugin.to_owned()))
            .unwrap_or_else(|| (StateScope::new(Default::default(), self.max_bytes), 0))
    }
}

/// A policy's state scope to commit: its new keys and values, and the version it was loaded at
/// (the commit succeeds only if the stored scope is still at that version).
#[derive(Debug, Clone)]
pub struct StateUpdate {
    pub plugin_set: String,
    pub plugin: String,
    pub scope: StateScope,
    pub base_version: i64,
}

/// One plugin's evaluation within a run.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyOutcome {
    pub plugin: String,
    pub plugin_set: String,
    pub extension_point: String,
    pub duration_ms: f64,
    /// CPU time of the thread that evaluated the policy, in milliseconds: `durationMs` without
    /// time spent waiting for a core (absent where the platform has no thread clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<f64>,
    /// Proposals accepted.
    pub proposals: u32,
    /// Proposals refused (limits, PDBs, not evictable).
    pub refusals: u32,
    pub error: Option<PolicyFailure>,
    pub logs: Vec<PolicyLog>,
    /// Log lines beyond those kept in `logs`: over the sandbox's log caps, or deleted by the
    /// server's retention together with the run's proposals.
    pub logs_dropped: u32,
    /// Peak linear memory of the instance, in bytes (0 for native runs).
    pub peak_memory_bytes: u64,
    /// The snapshot sections the policy pulled (`core`, `pod-tolerations`, …), one entry per
    /// section in the order it first asked for each, with how often it asked; empty for native
    /// runs, which read the archive in place.
    #[serde(default, deserialize_with = "sections_pulled")]
    pub snapshot_sections: Vec<SectionPull>,
    /// Their total size in bytes: what was handed into the policy's memory, all calls together.
    #[serde(default)]
    pub snapshot_bytes: u64,
    /// The policy changed its state, but another run committed that state first: this run's
    /// change was dropped (the proposals stand). Absent when there was no conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_conflict: Option<String>,
}

/// A snapshot section one evaluation pulled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SectionPull {
    /// The section's name (`core`, `pod-names`, …).
    pub section: String,
    /// How often it was handed over (`map-section`, `snapshot`, `snapshot-section` calls).
    pub calls: u32,
}

/// `snapshotSections` as stored: one object per section, or — in reports stored before sections
/// were counted — one name per call, which is merged into the same form.
fn sections_pulled<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<SectionPull>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Counted { section: String, calls: u32 },
        Name(String),
    }
    let mut pulled: Vec<SectionPull> = Vec::new();
    for stored in Vec::<Stored>::deserialize(d)? {
        let (section, calls) = match stored {
            Stored::Counted { section, calls } => (section, calls),
            Stored::Name(section) => (section, 1),
        };
        match pulled.iter_mut().find(|p| p.section == section) {
            Some(p) => p.calls = p.calls.saturating_add(calls),
            None => pulled.push(SectionPull { section, calls }),
        }
    }
    Ok(pulled)
}

/// One accepted eviction proposal.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Proposal {
    pub pod_uid: String,
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub plugin: String,
    pub plugin_set: String,
    pub reason: String,
}

/// One refused proposal: the pod, who proposed it and why the evictor refused it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedProposal {
    pub pod_uid: String,
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub plugin: String,
    pub plugin_set: String,
    /// The reason the policy gave.
    pub reason: String,
    /// Why it was refused (a limit, a PDB, the evictor's filters).
    pub refusal: String,
}

/// Evaluate `profile` over `snapshot` with the registered wasm policies. Blocking.
pub fn execute(
    engine: &crate::wasm::Engine,
    registry: &PolicyRegistry,
    profile: &ProfileSpec,
    snapshot: &Arc<ClusterSnapshot>,
    states: PolicyStates,
) -> Result<RunReport, RunError> {
    cycle(
        profile,
        snapshot,
        "wasm",
        states,
        |plugin, point, session| {
            let Some(registered) = registry.get(&plugin.name) else {
                return failed(
                    session,
                    PolicyFailure::new(
                        "missing-policy",
                        format!("no policy named {:?} is registered", plugin.name),
                    ),
                );
            };
            let policy = &registered.policy;
            if !policy.meta.implements(point) {
                return failed(
                    session,
                    PolicyFailure::new(
                        "unsupported-extension-point",
                        format!(
                            "{} does not implement the {} extension point",
                            plugin.name,
                            point.as_str()
                        ),
                    ),
                );
            }
            engine.evaluate(policy, point, &plugin.args, session)
        },
    )
}

/// An evaluation that never started, ending with `failure`.
pub fn failed(session: EvalSession, failure: PolicyFailure) -> Evaluation {
    Evaluation {
        outcome: Err(failure),
        duration: Duration::ZERO,
        logs: Vec::new(),
        proposal_calls: 0,
        peak_memory: 0,
        sections: Vec::new(),
        state: session.state,
        scope: session.scope,
        cpu: None,
    }
}

/// Nodes a run covers: Ready, and matching the profile's nodeSelector.
fn nodes_in_scope(
    snapshot: &ClusterSnapshot,
    index: &ClusterIndex,
    profile: &ProfileSpec,
) -> Result<Vec<u32>, RunError> {
    let selector = match profile.node_selector.as_deref().map(str::trim) {
        None | Some("") => Selector::everything(),
        Some(text) => Selector::parse(text).map_err(|e| {
            RunError::InvalidProfile(vec![ProfileError {
                field: "nodeSelector".into(),
                message: e.to_string(),
            }])
        })?,
    };
    Ok(index.nodes_in_scope(snapshot.cluster(), &selector))
}

/// One descheduler cycle of `profile` over `snapshot`, with `evaluate` running each plugin:
/// scope, evictor configuration, deschedule then balance plugins of every plugin set, limits
/// shared. [`execute`] evaluates with the wasm policies; the benchmark passes natively linked
/// ones (`mode` names which, in the report).
pub fn cycle(
    profile: &ProfileSpec,
    snapshot: &Arc<ClusterSnapshot>,
    mode: &str,
    mut states: PolicyStates,
    mut evaluate: impl FnMut(&PluginSpec, ExtensionPoint, EvalSession) -> Evaluation,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let cluster = snapshot.cluster();
    let index = snapshot.index();
    let nodes = Arc::new(nodes_in_scope(snapshot, &index, profile)?);

    // Resolve every plugin set's evictor before anything runs: a bad profile proposes nothing.
    let mut configs = Vec::with_capacity(profile.plugin_sets.len());
    let mut errors = Vec::new();
    for (i, set) in profile.plugin_sets.iter().enumerate() {
        let field = format!("profiles[{i}].pluginConfig[DefaultEvictor].args");
        let args: DefaultEvictorArgs = match serde_json::from_value(set.evictor_args.clone()) {
            Ok(args) => args,
            Err(e) => {
                errors.push(ProfileError {
                    field,
                    message: e.to_string(),
                });
                continue;
            }
        };
        match EvictorConfig::resolve(&args, cluster) {
            Ok(config) => configs.push(Arc::new(config)),
            Err(problems) => errors.extend(problems.into_iter().map(|p| ProfileError {
                field: if p.field.is_empty() {
                    field.clone()
                } else {
                    format!("{field}.{}", p.field)
                },
                message: p.message,
            })),
        }
    }
    if !errors.is_empty() {
        return Err(RunError::InvalidProfile(errors));
    }

    let mut report = RunReport {
        nodes_in_scope: nodes.len() as u32,
        skipped: None,
        policies: Vec::new(),
        proposal_count: 0,
        proposals: Vec::new(),
        refusals: Vec::new(),
        duration_ms: 0.0,
        mode: mode.to_string(),
        state_updates: Vec::new(),
    };
    if nodes.len() < 2 {
        report.skipped = Some(format!(
            "{} ready node(s) in scope; a cycle needs at least 2 (descheduler skips it too)",
            nodes.len()
        ));
        report.duration_ms = ms(started.elapsed());
        return Ok(report);
    }

    let limits = Limits {
        per_node: profile.max_per_node,
        per_namespace: profile.max_per_namespace,
        total: profile.max_total,
    };
    let longest_cooldown = configs.iter().filter_map(|c| c.cooldown_ms()).max();
    let mut cooldown = longest_cooldown.map(|window| {
        let (scope, version) = states.take(COOLDOWN_SCOPE.0, COOLDOWN_SCOPE.1);
        (
            StateScope::new(scope.entries().clone(), COOLDOWN_MAX_BYTES),
            version,
            window,
        )
    });
    let recent = cooldown
        .as_ref()
        .map(|(scope, _, _)| recent_owners(cluster, scope))
        .unwrap_or_default();
    let mut state = RunState::new(cluster, limits).with_recent_owners(recent);
    for point in [ExtensionPoint::Deschedule, ExtensionPoint::Balance] {
        for (set, config) in profile.plugin_sets.iter().zip(&configs) {
            let plugins = match point {
                ExtensionPoint::Deschedule => &set.deschedule,
                ExtensionPoint::Balance => &set.balance,
            };
            for plugin in plugins {
                let accepted_before = state.proposals().len();
                let refused_before = state.refusal_counts().total() as usize;
                let (scope, base_version) = states.take(&set.name, &plugin.name);
                let session = EvalSession {
                    snapshot: snapshot.clone(),
                    index: index.clone(),
                    config: config.clone(),
                    nodes: nodes.clone(),
                    state,
                    plugin: plugin.name.clone(),
                    plugin_set: set.name.clone(),
                    scope,
                };
                let span = tracing::info_span!("policy", plugin = %plugin.name, plugin_set = %set.name, point = point.as_str());
                let evaluation = span.in_scope(|| evaluate(plugin, point, session));
                state = evaluation.state;
                let mut logs = evaluation.logs;
                let dropped = logs.len().saturating_sub(MAX_LOGS_IN_REPORT);
                logs.truncate(MAX_LOGS_IN_REPORT);
                match &evaluation.outcome {
                    Err(failure) => {
                        tracing::warn!(plugin = %plugin.name, kind = %failure.kind, "policy failed: {}", failure.message);
                    }
                    // Only a successful evaluation's state is kept.
                    Ok(()) if evaluation.scope.changed() => {
                        report.state_updates.push(StateUpdate {
                            plugin_set: set.name.clone(),
                            plugin: plugin.name.clone(),
                            scope: evaluation.scope,
                            base_version,
                        });
                    }
                    Ok(()) => {}
                }
                report.policies.push(PolicyOutcome {
                    plugin: plugin.name.clone(),
                    plugin_set: set.name.clone(),
                    extension_point: point.as_str().to_string(),
                    duration_ms: ms(evaluation.duration),
                    cpu_ms: evaluation.cpu.map(ms),
                    proposals: (state.proposals().len() - accepted_before) as u32,
                    refusals: (state.refusal_counts().total() as usize - refused_before) as u32,
                    error: evaluation.outcome.err(),
                    logs,
                    logs_dropped: dropped as u32,
                    peak_memory_bytes: evaluation.peak_memory as u64,
                    snapshot_sections: evaluation
                        .sections
                        .iter()
                        .map(|u| SectionPull {
                            section: u.section.name().to_string(),
                            calls: u.calls,
                        })
                        .collect(),
                    snapshot_bytes: evaluation.sections.iter().map(|u| u.bytes).sum(),
                    state_conflict: None,
                });
            }
        }
    }

    report.proposals = state
        .proposals()
        .iter()
        .map(|p| {
            let pod = cluster.pod(p.pod);
            Proposal {
                pod_uid: pod.uid().to_string(),
                namespace: pod.namespace().to_string(),
                name: pod.name().to_string(),
                node: pod.node_name().to_string(),
                plugin: p.plugin.clone(),
                plugin_set: p.plugin_set.clone(),
                reason: p.reason.clone(),
            }
        })
        .collect();
    report.proposal_count = report.proposals.len();
    report.refusals = state
        .refusals()
        .iter()
        .map(|r| {
            // A refusal may name a pod the snapshot does not have (`unknown pod`).
            let (pod_uid, namespace, name, node) = if (r.pod as usize) < cluster.pod_count() {
                let pod = cluster.pod(r.pod);
                (pod.uid(), pod.namespace(), pod.name(), pod.node_name())
            } else {
                ("", "", "", "")
            };
            RefusedProposal {
                pod_uid: pod_uid.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                node: node.to_string(),
                plugin: r.plugin.clone(),
                plugin_set: r.plugin_set.clone(),
                reason: r.reason.clone(),
                refusal: r.refusal.to_string(),
            }
        })
        .collect();
    if let Some((mut scope, base_version, window)) = cooldown.take() {
        remember_owners(cluster, &state, &mut scope, window);
        if scope.changed() {
            report.state_updates.push(StateUpdate {
                plugin_set: COOLDOWN_SCOPE.0.into(),
                plugin: COOLDOWN_SCOPE.1.into(),
                scope,
                base_version,
            });
        }
    }
    report.duration_ms = ms(started.elapsed());
    Ok(report)
}

/// The owners of the snapshot the cooldown scope remembers: owner index → ms.
fn recent_owners(
    cluster: rebalancer_policy_sdk::Cluster<'_>,
    scope: &StateScope,
) -> HashMap<u32, i64> {
    if scope.is_empty() {
        return HashMap::new();
    }
    let mut out = HashMap::new();
    for (i, owner) in cluster.archive().owners.iter().enumerate() {
        let uid = cluster.str(owner.uid.to_native());
        if let Some(at) = scope.get(uid).and_then(|v| <[u8; 8]>::try_from(v).ok()) {
            out.insert(i as u32, i64::from_le_bytes(at));
        }
    }
    out
}

/// Forget owners proposed longer than `window` ago; remember the owners of this run's
/// proposals at the snapshot time.
fn remember_owners(
    cluster: rebalancer_policy_sdk::Cluster<'_>,
    state: &RunState,
    scope: &mut StateScope,
    window: i64,
) {
    let now = cluster.time_ms();
    for key in scope.keys() {
        let at = scope
            .get(&key)
            .and_then(|v| <[u8; 8]>::try_from(v).ok())
            .map(i64::from_le_bytes);
        if at.is_none_or(|at| now - at >= window) {
            scope.remove(&key);
        }
    }
    let owners = &cluster.archive().owners;
    for p in state.proposals() {
        let owner = cluster.pod(p.pod).raw.owner.to_native();
        if let Some(o) = owners.get(owner as usize) {
            let uid = cluster.str(o.uid.to_native());
            if !uid.is_empty()
                && let Err(e) = scope.put(uid, &now.to_le_bytes())
            {
                tracing::warn!(error = %e, "the evictor's cooldown memory is full; owner not remembered");
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(sections: serde_json::Value) -> PolicyOutcome {
        serde_json::from_value(serde_json::json!({
            "plugin": "P", "pluginSet": "default", "extensionPoint": "balance",
            "durationMs": 1.0, "proposals": 0, "refusals": 0, "error": null, "logs": [],
            "logsDropped": 0, "peakMemoryBytes": 0, "snapshotSections": sections,
            "snapshotBytes": 10
        }))
        .expect("a stored outcome")
    }

    #[test]
    fn sections_are_stored_once_each_with_their_calls_and_old_reports_still_read() {
        let pull = |section: &str, calls| SectionPull {
            section: section.into(),
            calls,
        };
        let current = outcome(serde_json::json!([
            {"section": "core", "calls": 2_000_000}, {"section": "pod-names", "calls": 1}
        ]));
        assert_eq!(
            current.snapshot_sections,
            [pull("core", 2_000_000), pull("pod-names", 1)]
        );
        let round_trip = serde_json::to_value(&current).unwrap();
        assert_eq!(
            round_trip["snapshotSections"],
            serde_json::json!([
                {"section": "core", "calls": 2_000_000}, {"section": "pod-names", "calls": 1}
            ])
        );
        // Reports stored before sections were counted list one name per call.
        let old = outcome(serde_json::json!(["core", "pod-names", "core"]));
        assert_eq!(
            old.snapshot_sections,
            [pull("core", 2), pull("pod-names", 1)]
        );
    }
}
