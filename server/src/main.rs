//! The `rebalancer` binary: parse the command line, set up telemetry, run. Everything else is
//! in the library (`rebalancer_server`).

use anyhow::Context as _;
use clap::Parser as _;
use rebalancer_server::config::{Cli, Command, Settings};
use rebalancer_server::{app, telemetry};

fn main() -> anyhow::Result<()> {
    match Cli::parse().into_command() {
        Command::Serve(args) => {
            let settings = Settings::try_from(args)?;
            telemetry::init(settings.log_format);
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?
                .block_on(app::run(settings))
        }
    }
}
