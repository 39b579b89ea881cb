//! # `rebalancer-bench`
//!
//! The benchmark binary: measures Rebalancer on large clusters, outside the server binary so the
//! server never links policies natively and an edit to the benchmark rebuilds only this crate.
//!
//! # Layout
//! - [`bench`] (`run`): the real server in-process on `127.0.0.1:0`, a snapshot pushed over HTTP,
//!   runs through the API, and each built-in policy also run natively ([`native`]) for the
//!   wasm/native ratio.
//! - [`ingest`] (`ingest`): parse + snapshot build of a cluster file in-process, no server.
//! - `generate`: writes a generated cluster to a file ([`rebalancer_sim`]).

mod bench;
mod ingest;
mod native;

use std::path::PathBuf;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "rebalancer-bench", version, about)]
enum Cli {
    /// Ingest a cluster and run a profile through the API, wasm against native.
    Run(bench::BenchArgs),
    /// Parse a cluster file and build its snapshot in-process, without the server.
    Ingest {
        /// A scenario file `{"policy": …, "objects": List}` or a kubectl `List`.
        file: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse() {
        Cli::Run(args) => bench::run(args),
        Cli::Ingest { file } => ingest::run(&file),
    }
}
