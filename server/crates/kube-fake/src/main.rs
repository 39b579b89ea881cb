//! `rebalancer-kube-fake --list FILE [--port N] [--groups metrics,nodemetric,...]`: loads a
//! kubectl List (or a scenario file wrapping one in `objects`) into a fake API server, prints
//! the server's URL on stdout and serves until killed (SIGINT or SIGTERM).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rebalancer_kube_fake::{FakeApiServer, OptionalGroup};

#[derive(Parser)]
#[command(about = "Serve a kubectl List as a fake Kubernetes API server on 127.0.0.1")]
struct Args {
    /// The kubectl List (JSON) to serve.
    #[arg(long)]
    list: PathBuf,
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Optional API groups to serve: metrics, nodemetric, noderesourcetopology, reservation.
    #[arg(long, value_delimiter = ',')]
    groups: Vec<OptionalGroup>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let list =
        std::fs::read(&args.list).with_context(|| format!("reading {}", args.list.display()))?;
    let server = FakeApiServer::bind(SocketAddr::from(([127, 0, 0, 1], args.port)), &args.groups)
        .await
        .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
    let started = Instant::now();
    let loaded = server
        .try_load_list(&list)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("loading {}", args.list.display()))?;
    drop(list);
    eprintln!(
        "loaded {loaded} objects from {} in {:.2?}",
        args.list.display(),
        started.elapsed()
    );
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", server.url()).context("writing the URL")?;
    stdout.flush().context("writing the URL")?;
    drop(stdout);

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    server.shutdown().await;
    Ok(())
}
