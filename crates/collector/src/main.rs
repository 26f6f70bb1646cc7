//! The `collector` binary: see `collector --help`.

use std::{
    io::{IsTerminal as _, stderr, stdout},
    process::ExitCode,
};

use clap::Parser as _;
use collector::{
    cli::{Args, LogFormat},
    command::{Cli, Command},
    logs,
};
// `try_init` also forwards the `log` records of dependencies, as `fmt().init()` did.
use tracing_subscriber::{fmt::MakeWriter, util::SubscriberInitExt as _};

/// The exit code of a check that could not start (flags, control plane); clap's for usage
/// errors too.
const CHECK_START_FAILED: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => collect(cli.args).await,
        Some(Command::Check(check)) => {
            // The report goes to stdout; logs go to stderr, and only warnings by default.
            init_logs(&check.args, "warn", stderr, stderr().is_terminal());
            match collector::check::run(check).await {
                Ok(outcome) => {
                    print!("{}", outcome.rendered);
                    ExitCode::from(outcome.exit_code)
                }
                Err(err) => {
                    tracing::error!(error = format!("{err:#}"), "collector check could not run");
                    eprintln!("collector check: {err:#}");
                    ExitCode::from(CHECK_START_FAILED)
                }
            }
        }
    }
}

/// Logs to `writer`, in colour only if `terminal` says it is one and the flags allow it.
fn init_logs<W>(args: &Args, default: &str, writer: W, terminal: bool)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let ansi = args.log_format == LogFormat::Text
        && args
            .color
            .enabled(terminal, std::env::var_os("NO_COLOR").as_deref());
    if let Err(err) = logs::subscriber(args.log_format, ansi, default, writer).try_init() {
        eprintln!("collector: logs: {err}");
    }
}

async fn collect(args: collector::cli::Args) -> ExitCode {
    init_logs(&args, "info", stdout, stdout().is_terminal());
    // SIGTERM is what kubelet sends; SIGINT is Ctrl-C.
    let shutdown = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        tracing::info!("shutting down");
    };
    match collector::app::run(args, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "collector stopped");
            ExitCode::FAILURE
        }
    }
}
