//! The wasmtime component host for descheduling policies.
//!
//! Owns: the one wasmtime [`wasmtime::Engine`] of the process, validation and compilation of
//! modules (once per digest, bounded in time and memory: [`compile`]), the sandbox (memory cap,
//! wasm stack cap, epoch deadline, caps on proposal calls, log bytes and lines, and on every
//! string or list a guest hands over — see [`caps`]) and the registry of compiled policies.
//! Must not: touch SQL or HTTP (callers persist and serve), or load precompiled artifacts from
//! bytes it did not compile itself (it deserializes only its own compiler's output, from its own
//! cache directory — never bytes a user sent).
//!
//! Every evaluation gets a fresh `Store` and instance from a cached `InstancePre`; traps, timeouts
//! and cap violations end that evaluation with a [`PolicyFailure`], never the process.

pub mod caps;
mod columns;
mod compile;
mod host;
mod inspect;
#[cfg(target_os = "linux")]
mod memory;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rebalancer_policy_sdk::model::Section;
use rebalancer_policy_sdk::{ArgError, ExtensionPoint};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};

pub use compile::{
    CHILD_SUBCOMMAND, ChildArgs, CompileSettings, CompileStats, DEFAULT_COMPILE_MEMORY_BYTES,
    DEFAULT_COMPILE_TIMEOUT_MS, DEFAULT_MEMORY_CACHE_BYTES, Isolation, child_main,
};
pub use host::{EvalSession, Evaluation, PolicyLog, SectionUse};

/// The WIT package this host serves.
pub const ABI_VERSION: &str = rebalancer_policy_sdk::ABI_VERSION;

/// How often the epoch ticker advances; deadlines are rounded up to this granularity.
const EPOCH_TICK: Duration = Duration::from_millis(5);

mod bindings {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../../../policy-sdk/wit",
        imports: { default: trappable },
        // Tests compare the records the `columns` accessors answer.
        additional_derives: [PartialEq],
    });
}

/// Sandbox limits applied to every evaluation (configurable per server).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxLimits {
    /// Largest module accepted at upload, in bytes.
    pub max_module_bytes: usize,
    /// Linear memory cap per instance, in bytes.
    pub memory_bytes: usize,
    /// Wall-clock deadline per call, in milliseconds.
    pub timeout_ms: u64,
    /// WebAssembly stack cap, in bytes.
    pub stack_bytes: usize,
    /// `propose-eviction` calls allowed per evaluation.
    pub max_proposals: u32,
    /// Log bytes allowed per evaluation.
    pub max_log_bytes: usize,
    /// Log lines allowed per evaluation (empty lines count too); past it, the evaluation ends
    /// with `log-cap`, as past the byte cap.
    #[serde(default = "default_max_log_lines")]
    pub max_log_lines: usize,
    /// Size cap of one policy state scope (keys plus values), in bytes.
    #[serde(default = "default_max_state_bytes")]
    pub max_state_bytes: usize,
}

fn default_max_state_bytes() -> usize {
    rebalancer_policy_sdk::state::DEFAULT_MAX_BYTES
}

fn default_max_log_lines() -> usize {
    caps::DEFAULT_MAX_LOG_LINES
}

/// Default upload cap of a module. A policy written in Rust is 0.1–1 MiB; one written in Python
/// and built with componentize-py carries the CPython interpreter and the standard-library
/// modules it imports, preinitialised: 18 MB for `policies-wasm/example-python` (the `json`
/// module and the bindings), up to ~40 MB with more of the standard library or pure-Python
/// packages. 48 MiB admits those and stays under the 64 MiB `--body-limit` every upload also
/// passes. Compiling is bounded on its own (`--policy-compile-memory`, 1 GiB address space, of
/// which the 18 MB Python component needs ~360 MiB; `--policy-compile-timeout-ms`), so a larger
/// cap does not make compilation unbounded.
pub const DEFAULT_MAX_MODULE_BYTES: usize = 48 << 20;

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            max_module_bytes: DEFAULT_MAX_MODULE_BYTES,
            memory_bytes: 512 << 20,
            timeout_ms: 10_000,
            stack_bytes: 1 << 20,
            max_proposals: 1_000_000,
            max_log_bytes: 1 << 20,
            max_log_lines: default_max_log_lines(),
            max_state_bytes: default_max_state_bytes(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    pub limits: SandboxLimits,
    pub compile: CompileSettings,
}

/// Why a module was refused or the engine failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("not a WebAssembly module: {0}")]
    NotWasm(String),
    #[error(
        "this is a core WebAssembly module, not a component: build the policy for \
         wasm32-wasip2 (cargo build --target wasm32-wasip2) or wrap it with `wasm-tools component new`"
    )]
    NotComponent,
    #[error(
        "the policy targets ABI {found}, this server serves rebalancer:policy@{supported}: \
         rebuild it against a matching rebalancer-policy-sdk"
    )]
    AbiMismatch { found: String, supported: String },
    #[error(
        "the policy imports `{name}`, which the sandbox does not provide: policies get no \
         filesystem, network, clock, randomness or environment — only the rebalancer:policy imports"
    )]
    ForbiddenImport { name: String },
    #[error(
        "the policy does not export `{name}`: a policy must export info, validate-args, \
         deschedule and balance (use rebalancer_policy_sdk::export_policy!)"
    )]
    MissingExport { name: String },
    #[error("the module is {size} bytes, over the {limit}-byte upload cap")]
    TooLarge { size: usize, limit: usize },
    #[error("the policy's metadata is invalid: {0}")]
    InvalidMetadata(String),
    #[error("the module failed to compile: {0}")]
    Compile(String),
    #[error(
        "compiling the module took longer than the {limit_ms} ms compile deadline \
         (--policy-compile-timeout-ms): its functions are too large or too deeply nested"
    )]
    CompileTimeout { limit_ms: u64 },
    #[error(
        "compiling the module needed more than the {} MiB compile memory limit \
         (--policy-compile-memory): its functions are too large or too deeply nested",
        limit_bytes >> 20
    )]
    CompileMemory { limit_bytes: u64 },
    #[error("engine failure: {0}")]
    Internal(String),
}

impl EngineError {
    /// Machine-readable code for API errors.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::NotWasm(_) => "not_wasm",
            EngineError::NotComponent => "not_a_component",
            EngineError::AbiMismatch { .. } => "abi_mismatch",
            EngineError::ForbiddenImport { .. } => "forbidden_import",
            EngineError::MissingExport { .. } => "missing_export",
            EngineError::TooLarge { .. } => "module_too_large",
            EngineError::InvalidMetadata(_) => "invalid_metadata",
            EngineError::Compile(_) => "compile_failed",
            EngineError::CompileTimeout { .. } => "compile_timeout",
            EngineError::CompileMemory { .. } => "compile_memory",
            EngineError::Internal(_) => "internal",
        }
    }
}

/// What a compiled policy says about itself, plus its identity.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyMeta {
    /// Plugin name, as used in DeschedulerPolicy documents.
    pub name: String,
    pub version: String,
    pub description: String,
    /// ABI version the module was built against (from its imports); the host serves it with
    /// every later minor of the same major.
    pub abi_version: String,
    /// sha256 of the module bytes, hex.
    pub digest: String,
    pub size_bytes: u64,
    /// `deschedule` and/or `balance`.
    pub extension_points: Vec<String>,
    #[schema(value_type = Object)]
    pub args_schema: serde_json::Value,
    #[schema(value_type = Object)]
    pub default_args: serde_json::Value,
}

impl PolicyMeta {
    pub fn implements(&self, point: ExtensionPoint) -> bool {
        self.extension_points.iter().any(|p| p == point.as_str())
    }
}

/// A validated, compiled module ready to instantiate.
pub struct CompiledPolicy {
    pub meta: PolicyMeta,
    pre: bindings::PolicyPre<host::HostState>,
    /// The archive layout its ABI minor reads (2 up to ABI 1.2, 3 from 1.3).
    layout: u32,
}

impl std::fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPolicy")
            .field("meta", &self.meta)
            .finish()
    }
}

/// The process-wide engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    wasmtime: wasmtime::Engine,
    limits: SandboxLimits,
    /// Compiles modules (bounded), and keeps what it compiled on disk and in memory.
    compiler: compile::Compiler,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.inner.limits)
            .finish()
    }
}

/// Instances at once in the pool: evaluations are bounded by the server's evaluation semaphore,
/// but compile-time `info`/`validate-args` calls and tests with many servers add to them.
#[cfg(not(target_os = "linux"))]
const POOL_INSTANCES: u32 = 64;

/// Linear memory kept resident in a pool slot between evaluations (zeroed with `memset` instead of
/// being given back to the kernel). Every evaluation receives the snapshot archive (~100 MiB for
/// 150k pods) into fresh memory; with the pages kept, that copy no longer page-faults its way
/// through the slot (abi-experiment.md §4: 102 → 18 ms for a 95 MB archive).
#[cfg(not(target_os = "linux"))]
const KEEP_RESIDENT_BYTES: usize = 192 << 20;

/// Warm slots kept (each may hold `KEEP_RESIDENT_BYTES` resident): enough for the policies of a
/// run to reuse slots, few enough to bound the memory held between runs.
#[cfg(not(target_os = "linux"))]
const WARM_SLOTS: u32 = 2;

/// The pooling instance allocator: fresh, clean instances for every evaluation, with slots reused.
#[cfg(not(target_os = "linux"))]
fn pooling(limits: &SandboxLimits) -> wasmtime::PoolingAllocationConfig {
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * 4)
        .total_memories(POOL_INSTANCES * 2)
        .total_tables(POOL_INSTANCES * 4)
        .max_memory_size(limits.memory_bytes)
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES.min(limits.memory_bytes))
        .max_unused_warm_slots(WARM_SLOTS);
    pool
}

/// `REBALANCER_WASM_PERFMAP=1` writes `/tmp/perf-<pid>.map`, so that `perf` names the compiled
/// guest functions (`wasm[0]::function[72]`; unstripped modules give their own names).
fn profiling_strategy() -> wasmtime::ProfilingStrategy {
    match std::env::var("REBALANCER_WASM_PERFMAP").as_deref() {
        Ok("1" | "true") => wasmtime::ProfilingStrategy::PerfMap,
        _ => wasmtime::ProfilingStrategy::None,
    }
}

/// Where guests' linear memories come from. On Linux every memory is a reservation of its own
/// ([`memory::GuestMemoryCreator`]) so that `cluster.map-section` can map snapshot sections into
/// it: handing a policy 35–70 MiB of snapshot then costs page-table entries, not a copy into
/// fresh pages plus zeroing them again afterwards, which pooled slots (reused, zeroed with
/// `memset`) would need. Custom memories require on-demand allocation and rule out wasmtime's
/// copy-on-write module images (the modules' data segments are a few KiB; they are copied).
/// Elsewhere: the pooling allocator, and sections are copied.
fn configure_memories(wt: &mut wasmtime::Config, limits: &SandboxLimits) {
    #[cfg(target_os = "linux")]
    {
        let _ = limits;
        wt.with_host_memory(Arc::new(memory::GuestMemoryCreator))
            .memory_init_cow(false)
            .allocation_strategy(wasmtime::InstanceAllocationStrategy::OnDemand);
    }
    #[cfg(not(target_os = "linux"))]
    wt.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pooling(
        limits,
    )));
}

/// `cluster.snapshot` and `cluster.snapshot-section` as the bindings generate them return a
/// `Vec<u8>`, which would copy a section of the archive (the core alone is ~35 MiB for 150k pods)
/// on the host for every evaluation before lowering copies it again into the guest. These
/// definitions shadow them and lower the shared buffer directly: one copy, straight into the
/// guest's memory.
fn link_shared_snapshot(linker: &mut Linker<host::HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = linker.instance(CLUSTER_INTERFACE).and_then(|mut cluster| {
        cluster.func_wrap(
            "snapshot",
            |mut store: wasmtime::StoreContextMut<'_, host::HostState>, (): ()| {
                Ok((store.data_mut().section_bytes(Section::Core)?,))
            },
        )?;
        cluster.func_wrap(
            "snapshot-section",
            |mut store: wasmtime::StoreContextMut<'_, host::HostState>, (id,): (u32,)| {
                let bytes = store
                    .data()
                    .section_of(id)
                    .map(|s| store.data_mut().section_bytes(s))
                    .transpose()?;
                Ok((bytes,))
            },
        )
    });
    linker.allow_shadowing(false);
    linked
}

/// Define the component's inert WASI imports — those alone — as traps.
/// (`Linker::define_unknown_imports_as_traps` would also define the ABI interfaces of a guest
/// built against an older minor under their exact names, as traps, hiding the semver-compatible
/// definitions the linker would otherwise resolve them to.)
fn link_inert_wasi_as_traps(
    linker: &mut Linker<host::HostState>,
    engine: &wasmtime::Engine,
    component: &Component,
) -> wasmtime::Result<()> {
    use wasmtime::component::ResourceType;
    use wasmtime::component::types::ComponentItem;

    for (name, item) in component.component_type().imports(engine) {
        if !inspect::is_inert_wasi(name) {
            continue;
        }
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        let mut linked = linker.instance(name)?;
        for (export, item) in instance.exports(engine) {
            match item.ty {
                ComponentItem::ComponentFunc(_) => {
                    let what = format!("{name}#{export}");
                    linked.func_new(export, move |_, _, _, _| {
                        Err(wasmtime::format_err!("{what} is not available to policies"))
                    })?;
                }
                ComponentItem::Resource(_) => {
                    linked.resource(export, ResourceType::host::<()>(), |_, _| Ok(()))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The WIT interface name of the cluster imports, as a component imports it.
const CLUSTER_INTERFACE: &str = "rebalancer:policy/cluster@1.4.0";

/// The wasmtime configuration of the engine — and of the compiler process, which must produce
/// artifacts this configuration accepts.
fn wasmtime_config(limits: &SandboxLimits) -> wasmtime::Config {
    let mut wt = wasmtime::Config::new();
    wt.wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(limits.stack_bytes)
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .profiler(profiling_strategy());
    configure_memories(&mut wt, limits);
    wt
}

impl Engine {
    pub fn new(config: EngineConfig) -> Result<Engine, EngineError> {
        let wasmtime = wasmtime::Engine::new(&wasmtime_config(&config.limits))
            .map_err(|e| EngineError::Internal(format!("wasmtime configuration: {e}")))?;
        let compiler = compile::Compiler::new(config.compile, config.limits.clone(), &wasmtime)?;
        spawn_epoch_ticker(&wasmtime);
        Ok(Engine {
            inner: Arc::new(EngineInner {
                wasmtime,
                limits: config.limits,
                compiler,
            }),
        })
    }

    pub fn compile_settings(&self) -> &CompileSettings {
        self.inner.compiler.settings()
    }

    /// How many modules were compiled, and how many loaded from the disk cache instead.
    pub fn compile_stats(&self) -> CompileStats {
        self.inner.compiler.stats()
    }

    /// Drop what is kept of a module (compiled code in memory, its artifact on disk): its policy
    /// was deleted or replaced. Registered policies keep their own handle until unregistered.
    pub fn forget(&self, digest: &str) {
        self.inner.compiler.forget(digest);
    }

    /// Remove the on-disk artifacts of every module but `keep` (digests); returns how many.
    pub fn retain_compiled(&self, keep: &[&str]) -> usize {
        self.inner.compiler.retain(keep)
    }

    pub fn limits(&self) -> &SandboxLimits {
        &self.inner.limits
    }

    /// Validate, compile and introspect a module. Blocking (compilation takes ~0.5 s; a compile
    /// waits for one of `max_concurrent` compile slots, never for an evaluation permit).
    pub fn compile(&self, wasm: &[u8]) -> Result<Arc<CompiledPolicy>, EngineError> {
        self.compile_as(wasm, compile::Trust::Uploaded)
    }

    /// [`Engine::compile`] for a module of the server's own (a built-in): compiled without the
    /// upload memory limit and deadline.
    pub fn compile_builtin(&self, wasm: &[u8]) -> Result<Arc<CompiledPolicy>, EngineError> {
        self.compile_as(wasm, compile::Trust::BuiltIn)
    }

    fn compile_as(
        &self,
        wasm: &[u8],
        trust: compile::Trust,
    ) -> Result<Arc<CompiledPolicy>, EngineError> {
        let limits = &self.inner.limits;
        if wasm.len() > limits.max_module_bytes {
            return Err(EngineError::TooLarge {
                size: wasm.len(),
                limit: limits.max_module_bytes,
            });
        }
        inspect::check_header(wasm)?;
        let digest = hex::encode(Sha256::digest(wasm));
        let compiler = &self.inner.compiler;
        if let Some(done) = compiler.cached(&digest) {
            return Ok(done);
        }
        let _slot = compiler.permit();
        // Compiled by another caller while this one waited for its slot?
        if let Some(done) = compiler.cached(&digest) {
            return Ok(done);
        }
        let component = compiler.component(&self.inner.wasmtime, wasm, &digest, trust)?;
        let code_bytes = {
            let range = component.image_range();
            (range.end as usize).saturating_sub(range.start as usize)
        };
        let compiled = self.introspect(component, wasm, digest.clone());
        match compiled {
            Ok(compiled) => {
                compiler.remember(compiled.clone(), code_bytes);
                Ok(compiled)
            }
            Err(e) => {
                // Compiled, but not a usable policy: keep nothing of it.
                compiler.forget(&digest);
                Err(e)
            }
        }
    }

    /// Check a compiled component's imports and exports, link it, and read its `info`.
    fn introspect(
        &self,
        component: Component,
        wasm: &[u8],
        digest: String,
    ) -> Result<Arc<CompiledPolicy>, EngineError> {
        let imports = inspect::check_imports_exports(&self.inner.wasmtime, &component)?;
        let mut linker: Linker<host::HostState> = Linker::new(&self.inner.wasmtime);
        bindings::Policy::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| EngineError::Internal(format!("linking the ABI: {e:#}")))?;
        link_shared_snapshot(&mut linker)
            .map_err(|e| EngineError::Internal(format!("linking cluster.snapshot: {e:#}")))?;
        if imports.uses_wasi {
            // wasm32-wasip2's std imports wasi:cli/wasi:io even when unused: satisfy them with
            // traps so a policy gets no capability at all.
            link_inert_wasi_as_traps(&mut linker, &self.inner.wasmtime, &component)
                .map_err(|e| EngineError::Internal(format!("linking WASI traps: {e:#}")))?;
        }
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|e| EngineError::Compile(format!("{e:#}")))?;
        let pre =
            bindings::PolicyPre::new(instance_pre).map_err(|e| EngineError::MissingExport {
                name: format!("{e:#}"),
            })?;

        let abi_version = imports
            .abi_version
            .unwrap_or_else(|| ABI_VERSION.to_string());
        let mut compiled = CompiledPolicy {
            layout: inspect::layout_of(&abi_version),
            meta: PolicyMeta {
                name: String::new(),
                version: String::new(),
                description: String::new(),
                abi_version,
                digest,
                size_bytes: wasm.len() as u64,
                extension_points: Vec::new(),
                args_schema: serde_json::Value::Null,
                default_args: serde_json::Value::Null,
            },
            pre,
        };
        compiled.meta = self.read_info(&compiled)?;
        Ok(Arc::new(compiled))
    }

    fn read_info(&self, policy: &CompiledPolicy) -> Result<PolicyMeta, EngineError> {
        let mut call = host::Call::metadata(self, policy)
            .map_err(|e| EngineError::InvalidMetadata(format!("instantiation failed: {e:#}")))?;
        let info = call
            .info()
            .map_err(|f| EngineError::InvalidMetadata(format!("`info` failed: {}", f.message)))?;
        inspect::check_info(info, &policy.meta)
    }

    /// Ask the policy whether `args` are valid. Blocking.
    pub fn validate_args(
        &self,
        policy: &CompiledPolicy,
        args: &serde_json::Value,
    ) -> Result<(), Vec<ArgError>> {
        let text = args.to_string();
        let mut call = host::Call::metadata(self, policy).map_err(|e| {
            vec![ArgError::new(
                "",
                format!("the policy could not be instantiated: {e:#}"),
            )]
        })?;
        call.validate_args(&text)
    }

    /// Run one extension point of a policy in a fresh sandbox. Blocking.
    pub fn evaluate(
        &self,
        policy: &CompiledPolicy,
        point: ExtensionPoint,
        args: &serde_json::Value,
        session: EvalSession,
    ) -> Evaluation {
        let started = crate::stopwatch::Stopwatch::start();
        host::evaluate(self, policy, point, &args.to_string(), session, started)
    }
}

fn spawn_epoch_ticker(engine: &wasmtime::Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawn the epoch ticker thread");
}

/// Why an evaluation ended without success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyFailure {
    /// `timeout` | `memory` | `stack-overflow` | `trap` | `panic` | `proposal-cap` | `log-cap` |
    /// `policy-error` | `invalid-args` | `missing-policy` | `unsupported-extension-point` |
    /// `instantiation`.
    pub kind: String,
    /// At most [`caps::MAX_MESSAGE_BYTES`]: a longer message (a policy's error, a panic) is cut,
    /// with a marker saying how long it was.
    pub message: String,
}

impl PolicyFailure {
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        PolicyFailure {
            kind: kind.to_string(),
            message: caps::message(message.into()),
        }
    }
}

/// Registry of compiled policies by plugin name.
#[derive(Clone, Default)]
pub struct PolicyRegistry {
    inner: Arc<RwLock<BTreeMap<String, RegisteredPolicy>>>,
}

impl std::fmt::Debug for PolicyRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.list().iter().map(|p| &p.policy.meta.name))
            .finish()
    }
}

#[derive(Clone, Debug)]
pub struct RegisteredPolicy {
    pub policy: Arc<CompiledPolicy>,
    pub builtin: bool,
}

impl PolicyRegistry {
    pub fn insert(&self, policy: Arc<CompiledPolicy>, builtin: bool) {
        let name = policy.meta.name.clone();
        self.write()
            .insert(name, RegisteredPolicy { policy, builtin });
    }

    pub fn get(&self, name: &str) -> Option<RegisteredPolicy> {
        self.read().get(name).cloned()
    }

    pub fn list(&self) -> Vec<RegisteredPolicy> {
        self.read().values().cloned().collect()
    }

    pub fn remove(&self, name: &str) -> Option<RegisteredPolicy> {
        self.write().remove(name)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, RegisteredPolicy>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, RegisteredPolicy>> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests;
