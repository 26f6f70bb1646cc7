//! `scale-bench`: Tether's collector with 1,000 members on real kube-apiservers, a mass
//! rotation, other systems' member clients (client-go as Karmada and Argo CD wire it, kube-rs)
//! beside Tether's on a subset of the same members, the CredentialLayer's per-request cost, and
//! the collector's connections per member over HTTP/2 and HTTP/1.1, and its start with streaming
//! lists and with paged ones, printed as one table. Run it through `hack/bench.sh`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use scale_bench::{
    baselines::{self, BaselineOptions, Programs},
    credential_kinds, overhead,
    scale::{
        FleetArgs,
        fleet::Fleet,
        initial_lists,
        run::{self, PhaseOptions},
    },
    sections,
    table::{self, Section},
};

/// Tether at scale, against anchors in the same run.
#[derive(Debug, Parser)]
struct Args {
    /// The fleet (`--members 0`: only the in-process measurements, sections 4 and 5).
    #[command(flatten)]
    fleet: FleetArgs,
    /// The collector's probe period, seconds.
    #[arg(long, default_value_t = 10)]
    probe_period: u64,
    /// Seconds to wait after all are Ready before the steady-state window.
    #[arg(long, default_value_t = 15)]
    settle: u64,
    /// Steady-state window, seconds.
    #[arg(long, default_value_t = 30)]
    window: u64,
    /// Seconds to wait for all Ready before reporting what there is.
    #[arg(long, default_value_t = 180)]
    ready_limit: u64,
    /// Members of the anchors' subset (0: no anchors). Each of the six systems runs them all,
    /// as a process of its own.
    #[arg(long, default_value_t = 50)]
    baseline_members: usize,
    /// Request period of each baseline client, seconds.
    #[arg(long, default_value_t = 1)]
    baseline_probe_period: u64,
    /// The anchors' steady-state window for Secret reads, seconds. Karmada >= 1.19 reads a
    /// member's Secret once per 5-minute refresh period, so a shorter window may see none of
    /// its reads: 330 shows them.
    #[arg(long, default_value_t = 10)]
    baseline_window: u64,
    /// Seconds after the forced reconnect at which blind members are counted.
    #[arg(long, default_value_t = 60)]
    blind_after: u64,
    /// Rounds of the CredentialLayer A/B (0: skip).
    #[arg(long, default_value_t = 61)]
    overhead_rounds: usize,
    /// GETs per client per round (times in-flight / 4 above 4 in flight).
    #[arg(long, default_value_t = 300)]
    overhead_batch: usize,
    /// Requests in flight in the CredentialLayer A/B, one run per level.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16, 64])]
    overhead_concurrency: Vec<usize>,
    /// Concurrent misses on an exec plugin in the single-flight case (0: skip).
    #[arg(long, default_value_t = 1000)]
    exec_misses: usize,
    /// After the mass rotation, run a second collector on the same fleet with
    /// `--member-http2=false`, for section 6's HTTP/1.1 column (false: skip it; the first
    /// collector's connections are counted either way).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    http1_collector: bool,
    /// Then start a collector this many times with streaming lists and as many with
    /// `--member-streaming-lists=false`, taking turns, for section 7 (0: skip).
    #[arg(long, default_value_t = 2)]
    initial_list_rounds: usize,
}

fn progress(started: Instant, what: &str) {
    eprintln!(
        "scale-bench [{:>6.1} s] {what}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,kube_runtime=error,kube_client=off")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let started = Instant::now();
    let bin = testkit::locate_collector()?;
    progress(started, &format!("collector binary: {}", bin.display()));

    // 4. first: an idle machine for the microbenchmark.
    let (mut overhead, mut certificate) = (Vec::new(), None);
    if args.overhead_rounds > 0 {
        for &concurrency in &args.overhead_concurrency {
            progress(
                started,
                &format!("CredentialLayer vs static token, in process, {concurrency} in flight"),
            );
            // Enough waves per batch that ramp-up and drain do not dominate a round.
            let batch = args.overhead_batch * (concurrency / 4).max(1);
            overhead.push(overhead::measure(args.overhead_rounds, batch, concurrency).await?);
        }
        progress(
            started,
            "client certificate from the cache vs baked in, in process",
        );
        let rounds = args.overhead_rounds;
        certificate =
            Some(credential_kinds::certificate_overhead(rounds, args.overhead_batch).await?);
    }
    let exec = if args.exec_misses > 0 {
        progress(
            started,
            &format!("{} concurrent misses on an exec plugin", args.exec_misses),
        );
        Some(credential_kinds::exec_single_flight(args.exec_misses).await?)
    } else {
        None
    };

    let (mut sections, later, footer) = if args.fleet.members > 0 {
        fleet_phases(&args, &bin, started).await?
    } else {
        (Vec::new(), Vec::new(), String::new())
    };
    progress(started, "done");
    if !overhead.is_empty() {
        sections.push(sections::overhead(&overhead));
    }
    if certificate.is_some() || exec.is_some() {
        sections.push(sections::credential_kinds(
            certificate.as_ref(),
            exec.as_ref(),
        ));
    }
    sections.extend(later);
    println!();
    println!(
        "Tether scale bench: {} members on {} member apiservers (+ control plane), {} cores, {}",
        args.fleet.members,
        args.fleet.apiservers,
        std::thread::available_parallelism().map_or(0, usize::from),
        table::duration(started.elapsed())
    );
    println!();
    print!("{}", table::render(&sections));
    println!();
    print!("{footer}");
    Ok(())
}

/// Sections 1 to 3, 6 and 7: the fleet on real apiservers, the collector, the mass rotation,
/// the HTTP/1.1 collector, the starts with and without streaming lists, the anchors; and the
/// lines printed under the table.
async fn fleet_phases(
    args: &Args,
    bin: &std::path::Path,
    started: Instant,
) -> anyhow::Result<(Vec<Section>, Vec<Section>, String)> {
    progress(
        started,
        &format!(
            "starting {} apiservers and {} members",
            args.fleet.apiservers + 1,
            args.fleet.members
        ),
    );
    let size = args.fleet;
    let mut fleet = Fleet::start(size.members, size.apiservers, size.concurrency).await?;
    progress(started, &format!("members registered in {:?}", fleet.setup));
    let options = PhaseOptions {
        probe_period: Duration::from_secs(args.probe_period),
        ready_limit: Duration::from_secs(args.ready_limit),
        settle: Duration::from_secs(args.settle),
        window: Duration::from_secs(args.window),
        rotation_limit: Duration::from_secs(120),
    };
    progress(
        started,
        "collector: start until all Ready, then steady state",
    );
    let (running, scale) = run::scale(&fleet, bin, &options).await?;
    progress(started, "mass rotation");
    let rotation = run::rotate_all(&mut fleet, &running, &options).await?;
    let by_kind: Vec<String> = (scale.requests_by_kind.iter().take(8))
        .map(|(kind, rate)| format!("{kind} {rate:.1}/s"))
        .collect();
    let mut footer = format!(
        "steady-state requests to the member apiservers by kind: {}\n",
        by_kind.join(", ")
    );
    let warnings = running.log.warnings();
    if !warnings.is_empty() {
        footer += &format!("collector warnings: {warnings:?}\n");
    }
    footer += &format!("collector logs: {}\n", running.collector.log_dir.display());
    drop(running);

    let http1 = if args.http1_collector {
        progress(
            started,
            "second collector, --member-http2=false (the first stopped)",
        );
        let (report, log_dir) = run::without_http2(&fleet, bin, &options).await?;
        footer += &format!(
            "collector logs (--member-http2=false): {}\n",
            log_dir.display()
        );
        Some(report)
    } else {
        None
    };
    footer += &sections::connection_counts(&scale.connections, http1.as_ref());
    let mut later = vec![sections::connections(
        &scale.connections,
        &rotation.connections,
        http1.as_ref(),
    )];
    if args.initial_list_rounds > 0 {
        progress(
            started,
            "collector starts, streaming lists and paged lists by turns",
        );
        let limit = Duration::from_secs(args.ready_limit);
        let probe_period = Duration::from_secs(args.probe_period);
        let report =
            initial_lists::compare(&fleet, bin, probe_period, limit, args.initial_list_rounds)
                .await?;
        later.push(sections::initial_lists(&report, fleet.members.len()));
    }

    let mut sections = vec![sections::scale(&scale), sections::rotation(&rotation)];
    if args.baseline_members > 0 {
        progress(started, "anchors (collector stopped)");
        let options = BaselineOptions {
            members: args.baseline_members,
            probe_period: Duration::from_secs(args.baseline_probe_period),
            window: Duration::from_secs(args.baseline_window),
            blind_after: Duration::from_secs(args.blind_after),
            limit: Duration::from_secs(90),
            programs: Programs {
                rust_anchor: std::env::current_exe()?.with_file_name("rust-anchor"),
                client_go_anchor: testkit::interop::binary("client-go-anchor")?,
                karmada_anchor: testkit::interop::binary("karmada-anchor")?,
            },
        };
        let report = baselines::run(&mut fleet, &options)
            .await
            .context("running the baselines")?;
        sections.push(sections::baselines(&report, &scale));
    }
    Ok((sections, later, footer))
}
