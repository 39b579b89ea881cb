//! Bounded compilation of policy modules, and what is kept of it.
//!
//! Owns: turning module bytes into a wasmtime [`Component`] — in a child process of the server
//! with an address-space limit and a deadline ([`Isolation::Subprocess`], the server's default) or
//! in this process ([`Isolation::InProcess`]: tools, unit tests, platforms without `fork`) —; the
//! on-disk cache of compiled artifacts, so a restart does not compile again what was accepted; the
//! in-memory cache of compiled policies (LRU, bounded by bytes); and the compile semaphore, which
//! is not the evaluation semaphore: a compile never holds up a run.
//! Must not: instantiate or run guest code (the engine does that, in the sandbox), or load an
//! artifact from anywhere but its own cache directory, where only its own compiler writes.
//!
//! Why a child process: compilation has no memory or time bound of its own. One function of
//! deeply nested blocks (a 1.5 MB module, far under the upload cap) takes Cranelift minutes and
//! gigabytes. In a child with `RLIMIT_AS` and a deadline it costs the child its life, not the
//! server; the server answers 422 `compile_memory` / `compile_timeout`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::Component;

use super::{CompiledPolicy, EngineError, SandboxLimits};

/// The hidden subcommand of the server binary that compiles one module (see [`child_main`]).
pub const CHILD_SUBCOMMAND: &str = "compile-module";

/// Exit status of a child whose module does not compile (the reason is on its stdout).
const EXIT_COMPILE_ERROR: i32 = 3;
/// Exit status of a child that could not do its job (bad arguments, unwritable output).
const EXIT_CHILD_FAILURE: i32 = 4;

/// Most bytes of a child's stdout/stderr kept for an error message.
const CHILD_OUTPUT_CAP: usize = 16 << 10;

/// Where modules are compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// In this process: unbounded, for tools and tests that compile only modules they trust.
    InProcess,
    /// In a child process: `program compile-module …` (the server binary itself), with an
    /// address-space limit and a deadline.
    Subprocess { program: PathBuf },
}

/// How modules are compiled and what is kept of them.
#[derive(Debug, Clone)]
pub struct CompileSettings {
    pub isolation: Isolation,
    /// Directory of compiled artifacts (`<digest>.<engine fingerprint>.cwasm`); `None` keeps
    /// nothing on disk.
    pub cache_dir: Option<PathBuf>,
    /// Address-space limit of the compiler process, in bytes (subprocess only).
    pub memory_bytes: u64,
    /// Deadline of one compile, in milliseconds (subprocess only).
    pub timeout_ms: u64,
    /// Compiles at once; more wait.
    pub max_concurrent: usize,
    /// Compiled code kept in memory for modules no policy holds any more (re-uploads of a digest,
    /// `validate`), in bytes.
    pub memory_cache_bytes: usize,
}

/// Default address-space limit of the compiler process. The built-ins compile in less than a
/// tenth of it (the child's own binary and thread stacks count too); the nested-block module that
/// took 20 GB in-process is stopped by it.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 1 << 30;
/// Default compile deadline. The built-ins compile in 0.1–0.5 s each (release build).
pub const DEFAULT_COMPILE_TIMEOUT_MS: u64 = 60_000;
/// Default in-memory cache of compiled code not held by a registered policy.
pub const DEFAULT_MEMORY_CACHE_BYTES: usize = 256 << 20;

impl Default for CompileSettings {
    fn default() -> Self {
        CompileSettings {
            isolation: Isolation::InProcess,
            cache_dir: None,
            memory_bytes: DEFAULT_COMPILE_MEMORY_BYTES,
            timeout_ms: DEFAULT_COMPILE_TIMEOUT_MS,
            max_concurrent: 1,
            memory_cache_bytes: DEFAULT_MEMORY_CACHE_BYTES,
        }
    }
}

/// Whose module is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trust {
    /// Sent by a user: compiled within `--policy-compile-memory` and `--policy-compile-timeout-ms`.
    Uploaded,
    /// Part of the server binary: the upload bounds are for hostile modules, not for the
    /// server's own, which must not fail start-up on a small machine or a low setting. Still in
    /// a child process, with a generous deadline.
    BuiltIn,
}

/// The deadline of a built-in module's compile.
const BUILT_IN_COMPILE_TIMEOUT_MS: u64 = 10 * 60 * 1000;

/// What one compiler process may use; `memory_bytes: None` is unlimited.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    memory_bytes: Option<u64>,
    timeout_ms: u64,
}

/// Compiles modules and keeps what was compiled.
pub(super) struct Compiler {
    settings: CompileSettings,
    /// The sandbox limits, handed to the child so that it configures the same engine.
    limits: SandboxLimits,
    /// Identifies the engine configuration an artifact was compiled for.
    fingerprint: String,
    permits: Permits,
    memory: Mutex<Lru>,
    compiled: AtomicU64,
    loaded: AtomicU64,
}

/// How modules were turned into compiled code since the engine started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Compiled by the compiler (a child process, or in process).
    pub compiled: u64,
    /// Loaded from the on-disk cache instead.
    pub loaded: u64,
}

impl Compiler {
    pub(super) fn new(
        settings: CompileSettings,
        limits: SandboxLimits,
        engine: &wasmtime::Engine,
    ) -> Result<Compiler, EngineError> {
        if let Some(dir) = &settings.cache_dir {
            std::fs::create_dir_all(dir).map_err(|e| {
                EngineError::Internal(format!(
                    "creating the compiled-policy cache {}: {e}",
                    dir.display()
                ))
            })?;
        }
        Ok(Compiler {
            fingerprint: fingerprint(engine),
            permits: Permits::new(settings.max_concurrent.max(1)),
            memory: Mutex::new(Lru::new(settings.memory_cache_bytes)),
            compiled: AtomicU64::new(0),
            loaded: AtomicU64::new(0),
            settings,
            limits,
        })
    }

    pub(super) fn settings(&self) -> &CompileSettings {
        &self.settings
    }

    pub(super) fn stats(&self) -> CompileStats {
        CompileStats {
            compiled: self.compiled.load(Ordering::Relaxed),
            loaded: self.loaded.load(Ordering::Relaxed),
        }
    }

    /// A compile slot; held while compiling and reading the module's metadata.
    pub(super) fn permit(&self) -> Permit<'_> {
        self.permits.acquire()
    }

    pub(super) fn cached(&self, digest: &str) -> Option<Arc<CompiledPolicy>> {
        self.lru().get(digest)
    }

    pub(super) fn remember(&self, policy: Arc<CompiledPolicy>, code_bytes: usize) {
        self.lru().insert(policy, code_bytes);
    }

    /// The compiled component of `wasm`: from the disk cache, or compiled (and stored there).
    pub(super) fn component(
        &self,
        engine: &wasmtime::Engine,
        wasm: &[u8],
        digest: &str,
        trust: Trust,
    ) -> Result<Component, EngineError> {
        if let Some(path) = self.artifact_path(digest).filter(|p| p.exists()) {
            match load(engine, &path) {
                Ok(component) => {
                    self.loaded.fetch_add(1, Ordering::Relaxed);
                    return Ok(component);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %format!("{e:#}"),
                        "unusable compiled-policy artifact; compiling again");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        self.compiled.fetch_add(1, Ordering::Relaxed);
        match &self.settings.isolation {
            Isolation::InProcess => {
                let component = Component::new(engine, wasm)
                    .map_err(|e| EngineError::Compile(format!("{e:#}")))?;
                if let Some(path) = self.artifact_path(digest) {
                    self.store_in_process(&component, &path, digest);
                }
                Ok(component)
            }
            Isolation::Subprocess { program } => {
                let bounds = match trust {
                    Trust::Uploaded => Bounds {
                        memory_bytes: Some(self.settings.memory_bytes),
                        timeout_ms: self.settings.timeout_ms,
                    },
                    Trust::BuiltIn => Bounds {
                        memory_bytes: None,
                        timeout_ms: BUILT_IN_COMPILE_TIMEOUT_MS,
                    },
                };
                self.compile_in_child(engine, program, wasm, digest, bounds)
            }
        }
    }

    /// Drop everything kept of a module: it was deleted, or replaced by another digest.
    pub(super) fn forget(&self, digest: &str) {
        self.lru().remove(digest);
        if let Some(path) = self.artifact_path(digest) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(path = %path.display(), error = %e,
                    "could not remove a compiled-policy artifact"),
            }
        }
    }

    /// Remove every cached artifact but those of `keep` (digests) compiled for this engine:
    /// modules no longer stored, artifacts of other wasmtime versions or configurations, and
    /// temporary files a killed compile left behind (older than any compile's deadline; a fresh
    /// one may be another compile's output in progress). Returns how many files were removed.
    pub(super) fn retain(&self, keep: &[&str]) -> usize {
        let Some(dir) = &self.settings.cache_dir else {
            return 0;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let wanted: Vec<String> = keep.iter().map(|d| self.file_name(d)).collect();
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let remove = if name.ends_with(".tmp") {
                // Another compile (of this process or another server sharing the directory) may
                // be writing it now: only a file older than any compile's deadline is left over.
                is_stale(&entry)
            } else {
                name.ends_with(".cwasm") && !wanted.iter().any(|w| w == name)
            };
            if remove && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        // A poisoned cache only means another compile panicked; the map itself is intact.
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn file_name(&self, digest: &str) -> String {
        format!("{digest}.{}.cwasm", self.fingerprint)
    }

    fn artifact_path(&self, digest: &str) -> Option<PathBuf> {
        self.settings
            .cache_dir
            .as_ref()
            .map(|dir| dir.join(self.file_name(digest)))
    }

    fn temporary_path(&self, digest: &str) -> PathBuf {
        let dir = self
            .settings
            .cache_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        // One counter for the whole process: several engines (test servers) in one process
        // share a cache directory, and each name must be one compile's alone.
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        dir.join(format!(".{digest}.{}.{n}.tmp", std::process::id()))
    }

    fn store_in_process(&self, component: &Component, path: &Path, digest: &str) {
        let stored = component
            .serialize()
            .map_err(|e| format!("{e:#}"))
            .and_then(|bytes| {
                let tmp = self.temporary_path(digest);
                std::fs::write(&tmp, bytes)
                    .and_then(|()| std::fs::rename(&tmp, path))
                    .map_err(|e| {
                        let _ = std::fs::remove_file(&tmp);
                        e.to_string()
                    })
            });
        if let Err(e) = stored {
            tracing::warn!(path = %path.display(), error = %e, "could not cache a compiled policy");
        }
    }

    fn compile_in_child(
        &self,
        engine: &wasmtime::Engine,
        program: &Path,
        wasm: &[u8],
        digest: &str,
        bounds: Bounds,
    ) -> Result<Component, EngineError> {
        let output = self.temporary_path(digest);
        let result = self
            .run_child(program, wasm, &output, bounds)
            .and_then(|()| {
                load(engine, &output).map_err(|e| {
                    EngineError::Internal(format!("loading the compiler's output: {e:#}"))
                })
            });
        match (&result, self.artifact_path(digest)) {
            // Loaded from the temporary file, which becomes the cached artifact.
            (Ok(_), Some(path)) => {
                if let Err(e) = std::fs::rename(&output, &path) {
                    tracing::warn!(path = %path.display(), error = %e,
                        "could not cache a compiled policy");
                    let _ = std::fs::remove_file(&output);
                }
            }
            _ => {
                let _ = std::fs::remove_file(&output);
            }
        }
        result
    }

    /// Run `program compile-module` on `wasm`, writing the artifact to `output`.
    fn run_child(
        &self,
        program: &Path,
        wasm: &[u8],
        output: &Path,
        bounds: Bounds,
    ) -> Result<(), EngineError> {
        let limits = serde_json::to_string(&self.limits)
            .map_err(|e| EngineError::Internal(format!("serialising the sandbox limits: {e}")))?;
        let cpu_seconds = bounds.timeout_ms.div_ceil(1000) + 1;
        let mut child = Command::new(program)
            .arg(CHILD_SUBCOMMAND)
            .arg("--output")
            .arg(output)
            .arg("--limits")
            .arg(&limits)
            .arg("--memory-bytes")
            .arg(bounds.memory_bytes.unwrap_or(0).to_string())
            .arg("--cpu-seconds")
            .arg(cpu_seconds.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                EngineError::Internal(format!(
                    "starting the compiler process {}: {e}",
                    program.display()
                ))
            })?;
        let stdout = capture(child.stdout.take());
        let stderr = capture(child.stderr.take());
        if let Some(mut stdin) = child.stdin.take() {
            // A child that died early (it is reported below) closes the pipe: ignore EPIPE.
            let _ = stdin.write_all(wasm);
        }
        let deadline = Instant::now() + Duration::from_millis(bounds.timeout_ms);
        let mut killed = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    killed = true;
                    break child.wait().map_err(|e| {
                        EngineError::Internal(format!("waiting for the compiler process: {e}"))
                    })?;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    let _ = child.kill();
                    return Err(EngineError::Internal(format!(
                        "waiting for the compiler process: {e}"
                    )));
                }
            }
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        classify(
            status,
            killed,
            &stdout,
            &stderr,
            bounds.memory_bytes.unwrap_or(0),
            bounds.timeout_ms,
        )
    }
}

/// A temporary file no compile can still be writing: older than the longest compile deadline.
fn is_stale(entry: &std::fs::DirEntry) -> bool {
    let deadline = Duration::from_millis(BUILT_IN_COMPILE_TIMEOUT_MS);
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age > deadline)
}

/// Load an artifact of this compiler's. It is read into memory rather than mapped
/// (`Component::deserialize_file`): a mapped file that something truncates under a running
/// server would kill it with SIGBUS; a read copy cannot be changed behind its back.
fn load(engine: &wasmtime::Engine, path: &Path) -> wasmtime::Result<Component> {
    let bytes = std::fs::read(path)?;
    // SAFETY: `deserialize` trusts the bytes to be wasmtime's own output. Only this compiler
    // writes into the cache directory (a temporary name, then a rename), from modules it was
    // given — never artifacts a user sent — and wasmtime checks the header and that the artifact
    // was compiled for this engine's version and configuration. The directory is trusted as the
    // database beside it is.
    unsafe { Component::deserialize(engine, &bytes) }
}

/// Read a child's pipe on a thread of its own (so that neither pipe can fill up and block the
/// child), keeping its first [`CHILD_OUTPUT_CAP`] bytes.
fn capture<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            return String::new();
        };
        let mut kept = Vec::new();
        let _ = (&mut pipe)
            .take(CHILD_OUTPUT_CAP as u64)
            .read_to_end(&mut kept);
        let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        String::from_utf8_lossy(&kept).trim().to_string()
    })
}

/// What a child's end means.
fn classify(
    status: std::process::ExitStatus,
    killed_at_deadline: bool,
    stdout: &str,
    stderr: &str,
    memory_bytes: u64,
    timeout_ms: u64,
) -> Result<(), EngineError> {
    if killed_at_deadline {
        return Err(EngineError::CompileTimeout {
            limit_ms: timeout_ms,
        });
    }
    if status.success() {
        return Ok(());
    }
    if status.code() == Some(EXIT_COMPILE_ERROR) {
        return Err(EngineError::Compile(stdout.to_string()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if status.signal() == Some(libc::SIGXCPU) {
            return Err(EngineError::CompileTimeout {
                limit_ms: timeout_ms,
            });
        }
    }
    // Under RLIMIT_AS an allocation fails: Rust prints "memory allocation of N bytes failed" and
    // aborts; a thread that cannot get its stack panics with "Cannot allocate memory"/ENOMEM.
    let out_of_memory = [
        "memory allocation of",
        "Cannot allocate memory",
        "out of memory",
    ]
    .iter()
    .any(|needle| stderr.contains(needle) || stdout.contains(needle));
    if out_of_memory {
        return Err(EngineError::CompileMemory {
            limit_bytes: memory_bytes,
        });
    }
    let detail = [stdout, stderr]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("; ");
    Err(EngineError::Internal(format!(
        "the compiler process failed ({status}){}",
        if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        }
    )))
}

/// Arguments of [`child_main`], as the parent passes them.
#[derive(Debug, Clone)]
pub struct ChildArgs {
    pub output: PathBuf,
    /// [`SandboxLimits`] as JSON: the engine is configured from them exactly as the parent's is.
    pub limits: String,
    /// Address-space limit; 0: none.
    pub memory_bytes: u64,
    pub cpu_seconds: u64,
}

impl ChildArgs {
    /// Parse `--output P --limits J --memory-bytes N --cpu-seconds N` (the arguments after the
    /// subcommand). The parent is the only caller: errors are terse.
    pub fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<ChildArgs, String> {
        let mut output = None;
        let mut limits = None;
        let mut memory_bytes = None;
        let mut cpu_seconds = None;
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .ok_or_else(|| format!("{} needs a value", flag.to_string_lossy()))?;
            let text = || value.to_string_lossy().into_owned();
            let number = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
            match flag.to_str() {
                Some("--output") => output = Some(PathBuf::from(&value)),
                Some("--limits") => limits = Some(text()),
                Some("--memory-bytes") => memory_bytes = Some(number(text())?),
                Some("--cpu-seconds") => cpu_seconds = Some(number(text())?),
                _ => return Err(format!("unknown argument {}", flag.to_string_lossy())),
            }
        }
        Ok(ChildArgs {
            output: output.ok_or("--output is required")?,
            limits: limits.ok_or("--limits is required")?,
            memory_bytes: memory_bytes.ok_or("--memory-bytes is required")?,
            cpu_seconds: cpu_seconds.ok_or("--cpu-seconds is required")?,
        })
    }
}

/// The compiler process: limit this process's address space and CPU time, read a module from
/// stdin, compile it for an engine configured like the parent's, write the artifact to
/// `--output`. Exit 0 on success, [`EXIT_COMPILE_ERROR`] with the reason on stdout when the
/// module does not compile.
pub fn child_main(args: ChildArgs) -> ExitCode {
    let fail = |message: String| {
        let _ = writeln!(std::io::stderr(), "compile-module: {message}");
        ExitCode::from(EXIT_CHILD_FAILURE as u8)
    };
    if let Err(e) = limit_self(args.memory_bytes, args.cpu_seconds) {
        return fail(format!("setting resource limits: {e}"));
    }
    let limits: SandboxLimits = match serde_json::from_str(&args.limits) {
        Ok(limits) => limits,
        Err(e) => return fail(format!("--limits: {e}")),
    };
    let mut wasm = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(limits.max_module_bytes as u64 + 1)
        .read_to_end(&mut wasm)
    {
        return fail(format!("reading the module from stdin: {e}"));
    }
    if wasm.len() > limits.max_module_bytes {
        return fail(format!(
            "the module is over the {}-byte cap",
            limits.max_module_bytes
        ));
    }
    let engine = match wasmtime::Engine::new(&super::wasmtime_config(&limits)) {
        Ok(engine) => engine,
        Err(e) => return fail(format!("configuring wasmtime: {e:#}")),
    };
    match engine.precompile_component(&wasm) {
        Ok(artifact) => match std::fs::write(&args.output, artifact) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(format!("writing {}: {e}", args.output.display())),
        },
        Err(e) => {
            let _ = write!(std::io::stdout(), "{e:#}");
            ExitCode::from(EXIT_COMPILE_ERROR as u8)
        }
    }
}

/// Address-space and CPU-time limits on the calling process, and death with its parent.
#[cfg(target_os = "linux")]
fn limit_self(memory_bytes: u64, cpu_seconds: u64) -> std::io::Result<()> {
    let set = |resource, soft: u64, hard: u64| {
        let limit = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads the struct it is given; no memory is shared.
        if unsafe { libc::setrlimit(resource, &limit) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    if memory_bytes > 0 {
        set(libc::RLIMIT_AS, memory_bytes, memory_bytes)?;
    }
    // SIGXCPU at the soft limit (reported as a timeout), SIGKILL a second later.
    set(libc::RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)?;
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number; no memory is shared.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn limit_self(_memory_bytes: u64, _cpu_seconds: u64) -> std::io::Result<()> {
    // Elsewhere the parent's deadline is the only bound.
    Ok(())
}

/// A short, stable name of the engine configuration artifacts are compiled for: wasmtime
/// refuses to load an artifact of another version or configuration, and the name keeps such
/// artifacts from being tried at all (and lets `retain` remove them).
fn fingerprint(engine: &wasmtime::Engine) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// A counting semaphore for blocking code.
struct Permits {
    free: Mutex<usize>,
    returned: Condvar,
}

pub(super) struct Permit<'a>(&'a Permits);

impl Permits {
    fn new(n: usize) -> Permits {
        Permits {
            free: Mutex::new(n),
            returned: Condvar::new(),
        }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.returned.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.returned.notify_one();
    }
}

/// Compiled policies by digest, least recently used first out once over the byte budget.
struct Lru {
    entries: HashMap<String, Entry>,
    bytes: usize,
    budget: usize,
    clock: u64,
}

struct Entry {
    policy: Arc<CompiledPolicy>,
    bytes: usize,
    used: u64,
}

impl Lru {
    fn new(budget: usize) -> Lru {
        Lru {
            entries: HashMap::new(),
            bytes: 0,
            budget,
            clock: 0,
        }
    }

    fn get(&mut self, digest: &str) -> Option<Arc<CompiledPolicy>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(digest).map(|e| {
            e.used = clock;
            e.policy.clone()
        })
    }

    fn insert(&mut self, policy: Arc<CompiledPolicy>, bytes: usize) {
        self.clock += 1;
        let digest = policy.meta.digest.clone();
        self.remove(&digest);
        self.bytes += bytes;
        self.entries.insert(
            digest,
            Entry {
                policy,
                bytes,
                used: self.clock,
            },
        );
        while self.bytes > self.budget {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(d, _)| d.clone())
            else {
                break;
            };
            self.remove(&oldest);
        }
    }

    fn remove(&mut self, digest: &str) {
        if let Some(e) = self.entries.remove(digest) {
            self.bytes -= e.bytes;
        }
    }

    #[cfg(test)]
    fn digests(&self) -> Vec<String> {
        let mut d: Vec<String> = self.entries.keys().cloned().collect();
        d.sort();
        d
    }
}

#[cfg(test)]
pub(super) mod lru_tests {
    use super::*;

    pub(in super::super) fn lru_digests(compiler: &Compiler) -> Vec<String> {
        compiler.lru().digests()
    }

    pub(in super::super) fn lru_bytes(compiler: &Compiler) -> usize {
        compiler.lru().bytes
    }
}
