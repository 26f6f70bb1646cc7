//! `tether-credential`: a KEP-541 exec credential plugin that hands a ClusterProfile consumer
//! the credential of a Tether member, read from its control-plane Secret with the caller's own
//! identity. See `tether-credential --help`.
//!
//! It serves one request and exits, so it runs on a current-thread runtime: client-go runs it
//! on the path of a request, and a thread pool would only add to its start-up.
//!
//! The binary is this library's [`main`]; [`command`] is its command line, from which the
//! book's CLI reference is generated.

mod cli;
mod duration;
mod error;
mod exec_info;
mod expiry;
mod run;
mod secret_fetch;
mod served_secret;

use std::{io::Write as _, process::ExitCode};

use clap::{CommandFactory as _, Parser as _};
use secrecy::ExposeSecret as _;

use crate::error::Error;

/// Runs `tether-credential` on the process's arguments and environment.
pub fn main() -> ExitCode {
    let args = cli::Args::parse();
    // Not UTF-8 cannot be JSON: the lossy text then fails to parse, and says so.
    let exec_info = std::env::var_os(member_client::exec::wire::EXEC_INFO_ENV)
        .map(|v| v.to_string_lossy().into_owned());
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Output)
        .and_then(|runtime| runtime.block_on(run::run(&args, exec_info.as_deref())));
    // Printed only once it is whole, so a failure leaves stdout empty.
    let printed = answer.and_then(|json| {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(json.expose_secret())
            .and_then(|()| stdout.flush())
            .map_err(Error::Output)
    });
    match printed {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("tether-credential: {}", err.one_line());
            ExitCode::FAILURE
        }
    }
}

/// The command line `tether-credential` parses.
pub fn command() -> clap::Command {
    cli::Args::command()
}
