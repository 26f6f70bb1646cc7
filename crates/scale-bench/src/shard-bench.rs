//! `shard-bench`: the sharded mode of `hack/bench.sh` (`hack/bench.sh --sharded`). Several
//! collector replicas with `--shards auto` over one fleet on real kube-apiservers; see
//! [`scale_bench::sharded`].

use std::time::Duration;

use clap::Parser;
use scale_bench::{
    scale::{FleetArgs, fleet::Fleet},
    sharded::{self, ShardedOptions},
};

/// Tether's collector sharded over several replicas.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    fleet: FleetArgs,
    /// Replicas at the start; one is SIGKILLed, then one added.
    #[arg(long, default_value_t = 4)]
    replicas: usize,
    /// `--shard-lease-seconds` of every replica.
    #[arg(long, default_value_t = 15)]
    lease_seconds: u64,
    /// `--probe-period`, seconds.
    #[arg(long, default_value_t = 10)]
    probe_period: u64,
    /// Steady-state window, seconds.
    #[arg(long, default_value_t = 20)]
    window: u64,
    /// Seconds any step may take.
    #[arg(long, default_value_t = 300)]
    limit: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "warn,kube_runtime=error,kube_client=off",
        ))
        .with_writer(std::io::stderr)
        .init();
    let bin = testkit::locate_collector()?;
    eprintln!(
        "shard-bench: {} members on {} apiservers",
        args.fleet.members, args.fleet.apiservers
    );
    let size = args.fleet;
    let mut fleet = Fleet::start(size.members, size.apiservers, size.concurrency).await?;
    eprintln!(
        "shard-bench: fleet ready in {:?}; starting {} replicas",
        fleet.setup, args.replicas
    );
    let options = ShardedOptions {
        replicas: args.replicas,
        lease_seconds: args.lease_seconds,
        probe_period: Duration::from_secs(args.probe_period),
        limit: Duration::from_secs(args.limit),
        window: Duration::from_secs(args.window),
    };
    let report = sharded::run(&mut fleet, &bin, &options).await?;
    println!();
    sharded::print(&report);
    Ok(())
}
