//! The host side of one evaluation: store data, the WIT imports, and turning traps into
//! [`PolicyFailure`]s. Every string or list a guest hands over is held to its cap here (see
//! [`super::caps`]) before anything keeps it: reasons (by the evictor), log lines, failure
//! messages, arg errors, state keys (by the scope), `object-json` kinds, the record of sections.

use std::sync::Arc;
use std::time::Duration;

use rebalancer_policy_sdk::caps::truncate;
use rebalancer_policy_sdk::evictor::{ClusterIndex, Evictor, EvictorConfig, RunState};
use rebalancer_policy_sdk::model::Section;
use rebalancer_policy_sdk::{ArgError, ExtensionPoint, Host as _, LogLevel, Refusal};
use serde::{Deserialize, Serialize};
use wasmtime::{ResourceLimiter, Store, Trap};

use rebalancer_policy_sdk::state::StateScope;

use super::bindings::rebalancer::policy::{cluster, evictor, state, types as wit};
use super::{CompiledPolicy, EPOCH_TICK, Engine, PolicyFailure, caps};
use crate::stopwatch::Stopwatch;
use rebalancer_cluster::ClusterSnapshot;

/// Everything one evaluation may see and change. The run state moves in and comes back out in
/// [`Evaluation::state`], so proposals accumulate across the policies of a run.
pub struct EvalSession {
    pub snapshot: Arc<ClusterSnapshot>,
    pub index: Arc<ClusterIndex>,
    pub config: Arc<EvictorConfig>,
    pub nodes: Arc<Vec<u32>>,
    pub state: RunState,
    pub plugin: String,
    pub plugin_set: String,
    /// The policy's state scope as loaded; comes back in [`Evaluation::scope`] with what the
    /// evaluation changed.
    pub scope: StateScope,
}

/// One log line a policy wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PolicyLog {
    pub level: String,
    pub message: String,
}

/// The result of one evaluation.
pub struct Evaluation {
    pub outcome: Result<(), PolicyFailure>,
    pub duration: Duration,
    pub logs: Vec<PolicyLog>,
    /// `propose-eviction` calls made (accepted or refused).
    pub proposal_calls: u32,
    /// Largest size all linear memories of the instance reached together, in bytes.
    pub peak_memory: usize,
    /// The snapshot sections handed to the guest, one entry per section, in the order it first
    /// asked for each.
    pub sections: Vec<SectionUse>,
    pub state: RunState,
    /// The policy's state scope after the evaluation (commit it only if `outcome` is `Ok`).
    pub scope: StateScope,
    /// CPU time of the evaluating thread over `duration` (see [`Stopwatch`]).
    pub cpu: Option<Duration>,
}

/// One snapshot section an evaluation was handed: how often and how many bytes in all. One
/// entry per section, however often the guest asks (a guest calling `map-section` two million
/// times gets one entry, not two million).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionUse {
    pub section: Section,
    /// `map-section`, `snapshot` and `snapshot-section` calls that handed it over.
    pub calls: u32,
    /// Bytes handed over by those calls together.
    pub bytes: u64,
}

/// Table elements of one instance, all its tables together (a funcref is a pointer or two:
/// at most ~16 MiB).
pub const MAX_TABLE_ELEMENTS: usize = 1_000_000;
/// Core instances, linear memories and tables one evaluation may create. A built-in policy
/// component has a handful of each; multi-memory modules stay possible, but the memory cap
/// counts all memories together. A componentize-py (Python) component instantiates 38 core
/// modules (CPython, libc and its emulation libraries, the bindings, and one small adapter or
/// stub module per WASI interface it was linked against), sharing one memory and 2 tables: 64
/// instances leave room for a few more libraries while still bounding a component's host
/// bookkeeping (one instance costs a few KiB of host memory).
pub const MAX_INSTANCES: usize = 64;
pub const MAX_MEMORIES: usize = 8;
pub const MAX_TABLES: usize = 32;

/// Memory accounting and the caps of one store; records why growth was refused. The memory cap
/// is for all linear memories of the evaluation together, not each memory on its own (a module
/// with several memories used to get the cap once per memory).
struct Limiter {
    max: usize,
    /// Bytes of all linear memories now.
    total: usize,
    /// Largest `total` reached.
    peak: usize,
    exceeded: bool,
    /// Elements of all tables now.
    table_elements: usize,
}

impl Limiter {
    fn new(max: usize) -> Limiter {
        Limiter {
            max,
            total: 0,
            peak: 0,
            exceeded: false,
            table_elements: 0,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.total.saturating_sub(current).saturating_add(desired);
        if total > self.max {
            // `memory.grow` returns -1, as the spec allows for a failed growth, rather than a
            // trap: a guest that can do with less (drop a cache, process in chunks) may go on.
            // One that cannot usually aborts next; the flag makes that failure `memory`.
            self.exceeded = true;
            return Ok(false);
        }
        self.total = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .table_elements
            .saturating_sub(current)
            .saturating_add(desired);
        if total > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.table_elements = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

pub(super) struct HostState {
    limiter: Limiter,
    session: Option<EvalSession>,
    logs: Vec<PolicyLog>,
    log_bytes: usize,
    max_log_bytes: usize,
    max_log_lines: usize,
    proposal_calls: u32,
    max_proposals: u32,
    /// Snapshot sections handed over: one entry per section.
    handed_over: Vec<SectionUse>,
    /// Set by an import that ends the evaluation (cap hit) just before it traps.
    abort: Option<PolicyFailure>,
    /// The message of a guest panic (the SDK's panic hook logs it before the trap).
    panic: Option<String>,
    /// The instance's linear memory, where `map-section` places sections (`None` when the
    /// instance has several, or memories are pooled).
    #[cfg(target_os = "linux")]
    memory: Option<super::memory::MemoryHandle>,
    /// The archive layout the module was built for (its ABI minor): it is told this layout
    /// and served only that layout's sections.
    layout: u32,
}

impl HostState {
    /// The section `id`, if the module's layout has it.
    pub(super) fn section_of(&self, id: u32) -> Option<Section> {
        Section::from_id(id).filter(|s| (s.id() as usize) < Section::count_in_layout(self.layout))
    }

    pub(super) fn session(&mut self) -> wasmtime::Result<&mut EvalSession> {
        self.session.as_mut().ok_or_else(|| {
            wasmtime::format_err!(
                "the cluster and the policy state are not available during info/validate-args"
            )
        })
    }

    fn with_evictor<R>(&mut self, f: impl FnOnce(&mut Evictor<'_>) -> R) -> wasmtime::Result<R> {
        let s = self.session()?;
        let cluster = s.snapshot.cluster();
        let mut evictor = Evictor::new(
            cluster,
            &s.index,
            &s.config,
            &mut s.state,
            &s.nodes,
            &s.plugin,
            &s.plugin_set,
        );
        Ok(f(&mut evictor))
    }

    /// A section of the shared archive for `cluster.snapshot` / `cluster.snapshot-section`
    /// (see `link_shared_snapshot`), counted as handed over.
    pub(super) fn section_bytes(&mut self, section: Section) -> wasmtime::Result<bytes::Bytes> {
        let bytes = self.session()?.snapshot.section(section);
        self.hand_over(section, bytes.len() as u64);
        Ok(bytes)
    }

    /// Record that `section` (`len` bytes) was handed over once more.
    fn hand_over(&mut self, section: Section, len: u64) {
        match self.handed_over.iter_mut().find(|u| u.section == section) {
            Some(used) => {
                used.calls = used.calls.saturating_add(1);
                used.bytes = used.bytes.saturating_add(len);
            }
            None => self.handed_over.push(SectionUse {
                section,
                calls: 1,
                bytes: len,
            }),
        }
    }

    /// `map-section`: map (or copy) `section` into the guest's memory at `offset`. `false` when
    /// this instance's memory cannot be written by the host (the guest then asks for a copy).
    #[cfg(target_os = "linux")]
    fn place_section(
        &mut self,
        snapshot: &ClusterSnapshot,
        section: Section,
        offset: u32,
    ) -> wasmtime::Result<bool> {
        use super::memory::{Source, place};
        let Some(memory) = &self.memory else {
            return Ok(false);
        };
        let archive = snapshot.archive();
        let source = match archive.file_section(section) {
            Some(file) => Source::File(file),
            None => Source::Bytes(&archive.bytes()[archive.range(section)]),
        };
        match place(memory, offset, source) {
            Ok(()) => Ok(true),
            Err(message) => Err(self.fail(
                "trap",
                format!("the policy misused cluster.map-section: {message}"),
            )),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn place_section(&mut self, _: &ClusterSnapshot, _: Section, _: u32) -> wasmtime::Result<bool> {
        Ok(false)
    }

    /// Count `n` proposals (accepted or refused) against the cap; past it, the evaluation ends.
    fn count_proposals(&mut self, n: usize) -> wasmtime::Result<()> {
        self.proposal_calls = self
            .proposal_calls
            .saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        if self.proposal_calls > self.max_proposals {
            let cap = self.max_proposals;
            return Err(self.fail(
                "proposal-cap",
                format!("the policy proposed more than {cap} evictions in one evaluation"),
            ));
        }
        Ok(())
    }

    fn fail(&mut self, kind: &str, message: String) -> wasmtime::Error {
        let error = wasmtime::format_err!("{message}");
        self.abort = Some(PolicyFailure::new(kind, message));
        error
    }
}

impl wit::Host for HostState {}

impl cluster::Host for HostState {
    fn info(&mut self) -> wasmtime::Result<wit::SnapshotInfo> {
        let layout = self.layout;
        let s = self.session()?;
        let c = s.snapshot.cluster();
        Ok(wit::SnapshotInfo {
            layout_version: layout,
            revision: c.revision(),
            time_ms: c.time_ms(),
            node_count: c.node_count() as u32,
            pod_count: c.pod_count() as u32,
            byte_len: s.snapshot.section(Section::Core).len() as u64,
        })
    }

    /// Shadowed in the linker by `link_shared_snapshot`, which lowers the shared buffer without
    /// this copy; kept because the generated trait requires it.
    fn snapshot(&mut self) -> wasmtime::Result<Vec<u8>> {
        Ok(self.section_bytes(Section::Core)?.to_vec())
    }

    /// Shadowed like `snapshot`.
    fn snapshot_section(&mut self, id: u32) -> wasmtime::Result<Option<Vec<u8>>> {
        self.section_of(id)
            .map(|s| self.section_bytes(s).map(|b| b.to_vec()))
            .transpose()
    }

    fn section_size(&mut self, id: u32) -> wasmtime::Result<Option<u32>> {
        let section = self.section_of(id);
        let archive = self.session()?.snapshot.archive();
        Ok(section.map(|section| archive.range(section).len() as u32))
    }

    fn map_section(&mut self, id: u32, offset: u32) -> wasmtime::Result<bool> {
        let Some(section) = self.section_of(id) else {
            return Ok(false);
        };
        let snapshot = self.session()?.snapshot.clone();
        if !self.place_section(&snapshot, section, offset)? {
            return Ok(false);
        }
        let len = snapshot.archive().range(section).len();
        self.hand_over(section, len as u64);
        Ok(true)
    }

    fn nodes(&mut self) -> wasmtime::Result<Vec<u32>> {
        Ok(self.session()?.nodes.as_ref().clone())
    }

    fn now_ms(&mut self) -> wasmtime::Result<i64> {
        Ok(self.session()?.snapshot.cluster().time_ms())
    }

    fn object_json(&mut self, kind: String, index: u32) -> wasmtime::Result<Option<String>> {
        // No kind is that long: answered without a lookup (and nothing echoes it).
        if kind.len() > caps::MAX_OBJECT_KIND_BYTES {
            return Ok(None);
        }
        Ok(self.session()?.snapshot.object_json(&kind, index))
    }

    fn log(&mut self, level: wit::LogLevel, message: String) -> wasmtime::Result<()> {
        if let Some(panic) = message.strip_prefix("policy panicked: ") {
            self.panic = Some(truncate(panic, caps::MAX_MESSAGE_BYTES).into_owned());
        }
        // Lines are counted as well as bytes: an empty line costs the host a record too. Past
        // either cap the evaluation ends, keeping the lines logged before.
        if self.logs.len() >= self.max_log_lines {
            let cap = self.max_log_lines;
            return Err(self.fail(
                "log-cap",
                format!("the policy logged more than {cap} lines in one evaluation"),
            ));
        }
        self.log_bytes += message.len();
        if self.log_bytes > self.max_log_bytes {
            let cap = self.max_log_bytes;
            return Err(self.fail(
                "log-cap",
                format!("the policy logged more than {cap} bytes in one evaluation"),
            ));
        }
        let level = match level {
            wit::LogLevel::Trace => LogLevel::Trace,
            wit::LogLevel::Debug => LogLevel::Debug,
            wit::LogLevel::Info => LogLevel::Info,
            wit::LogLevel::Warn => LogLevel::Warn,
            wit::LogLevel::Error => LogLevel::Error,
        };
        let plugin = self.session.as_ref().map_or("", |s| s.plugin.as_str());
        tracing::debug!(policy = plugin, level = ?level, "{message}");
        self.logs.push(PolicyLog {
            level: serde_json::to_value(level)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            message,
        });
        Ok(())
    }
}

impl state::Host for HostState {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        Ok(self.session()?.scope.get(&key).map(<[u8]>::to_vec))
    }

    fn put(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        Ok(self.session()?.scope.put(&key, &value))
    }

    fn remove(&mut self, key: String) -> wasmtime::Result<bool> {
        Ok(self.session()?.scope.remove(&key))
    }

    fn keys(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(self.session()?.scope.keys())
    }
}

impl evictor::Host for HostState {
    fn filter(&mut self, pods: Vec<u32>) -> wasmtime::Result<Vec<u32>> {
        self.with_evictor(|e| e.filter(&pods))
    }

    fn pre_eviction_filter(&mut self, pods: Vec<u32>) -> wasmtime::Result<Vec<u32>> {
        self.with_evictor(|e| e.pre_eviction_filter(&pods))
    }

    fn propose_eviction(
        &mut self,
        pod: u32,
        reason: String,
    ) -> wasmtime::Result<Result<(), wit::Refusal>> {
        self.count_proposals(1)?;
        let result = self.with_evictor(|e| e.propose(pod, &reason))?;
        Ok(result.map_err(to_wit_refusal))
    }

    fn propose_evictions(
        &mut self,
        pods: Vec<u32>,
        reason: String,
    ) -> wasmtime::Result<wit::BatchOutcome> {
        // Each pod counts against the cap as one `propose-eviction` call would: the pods within
        // the cap are proposed, then the evaluation ends if the batch went past it.
        let allowed =
            (self.max_proposals.saturating_sub(self.proposal_calls) as usize).min(pods.len());
        let outcome = self.with_evictor(|e| e.propose_evictions(&pods[..allowed], &reason))?;
        self.count_proposals(outcome.admitted + usize::from(outcome.refusal.is_some()))?;
        if outcome.refusal.is_none() && allowed < pods.len() {
            // The rest would go past the cap: this fails the evaluation.
            self.count_proposals(pods.len() - allowed)?;
        }
        Ok(wit::BatchOutcome {
            admitted: outcome.admitted as u32,
            refusal: outcome.refusal.map(to_wit_refusal),
        })
    }

    fn node_fit(&mut self, pod: u32, candidates: Vec<u32>) -> wasmtime::Result<Vec<u32>> {
        self.with_evictor(|e| e.node_fit(pod, &candidates))
    }
}

fn to_wit_refusal(refusal: Refusal) -> wit::Refusal {
    match refusal {
        Refusal::NodeLimit => wit::Refusal::NodeLimit,
        Refusal::NamespaceLimit => wit::Refusal::NamespaceLimit,
        Refusal::TotalLimit => wit::Refusal::TotalLimit,
        Refusal::DisruptionBudget(m) => wit::Refusal::DisruptionBudget(m),
        Refusal::NotEvictable(m) => wit::Refusal::NotEvictable(m),
        Refusal::UnknownPod => wit::Refusal::UnknownPod,
    }
}

/// One instantiated policy in a fresh store.
pub(super) struct Call {
    store: Store<HostState>,
    instance: super::bindings::Policy,
}

fn new_store(engine: &Engine, session: Option<EvalSession>, layout: u32) -> Store<HostState> {
    let limits = &engine.inner.limits;
    let state = HostState {
        limiter: Limiter::new(limits.memory_bytes),
        session,
        logs: Vec::new(),
        log_bytes: 0,
        max_log_bytes: limits.max_log_bytes,
        max_log_lines: limits.max_log_lines,
        proposal_calls: 0,
        max_proposals: limits.max_proposals,
        handed_over: Vec::new(),
        abort: None,
        panic: None,
        #[cfg(target_os = "linux")]
        memory: None,
        layout,
    };
    let mut store = Store::new(&engine.inner.wasmtime, state);
    store.limiter(|s| &mut s.limiter);
    let ticks = Duration::from_millis(limits.timeout_ms)
        .as_nanos()
        .div_ceil(EPOCH_TICK.as_nanos())
        .max(1) as u64;
    store.set_epoch_deadline(ticks);
    store.epoch_deadline_trap();
    store
}

/// A store as an evaluation of a module of `layout` gets it (tests).
#[cfg(test)]
pub(super) fn test_store(
    engine: &Engine,
    session: Option<EvalSession>,
    layout: u32,
) -> Store<HostState> {
    new_store(engine, session, layout)
}

impl Call {
    /// A store for `info` / `validate-args`: no cluster.
    pub(super) fn metadata(engine: &Engine, policy: &CompiledPolicy) -> wasmtime::Result<Call> {
        let mut store = new_store(engine, None, policy.layout);
        let instance = instantiate(policy, &mut store)?;
        Ok(Call { store, instance })
    }

    pub(super) fn info(&mut self) -> Result<wit::PolicyInfo, PolicyFailure> {
        let result = self.instance.call_info(&mut self.store);
        result.map_err(|e| classify(self.store.data_mut(), e))
    }

    pub(super) fn validate_args(&mut self, args: &str) -> Result<(), Vec<ArgError>> {
        match self.instance.call_validate_args(&mut self.store, args) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(errors)) => Err(caps::arg_errors(
                errors.into_iter().map(|e| (e.field, e.message)),
            )),
            Err(e) => {
                let failure = classify(self.store.data_mut(), e);
                let message = format!(
                    "the policy failed while validating its args ({}): {}",
                    failure.kind, failure.message
                );
                Err(caps::arg_errors(std::iter::once((String::new(), message))))
            }
        }
    }
}

/// Instantiate `policy` in `store`, and give the store the handle of the instance's memory.
fn instantiate(
    policy: &CompiledPolicy,
    store: &mut Store<HostState>,
) -> wasmtime::Result<super::bindings::Policy> {
    #[cfg(target_os = "linux")]
    {
        use super::memory;
        memory::clear_created();
        let instance = policy.pre.instantiate(&mut *store);
        let mut created = memory::take_created();
        store.data_mut().memory = (created.len() == 1).then(|| created.remove(0));
        instance
    }
    #[cfg(not(target_os = "linux"))]
    policy.pre.instantiate(store)
}

/// Map a wasmtime error to the failure kind a person can act on.
fn classify(state: &mut HostState, error: wasmtime::Error) -> PolicyFailure {
    if let Some(abort) = state.abort.take() {
        return abort;
    }
    if state.limiter.exceeded {
        return PolicyFailure::new(
            "memory",
            format!(
                "the policy failed after reaching its memory cap of {} bytes (memory.grow \
                 returned -1): {error:#}",
                state.limiter.max
            ),
        );
    }
    if let Some(panic) = state.panic.take() {
        return PolicyFailure::new("panic", panic);
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => PolicyFailure::new(
            "timeout",
            "the policy ran past its deadline and was interrupted",
        ),
        Some(Trap::StackOverflow) => {
            PolicyFailure::new("stack-overflow", "the policy exhausted its wasm stack")
        }
        Some(Trap::MemoryOutOfBounds) => PolicyFailure::new(
            "trap",
            "the policy trapped: out of bounds memory access (in Rust guests usually an \
             exhausted shadow stack, i.e. unbounded recursion)",
        ),
        Some(trap) => PolicyFailure::new("trap", format!("the policy trapped: {trap}")),
        None => PolicyFailure::new("trap", format!("{error:#}")),
    }
}

pub(super) fn evaluate(
    engine: &Engine,
    policy: &CompiledPolicy,
    point: ExtensionPoint,
    args: &str,
    session: EvalSession,
    started: Stopwatch,
) -> Evaluation {
    let mut store = new_store(engine, Some(session), policy.layout);
    let instance = match instantiate(policy, &mut store) {
        Ok(instance) => instance,
        Err(e) => {
            let data = store.into_data();
            let session = data.session.expect("evaluations always carry a session");
            return Evaluation {
                outcome: Err(PolicyFailure::new("instantiation", format!("{e:#}"))),
                duration: started.wall(),
                logs: Vec::new(),
                proposal_calls: 0,
                peak_memory: 0,
                sections: Vec::new(),
                state: session.state,
                scope: session.scope,
                cpu: started.cpu(),
            };
        }
    };
    let mut call = Call { store, instance };
    let result = match point {
        ExtensionPoint::Deschedule => call.instance.call_deschedule(&mut call.store, args),
        ExtensionPoint::Balance => call.instance.call_balance(&mut call.store, args),
    };
    let (duration, cpu) = (started.wall(), started.cpu());
    let outcome = match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(PolicyFailure::new("policy-error", message)),
        Err(e) => Err(classify(call.store.data_mut(), e)),
    };
    let data = call.store.into_data();
    let session = data.session.expect("evaluations always carry a session");
    Evaluation {
        outcome,
        duration,
        logs: data.logs,
        proposal_calls: data.proposal_calls,
        peak_memory: data.limiter.peak,
        sections: data.handed_over,
        state: session.state,
        scope: session.scope,
        cpu,
    }
}

#[cfg(test)]
mod limiter_tests {
    use super::*;

    #[test]
    fn the_memory_cap_counts_every_memory_of_the_instance_together() {
        let mib = 1 << 20;
        let mut limiter = Limiter::new(128 * mib);
        // One memory grows to 100 MiB: fine.
        assert!(limiter.memory_growing(0, 100 * mib, None).unwrap());
        // A second memory of 100 MiB would make 200 MiB: refused (memory.grow returns -1, no
        // trap), and remembered.
        assert!(!limiter.memory_growing(0, 100 * mib, None).unwrap());
        assert!(limiter.exceeded);
        assert_eq!(
            limiter.total,
            100 * mib,
            "the refused growth is not counted"
        );
        // Growing the first memory counts only the difference.
        let mut limiter = Limiter::new(128 * mib);
        limiter.memory_growing(0, 64 * mib, None).unwrap();
        limiter.memory_growing(0, 32 * mib, None).unwrap();
        limiter.memory_growing(64 * mib, 96 * mib, None).unwrap();
        assert_eq!((limiter.total, limiter.peak), (128 * mib, 128 * mib));
        assert!(!limiter.memory_growing(32 * mib, 33 * mib, None).unwrap());
    }

    #[test]
    fn tables_share_one_element_budget_and_instances_are_counted() {
        let mut limiter = Limiter::new(1 << 20);
        assert!(limiter.table_growing(0, 600_000, None).unwrap());
        assert!(
            !limiter.table_growing(0, 600_000, None).unwrap(),
            "a second big table"
        );
        assert!(limiter.table_growing(0, 400_000, None).unwrap());
        assert!(!limiter.table_growing(400_000, 400_001, None).unwrap());
        assert_eq!(
            (limiter.instances(), limiter.memories(), limiter.tables()),
            (MAX_INSTANCES, MAX_MEMORIES, MAX_TABLES)
        );
    }
}
