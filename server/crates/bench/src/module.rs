//! `rebalancer-bench compile`: what a policy module costs before its first run — its size, the
//! first compile (validation, Cranelift, the artifact written to the disk cache, `info` read
//! back) and the load of that artifact from the disk cache, which is what a restarted server
//! does instead of compiling again. Medians of `--rounds` rounds, each with a fresh cache.
//!
//! Owns the command. It drives the engine as the server does (`Engine::compile`, a compile
//! child process of the `rebalancer` binary with the server's default bounds when `--compiler`
//! names it), with no HTTP or store in between.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, ensure};
use rebalancer_engine::{CompileSettings, Engine, EngineConfig, Isolation, SandboxLimits};
use serde::Serialize;

use crate::bench::{Stats, TempDir, ms, write_report};

#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The component to measure (e.g. the Python example policy's,
    /// `policies-wasm/example-python/build.sh`).
    pub module: PathBuf,
    /// The `rebalancer` binary: compile in its `compile-module` child process with the server's
    /// default memory and time bounds, as the server does. Without it, compile in this process.
    #[arg(long, value_name = "PATH")]
    pub compiler: Option<PathBuf>,
    /// Rounds (medians are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompileReport {
    pub module: String,
    pub build: &'static str,
    pub policy: String,
    pub abi_version: String,
    pub size_bytes: u64,
    /// `subprocess` or `in-process`.
    pub isolation: &'static str,
    /// Size of the compiled artifact in the disk cache.
    pub artifact_bytes: u64,
    pub first_compile_ms: Stats,
    pub cached_load_ms: Stats,
}

pub fn run(args: CompileArgs) -> anyhow::Result<()> {
    let wasm = std::fs::read(&args.module)
        .with_context(|| format!("reading {}", args.module.display()))?;
    let isolation = match &args.compiler {
        Some(program) => Isolation::Subprocess {
            program: program.clone(),
        },
        None => Isolation::InProcess,
    };
    let (mut compiles, mut loads) = (Vec::new(), Vec::new());
    let mut meta = None;
    let mut artifact_bytes = 0;
    for _ in 0..args.rounds {
        let cache = TempDir::new()?;
        let engine = |dir: &std::path::Path| {
            Engine::new(EngineConfig {
                limits: SandboxLimits::default(),
                compile: CompileSettings {
                    isolation: isolation.clone(),
                    cache_dir: Some(dir.to_path_buf()),
                    ..CompileSettings::default()
                },
            })
        };
        let first = engine(&cache.path)?;
        let started = Instant::now();
        let compiled = first.compile(&wasm)?;
        compiles.push(ms(started));
        ensure!(
            first.compile_stats().compiled == 1,
            "the module was not compiled"
        );
        drop(first);
        artifact_bytes = std::fs::read_dir(&cache.path)?
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum();

        let restarted = engine(&cache.path)?;
        let started = Instant::now();
        restarted.compile(&wasm)?;
        loads.push(ms(started));
        ensure!(
            restarted.compile_stats().loaded == 1,
            "the artifact was not loaded from the disk cache"
        );
        meta = Some(compiled.meta.clone());
    }
    let meta = meta.context("no round ran")?;
    let report = CompileReport {
        module: args.module.display().to_string(),
        build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        policy: meta.name,
        abi_version: meta.abi_version,
        size_bytes: meta.size_bytes,
        isolation: match isolation {
            Isolation::Subprocess { .. } => "subprocess",
            Isolation::InProcess => "in-process",
        },
        artifact_bytes,
        first_compile_ms: Stats::of(&compiles),
        cached_load_ms: Stats::of(&loads),
    };
    write_report(args.json, &report, |out, r| {
        use std::io::Write as _;
        let mb = |b: u64| b as f64 / 1e6;
        writeln!(out, "rebalancer bench compile ({} build)", r.build)?;
        writeln!(
            out,
            "module:        {} — {} (ABI {}), {:.1} MB",
            r.module,
            r.policy,
            r.abi_version,
            mb(r.size_bytes)
        )?;
        writeln!(
            out,
            "first compile: {:.0} ms median ({:.0}–{:.0}, {} rounds, {}), artifact {:.1} MB",
            r.first_compile_ms.median,
            r.first_compile_ms.min,
            r.first_compile_ms.max,
            compiles.len(),
            r.isolation,
            mb(r.artifact_bytes)
        )?;
        writeln!(
            out,
            "cached load:   {:.1} ms median ({:.1}–{:.1})",
            r.cached_load_ms.median, r.cached_load_ms.min, r.cached_load_ms.max
        )
    })
}
