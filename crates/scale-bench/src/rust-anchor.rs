//! `rust-anchor`: one of the scale bench's baseline processes (see
//! `scale_bench::baselines::rust_anchor`). The bench starts it; it is not meant to be run by
//! hand.

use std::path::PathBuf;

use clap::Parser;
use scale_bench::baselines::{
    fleet_file::FleetFile,
    rust_anchor::{self, RustSystem},
};

/// Runs a Rust member client on every member of a fleet file, reporting JSON lines on stdout.
#[derive(Debug, Parser)]
struct Args {
    /// Which client.
    #[arg(long, value_enum)]
    system: RustSystem,
    /// The fleet file the bench wrote.
    #[arg(long)]
    fleet: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn,kube_client=off"))
        .with_writer(std::io::stderr)
        .init();
    let fleet = FleetFile::read(&args.fleet)?;
    tokio::select! {
        result = rust_anchor::run(args.system, fleet) => result,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}
