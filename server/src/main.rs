//! The `rebalancer` binary: parse the command line, set up telemetry, run. Everything else is
//! in the library (`rebalancer_server`).

use anyhow::Context as _;
use clap::Parser as _;
use rebalancer_server::config::{Cli, Command, Settings};
use rebalancer_server::{app, telemetry};

fn main() -> anyhow::Result<std::process::ExitCode> {
    // The server compiles uploaded modules by running itself as `rebalancer compile-module`
    // (hidden: not a command for people), bounded in memory and time.
    let mut args = std::env::args_os();
    if args
        .nth(1)
        .is_some_and(|a| a == rebalancer_engine::CHILD_SUBCOMMAND)
    {
        let child = rebalancer_engine::ChildArgs::parse(args).map_err(anyhow::Error::msg)?;
        return Ok(rebalancer_engine::child_main(child));
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `rebalancer eval` exits 2 when a policy failed: its usage errors are bad input (3).
        Err(e) if e.use_stderr() && is_eval() => {
            let _ = e.print();
            return Ok(std::process::ExitCode::from(
                rebalancer_server::eval::Status::BadInput.code(),
            ));
        }
        Err(e) => e.exit(),
    };
    match cli.into_command() {
        Command::Serve(args) => {
            let settings = Settings::try_from(args)?;
            telemetry::init(settings.log_format);
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?
                .block_on(app::run(settings))?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Eval(args) => Ok(rebalancer_server::eval::main(args)),
        Command::NewPolicy(args) => match rebalancer_server::new_policy::create(&args) {
            Ok(created) => {
                use std::io::Write as _;
                std::io::stdout()
                    .write_all(created.next_steps().as_bytes())
                    .context("writing to stdout")?;
                Ok(std::process::ExitCode::SUCCESS)
            }
            Err(message) => {
                eprintln!("rebalancer new-policy: {message}");
                Ok(std::process::ExitCode::from(2))
            }
        },
    }
}

/// The command line names the `eval` subcommand.
fn is_eval() -> bool {
    std::env::args_os().nth(1).is_some_and(|a| a == "eval")
}
