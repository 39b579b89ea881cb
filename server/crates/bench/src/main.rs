//! # `rebalancer-bench`
//!
//! The benchmark binary: measures Rebalancer on large clusters, outside the server binary so the
//! server never links policies natively and an edit to the benchmark rebuilds only this crate.
//!
//! # Layout
//! - [`bench`] (`run`): the real server in-process on `127.0.0.1:0`, a snapshot pushed over HTTP,
//!   runs through the API, and each built-in policy also run natively ([`native`]) for the
//!   wasm/native ratio.
//! - [`kube`] (`kube`): the Kubernetes backend against the fake API server (a child process):
//!   initial sync, RSS, pod updates → revision, live runs against pushed ones.
//! - [`ingest`] (`ingest`): parse + snapshot build of a cluster file in-process, no server.
//! - [`state`] (`state`): load and commit a policy state scope through the real store.
//! - [`module`] (`compile`): a module's size, first compile and load from the disk cache.
//! - [`soak`] (`soak`): weeks of a periodic schedule with a compressed clock, pruned by the
//!   server's retention rules: the database and WAL sizes day by day.
//! - `generate` (in this file): writes a reference cluster (`small`, `medium`, `large`) to
//!   `DIR/<size>.json`, byte for byte what the Python generator `gen_large.py` writes
//!   ([`rebalancer_sim::reference`]).

mod bench;
mod ingest;
mod kube;
mod module;
mod native;
mod soak;
mod state;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use clap::Parser;
use rebalancer_sim::reference::{self, Size};

#[derive(Debug, Parser)]
#[command(name = "rebalancer-bench", version, about)]
enum Cli {
    /// Ingest a cluster and run a profile through the API, wasm against native.
    Run(bench::BenchArgs),
    /// The Kubernetes backend against the fake API server: initial sync, RSS, updates →
    /// revision, runs on the live cluster against the same file pushed.
    Kube(kube::KubeArgs),
    /// Load and commit a policy state scope through the real store.
    State(state::StateArgs),
    /// A policy module's size, first compile and load from the compiled-code disk cache.
    Compile(module::CompileArgs),
    /// Weeks of a periodic schedule with a compressed clock, pruned by the server's retention
    /// rules: the database and WAL sizes day by day.
    Soak(soak::SoakArgs),
    /// Parse a cluster file and build its snapshot in-process, without the server.
    Ingest {
        /// A scenario file `{"policy": …, "objects": List}` or a kubectl `List`.
        file: PathBuf,
    },
    /// Write a reference cluster to `DIR/<size>.json`: `{"policy": …, "objects": List}`.
    Generate {
        /// `small` (500 nodes, 15,000 pods), `medium` (2,000 / 60,000) or `large` (5,000 /
        /// 150,000, ~420 MB).
        size: Size,
        /// Directory to write into (created when missing).
        dir: PathBuf,
        /// Add the Koordinator layer (a NodeMetric and a NodeResourceTopology per node, cpuset
        /// pods, a LowNodeLoad + CpuOrchestration profile) and write `DIR/<size>-koordinator.json`.
        #[arg(long)]
        koordinator: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse() {
        Cli::Run(args) => bench::run(args),
        Cli::Kube(args) => kube::run(args),
        Cli::State(args) => state::run(args),
        Cli::Compile(args) => module::run(args),
        Cli::Soak(args) => soak::run(args),
        Cli::Ingest { file } => ingest::run(&file),
        Cli::Generate {
            size,
            dir,
            koordinator,
        } => generate(size, koordinator, &dir),
    }
}

/// Write `size`'s reference cluster to `dir/<size>.json`, through a temporary file renamed into
/// place, so an interrupted run never leaves a truncated cluster behind.
fn generate(size: Size, koordinator: bool, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let stem = if koordinator {
        format!("{}-koordinator", size.name())
    } else {
        size.name().to_owned()
    };
    let path = dir.join(format!("{stem}.json"));
    let partial = dir.join(format!(".{stem}.json.partial"));
    let started = Instant::now();
    let mut file = std::fs::File::create(&partial)
        .with_context(|| format!("creating {}", partial.display()))?;
    let written = if koordinator {
        reference::write_koordinator_scenario(size, &mut file)
    } else {
        reference::write_scenario(size, &mut file)
    };
    written
        .and_then(|()| file.flush())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("renaming to {}", path.display()))?;
    let bytes = std::fs::metadata(&path)?.len();
    eprintln!(
        "{}: {} nodes, {} pods, {:.1} MB in {:.1} s",
        path.display(),
        size.nodes(),
        size.pods(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
