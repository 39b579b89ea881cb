//! `rebalancer eval`: one policy, or a whole profile with its DefaultEvictor, run offline on a
//! snapshot file — the policy author's inner loop — with no database and no server.
//!
//! Owns turning the command line into a run exactly as the server makes one: the snapshot is
//! parsed and built by `rebalancer_cluster` as a push is ([`input::snapshot`]); modules are
//! checked and compiled by the engine with the server's default [`SandboxLimits`] and upload
//! bounds (size cap, compile in a child process with its memory limit and deadline); a profile
//! document is read by the same parser and checked by the same [`profile::check_plugins`] as
//! `PUT /api/v1/profiles/{name}` (args through each policy's validate-args); the run is
//! [`run::execute`], the server's own cycle; state scopes are committed as the server commits
//! them (those of policies that succeeded). Built-ins are compiled only when the run uses them.
//! Must not: open a database or a socket, or differ from the server in what a run sees and does.
//!
//! A single policy runs in a one-plugin profile: one plugin set named `default`, the policy
//! enabled at every extension point it implements (or `--extension-point`), its args in
//! `pluginConfig` (none: the policy's defaults), and no DefaultEvictor entry — descheduler's
//! defaults, as in any profile that does not configure it.

pub mod input;
pub mod output;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use crate::config::{EvalArgs, EvalExtensionPoint, EvalOutput};
use rebalancer_engine::profile::{self, ProfileError, ProfileSpec};
use rebalancer_engine::run::{self, PolicyStates, RunError, RunReport};
use rebalancer_engine::{
    CompileSettings, CompiledPolicy, Engine, EngineConfig, EngineError, Isolation, PolicyRegistry,
    SandboxLimits,
};
use rebalancer_policy_sdk::state::StateScope;

/// The exit codes, for `rebalancer eval --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  the run proposed nothing
  1  the run proposed at least one eviction
  2  a policy failed: a trap or panic, the deadline, the memory, stack, proposal or log cap,
     or an error it returned (what it proposed before is still printed)
  3  bad input: an unreadable file, an invalid snapshot, module, args, profile or state file,
     or a plugin that is neither a built-in nor POLICY.wasm (the message says what and where)";

/// How an eval ended, as its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 0: nothing proposed.
    NothingProposed = 0,
    /// 1: at least one eviction proposed.
    Proposed = 1,
    /// 2: a policy failed.
    PolicyFailed = 2,
    /// 3: bad input.
    BadInput = 3,
}

impl Status {
    pub fn code(self) -> u8 {
        self as u8
    }

    /// A failed policy counts first, then whether anything was proposed.
    pub fn of(report: &RunReport) -> Status {
        if report.policies.iter().any(|p| p.error.is_some()) {
            Status::PolicyFailed
        } else if report.proposals.is_empty() {
            Status::NothingProposed
        } else {
            Status::Proposed
        }
    }
}

/// Why an eval could not run (exit code 3).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file, a flag or a document is wrong; the message says which and where.
    #[error("{0}")]
    Input(String),
    /// The engine could not start (not the input's fault).
    #[error("internal error: {0}")]
    Internal(String),
}

impl EvalError {
    /// `path: message`.
    pub fn input(path: &Path, message: impl std::fmt::Display) -> EvalError {
        EvalError::Input(format!("{}: {message}", input::shown(path)))
    }
}

/// Where a module the run uses came from, and what loading it cost.
#[derive(Debug, Clone)]
pub struct LoadedModule {
    pub policy: Arc<CompiledPolicy>,
    /// The file, or `None` for a built-in.
    pub path: Option<String>,
    /// Checking, compiling (in a child process) and reading `info`, in milliseconds.
    pub load_ms: f64,
    /// Loaded from `--cache-dir` instead of compiled.
    pub cached: bool,
}

/// What an eval produced.
pub struct Evaluated {
    pub snapshot: input::Snapshot,
    pub snapshot_source: String,
    pub modules: Vec<LoadedModule>,
    pub spec: ProfileSpec,
    pub profile_warnings: Vec<ProfileError>,
    pub report: RunReport,
    /// The scopes the run commits, with their new entries.
    pub committed: Vec<input::ScopeEntries>,
    /// The state file written (`--write-state`).
    pub state_written: Option<String>,
    pub status: Status,
}

/// `rebalancer eval`: run, print, and exit with the [`Status`].
pub fn main(args: EvalArgs) -> ExitCode {
    match evaluate(&args) {
        Ok(done) => {
            let printed = match args.output {
                EvalOutput::Table => output::table(&done),
                EvalOutput::Json => output::json(&done),
            };
            // The output is the command's product, not a log line; a closed pipe (`| head`)
            // is not an error of the eval.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), printed.as_bytes());
            if let Some(path) = &done.state_written {
                eprintln!("state written to {path}");
            }
            ExitCode::from(done.status.code())
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(Status::BadInput.code())
        }
    }
}

/// Everything but printing.
pub fn evaluate(args: &EvalArgs) -> Result<Evaluated, EvalError> {
    let time_ms = match &args.observed_at {
        None => rebalancer_store::now_ms(),
        Some(text) => rebalancer_cluster::parse_time_ms(text).ok_or_else(|| {
            EvalError::Input(format!(
                "--observed-at {text:?} is not an RFC 3339 time (e.g. 2026-11-20T12:00:00Z)"
            ))
        })?,
    };
    // Every file is read and checked before anything compiles.
    let single_args = args.args.as_deref().map(input::document).transpose()?;
    let profile_doc = args.profile.as_deref().map(input::document).transpose()?;
    let loaded_states = match &args.state {
        Some(dir) => input::read_states(dir)?,
        None => input::States::new(),
    };
    let snapshot = input::snapshot(&args.snapshot, time_ms)?;

    let engine = start_engine(args.cache_dir.clone())?;
    let registry = PolicyRegistry::default();
    let mut modules = Vec::new();
    if let Some(path) = &args.policy {
        let module = load_file(&engine, path)?;
        registry.insert(module.policy.clone(), false);
        modules.push(module);
    }

    // The document the run evaluates, and how to say where its problems are.
    let (doc, locate): (Value, Box<dyn Fn(ProfileError) -> String>) = match profile_doc {
        Some(doc) => {
            let path = input::shown(args.profile.as_deref().expect("read above"));
            (doc, Box::new(move |e| format!("{path}: {e}")))
        }
        None => {
            let name = match (&args.builtin, modules.first()) {
                (Some(name), _) => {
                    let module = load_builtin(&engine, name)?.ok_or_else(|| {
                        EvalError::Input(format!(
                            "--builtin {name:?}: no built-in policy has this name (built-ins: {})",
                            builtin_names().join(", ")
                        ))
                    })?;
                    registry.insert(module.policy.clone(), true);
                    modules.push(module);
                    name.clone()
                }
                (None, Some(module)) => module.policy.meta.name.clone(),
                (None, None) => unreachable!("clap requires POLICY.wasm, --builtin or --profile"),
            };
            let meta = &modules.last().expect("loaded above").policy.meta;
            let points: Vec<&str> = match args.extension_point {
                Some(point) => vec![point_name(point)],
                None => meta.extension_points.iter().map(String::as_str).collect(),
            };
            let doc = single_plugin_document(&name, &points, single_args);
            let args_file = args.args.as_deref().map(input::shown);
            (
                doc,
                Box::new(move |e| locate_single(e, args_file.as_deref())),
            )
        }
    };

    let outcome = profile::parse_all(&doc);
    let spec = outcome.parsed.spec.clone();
    let unknown = load_profile_builtins(&engine, &registry, &spec, &doc, &mut modules)?;
    let mut problems = profile::check_plugins(&spec, &doc, &engine, &registry);
    problems.retain(|p| !unknown.iter().any(|u| u.field == p.field));
    problems.extend(unknown);
    let problems = profile::merge_errors(outcome.errors, problems);
    if !problems.is_empty() {
        let lines: Vec<String> = problems.into_iter().map(&locate).collect();
        return Err(EvalError::Input(lines.join("\n")));
    }

    let mut states = PolicyStates::new(engine.limits().max_state_bytes);
    for (key, entries) in &loaded_states {
        states.scopes.insert(
            key.clone(),
            (StateScope::new(entries.clone(), states.max_bytes), 0),
        );
    }
    let report = run::execute(&engine, &registry, &spec, &snapshot.snapshot, states).map_err(
        |RunError::InvalidProfile(errors)| {
            let lines: Vec<String> = errors.into_iter().map(&locate).collect();
            EvalError::Input(format!(
                "the profile cannot run on this snapshot:\n{}",
                lines.join("\n")
            ))
        },
    )?;

    let mut after = loaded_states;
    let mut committed = Vec::new();
    for update in &report.state_updates {
        let entries = update.scope.entries();
        committed.push(input::scope_entries(
            &update.plugin_set,
            &update.plugin,
            entries,
        ));
        let key = (update.plugin_set.clone(), update.plugin.clone());
        if entries.is_empty() {
            after.remove(&key);
        } else {
            after.insert(key, entries.clone());
        }
    }
    let state_written = match (&args.state, args.write_state) {
        (Some(dir), true) => Some(input::write_states(dir, &after)?.display().to_string()),
        _ => None,
    };
    let status = Status::of(&report);
    Ok(Evaluated {
        snapshot,
        snapshot_source: input::shown(&args.snapshot),
        modules,
        spec,
        profile_warnings: outcome.parsed.warnings,
        report,
        committed,
        state_written,
        status,
    })
}

/// The server's engine with its default limits: uploads compiled in a child process (this
/// binary, `compile-module`) within the default compile memory and deadline; compiled code kept
/// on disk only in `cache_dir` (`--cache-dir`).
fn start_engine(cache_dir: Option<PathBuf>) -> Result<Engine, EvalError> {
    let program = std::env::current_exe()
        .map_err(|e| EvalError::Internal(format!("the path of this binary is unknown: {e}")))?;
    Engine::new(EngineConfig {
        limits: SandboxLimits::default(),
        compile: CompileSettings {
            isolation: Isolation::Subprocess { program },
            cache_dir,
            ..CompileSettings::default()
        },
    })
    .map_err(|e| EvalError::Internal(format!("starting the policy engine: {e}")))
}

/// POLICY.wasm, checked and compiled as an upload is.
fn load_file(engine: &Engine, path: &Path) -> Result<LoadedModule, EvalError> {
    let wasm =
        std::fs::read(path).map_err(|e| EvalError::input(path, format!("cannot read it: {e}")))?;
    let started = Instant::now();
    let loaded_before = engine.compile_stats().loaded;
    let policy = engine.compile(&wasm).map_err(|e| match e {
        EngineError::Internal(m) => EvalError::Internal(m),
        refused => EvalError::input(path, format!("refused ({}): {refused}", refused.code())),
    })?;
    if builtin_names().contains(&policy.meta.name) {
        eprintln!(
            "note: {} is named {}, like a built-in: this eval runs it in the built-in's place (the \
             server refuses such an upload)",
            input::shown(path),
            policy.meta.name
        );
    }
    Ok(LoadedModule {
        policy,
        path: Some(input::shown(path)),
        load_ms: crate::ingest::ms(started),
        cached: engine.compile_stats().loaded > loaded_before,
    })
}

/// The built-ins' plugin names, from their crates' file stems (`pod_life_time` →
/// `PodLifeTime`); [`load_builtin`] checks that the module agrees.
pub fn builtin_names() -> Vec<String> {
    rebalancer_builtins::modules()
        .iter()
        .map(|(stem, _)| plugin_name(stem))
        .collect()
}

fn plugin_name(stem: &str) -> String {
    stem.split(['_', '-'])
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Compile the built-in named `name`, if there is one.
fn load_builtin(engine: &Engine, name: &str) -> Result<Option<LoadedModule>, EvalError> {
    let Some((stem, wasm)) = rebalancer_builtins::modules()
        .iter()
        .find(|(stem, _)| plugin_name(stem) == name)
    else {
        return Ok(None);
    };
    let started = Instant::now();
    let loaded_before = engine.compile_stats().loaded;
    let policy = engine.compile_builtin(wasm).map_err(|e| {
        EvalError::Internal(format!("compiling the built-in policy module {stem}: {e}"))
    })?;
    if policy.meta.name != name {
        return Err(EvalError::Internal(format!(
            "the built-in module {stem} reports the name {}, not {name}",
            policy.meta.name
        )));
    }
    Ok(Some(LoadedModule {
        policy,
        path: None,
        load_ms: crate::ingest::ms(started),
        cached: engine.compile_stats().loaded > loaded_before,
    }))
}

/// Compile the built-ins `spec` enables that are not registered yet; a plugin that is neither
/// registered nor a built-in is returned as a problem at its `enabled` entry.
fn load_profile_builtins(
    engine: &Engine,
    registry: &PolicyRegistry,
    spec: &ProfileSpec,
    doc: &Value,
    modules: &mut Vec<LoadedModule>,
) -> Result<Vec<ProfileError>, EvalError> {
    let mut unknown = Vec::new();
    for (set_index, set) in spec.plugin_sets.iter().enumerate() {
        for (point, plugins) in [("deschedule", &set.deschedule), ("balance", &set.balance)] {
            for (index, plugin) in plugins.iter().enumerate() {
                if registry.get(&plugin.name).is_some() {
                    continue;
                }
                match load_builtin(engine, &plugin.name)? {
                    Some(module) => {
                        registry.insert(module.policy.clone(), true);
                        modules.push(module);
                    }
                    None => unknown.push(ProfileError::new(
                        format!(
                            "profiles[{set_index}].plugins.{}.enabled[{index}]",
                            profile::extension_point_key(doc, set_index, point)
                        ),
                        format!(
                            "unknown plugin \"{}\": neither a built-in ({}) nor the module given \
                             ({})",
                            plugin.name,
                            builtin_names().join(", "),
                            modules
                                .iter()
                                .find(|m| m.path.is_some())
                                .map_or("none".to_string(), |m| m.policy.meta.name.clone())
                        ),
                    )),
                }
            }
        }
    }
    Ok(unknown)
}

fn point_name(point: EvalExtensionPoint) -> &'static str {
    match point {
        EvalExtensionPoint::Deschedule => "deschedule",
        EvalExtensionPoint::Balance => "balance",
    }
}

/// The plugin set of a single-policy eval.
pub const SINGLE_PLUGIN_SET: &str = "default";

/// A DeschedulerPolicy enabling only `name` at `points`, with `args` when given.
fn single_plugin_document(name: &str, points: &[&str], args: Option<Value>) -> Value {
    let mut config = json!({ "name": name });
    if let Some(args) = args {
        config["args"] = args;
    }
    let plugins: serde_json::Map<String, Value> = points
        .iter()
        .map(|p| (p.to_string(), json!({ "enabled": [name] })))
        .collect();
    json!({
        "apiVersion": profile::API_VERSION,
        "kind": profile::KIND,
        "profiles": [{
            "name": SINGLE_PLUGIN_SET,
            "pluginConfig": [config],
            "plugins": plugins,
        }]
    })
}

/// A problem of the generated one-plugin document, said of what the user gave: the args file
/// (`FILE: field: message`) or the flags.
fn locate_single(e: ProfileError, args_file: Option<&str>) -> String {
    const ARGS: &str = "profiles[0].pluginConfig[0].args";
    let in_args = e
        .field
        .strip_prefix(ARGS)
        .map(|rest| rest.strip_prefix('.').unwrap_or(rest));
    match (in_args, args_file) {
        (Some(""), Some(file)) => format!("{file}: {}", e.message),
        (Some(field), Some(file)) => format!("{file}: {field}: {}", e.message),
        (Some(""), None) => format!("the policy's default args: {}", e.message),
        (Some(field), None) => format!("the policy's default args: {field}: {}", e.message),
        (None, _) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_come_from_crate_stems() {
        assert_eq!(plugin_name("pod_life_time"), "PodLifeTime");
        assert_eq!(
            plugin_name("remove_pods_violating_inter_pod_anti_affinity"),
            "RemovePodsViolatingInterPodAntiAffinity"
        );
        assert!(builtin_names().contains(&"LowNodeUtilization".to_string()));
    }

    #[test]
    fn single_plugin_problems_are_said_of_the_args_file() {
        let e = |field: &str| ProfileError::new(field, "must be > 0");
        assert_eq!(
            locate_single(
                e("profiles[0].pluginConfig[0].args.maxAgeSeconds"),
                Some("a.json")
            ),
            "a.json: maxAgeSeconds: must be > 0"
        );
        assert_eq!(
            locate_single(e("profiles[0].pluginConfig[0].args"), Some("a.json")),
            "a.json: must be > 0"
        );
        assert_eq!(
            locate_single(e("profiles[0].pluginConfig[0].args.x"), None),
            "the policy's default args: x: must be > 0"
        );
        assert_eq!(
            locate_single(e("nodeSelector"), None),
            "nodeSelector: must be > 0"
        );
    }

    #[test]
    fn the_one_plugin_document_is_a_valid_deschedulerpolicy() {
        let doc = single_plugin_document(
            "PodLifeTime",
            &["deschedule"],
            Some(json!({"maxPodLifeTimeSeconds": 60})),
        );
        let spec = profile::parse_deschedule_policy(&doc).unwrap();
        assert_eq!(spec.plugin_sets.len(), 1);
        let set = &spec.plugin_sets[0];
        assert_eq!(set.name, SINGLE_PLUGIN_SET);
        assert_eq!(set.evictor_args, json!({}));
        assert_eq!(set.deschedule[0].args, json!({"maxPodLifeTimeSeconds": 60}));
        assert!(set.balance.is_empty());
    }
}
