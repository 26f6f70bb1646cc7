//! The collector phases: scale (start until every member is Ready, then a steady-state window),
//! mass rotation (every Secret rewritten at once, old ServiceAccounts deleted), and a second
//! collector with HTTP/1.1 to every member, whose connections and RSS are compared with the
//! first's.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use kube::api::GetParams;
use testkit::{CollectorProcess, metrics};

pub use super::report::{RotationReport, ScaleReport};
use super::{
    collector_log::{CollectorLog, start_collector},
    conditions::ConditionWatch,
    connections::{self, ConnectionCount, ConnectionReport},
    fleet::Fleet,
    percentiles::Percentiles,
    proc_stats::ProcSample,
};

/// Knobs of the two phases.
#[derive(Clone, Debug)]
pub struct PhaseOptions {
    /// The collector's `--probe-period`.
    pub probe_period: Duration,
    /// Give up waiting for every member to be Ready after this long.
    pub ready_limit: Duration,
    /// Wait this long after all are Ready before measuring steady state.
    pub settle: Duration,
    /// Length of the steady-state window.
    pub window: Duration,
    /// Give up on a rotation step (switch, revocation) after this long.
    pub rotation_limit: Duration,
}

/// A collector running against the fleet, and the watch on what it writes.
pub struct Running {
    /// The child process.
    pub collector: CollectorProcess,
    /// What it logs.
    pub log: CollectorLog,
    /// The `Cluster` conditions it writes.
    pub conditions: ConditionWatch,
}

/// Sums over the member apiservers' `/metrics`.
#[derive(Clone, Debug)]
pub(crate) struct ApiserverCounters {
    pub(crate) at: Instant,
    pub(crate) requests: f64,
    pub(crate) watches: f64,
    by_kind: BTreeMap<String, f64>,
}

pub(crate) async fn apiserver_counters(fleet: &Fleet) -> anyhow::Result<ApiserverCounters> {
    let mut requests = 0.0;
    let mut watches = 0.0;
    let mut by_kind = BTreeMap::new();
    for server in &fleet.apiservers {
        let request = kube::core::Request::new("").get("metrics", &GetParams::default())?;
        let answer = server.admin.request_text(request).await;
        let text = answer.context("GET /metrics of a member apiserver")?;
        for sample in metrics::Exposition::parse(&text).samples {
            if sample.name == "apiserver_request_total" {
                requests += sample.value;
                let label = |k| sample.label(k).unwrap_or_default();
                let kind = format!(
                    "{} {}{}",
                    label("verb"),
                    label("resource"),
                    label("subresource")
                );
                *by_kind.entry(kind).or_default() += sample.value;
            }
        }
        watches += metrics::sum(&text, "apiserver_longrunning_requests", r#"verb="WATCH""#);
    }
    Ok(ApiserverCounters {
        at: Instant::now(),
        requests,
        watches,
        by_kind,
    })
}

/// The collector's counters the phases look at.
#[derive(Clone, Copy, Debug)]
struct CollectorCounters {
    at: Instant,
    fetches: f64,
    relists: f64,
    unauthorized: f64,
}

async fn collector_counters(collector: &CollectorProcess) -> anyhow::Result<CollectorCounters> {
    let text = collector.metrics().await?;
    Ok(CollectorCounters {
        at: Instant::now(),
        fetches: metrics::sum(&text, "tether_token_fetches_total", r#"cache="members""#),
        relists: metrics::sum(&text, "tether_relists_total", ""),
        unauthorized: metrics::sum(&text, "tether_unauthorized_responses_total", ""),
    })
}

/// Starts the collector (`bin`) on the fleet, waits until every member is Ready (or the
/// limit), lets it settle, and measures a steady-state window; its connections to the member
/// apiservers are counted from all Ready to the end of the window
/// ([`connections::count_for`]).
///
/// # Errors
/// The collector not starting or dying, or the apiservers' metrics unreadable.
pub async fn scale(
    fleet: &Fleet,
    bin: &Path,
    options: &PhaseOptions,
) -> anyhow::Result<(Running, ScaleReport)> {
    let members = fleet.members.len();
    let before = apiserver_counters(fleet).await?.watches;
    let conditions = ConditionWatch::start(fleet.control_plane.clone());
    let (mut collector, log) =
        start_collector(bin, fleet.env.control_plane(), options.probe_period, &[]).await?;
    let started = collector.started;
    let all_ready = until_all_ready(&mut collector, options.ready_limit, async |_| {
        Ok(conditions.ready() >= members)
    })
    .await?;
    let ready_count = conditions.ready();
    let ready = Percentiles::of(
        conditions
            .first_ready()
            .values()
            .map(|at| at.saturating_duration_since(started)),
    );

    let pid = collector.pid();
    let ready_at = Instant::now();
    let mut counts = connections::count_for(pid, fleet, ready_at, options.settle).await;
    let (proc0, api0, col0) = (
        ProcSample::read(collector.pid())?,
        apiserver_counters(fleet).await?,
        collector_counters(&collector).await?,
    );
    counts.extend(connections::count_for(pid, fleet, ready_at, options.window).await);
    let (proc1, api1, col1) = (
        ProcSample::read(collector.pid())?,
        apiserver_counters(fleet).await?,
        collector_counters(&collector).await?,
    );
    let seconds = |from: Instant, to: Instant| {
        (to.saturating_duration_since(from).as_secs_f64()).max(f64::EPSILON)
    };
    let api_seconds = seconds(api0.at, api1.at);
    // The first scrape of each apiserver completed inside the window: don't count it.
    let own_scrapes = fleet.apiservers.len() as f64;
    let mut requests_by_kind: Vec<(String, f64)> = api1
        .by_kind
        .iter()
        .map(|(kind, n)| {
            let delta = n - api0.by_kind.get(kind).copied().unwrap_or(0.0);
            (kind.clone(), delta / api_seconds)
        })
        .filter(|(_, rate)| *rate > 0.0)
        .collect();
    requests_by_kind.sort_by(|a, b| b.1.total_cmp(&a.1));
    let report = ScaleReport {
        members,
        apiservers: fleet.apiservers.len(),
        setup: fleet.setup,
        all_ready,
        ready_count,
        ready,
        rss_bytes: proc1.rss_bytes,
        peak_rss_bytes: proc1.peak_rss_bytes,
        cpu_cores: proc1.cores_since(&proc0),
        window: proc1.at.saturating_duration_since(proc0.at),
        settle: options.settle,
        watches: api1.watches - before,
        // Nodes plus the default mirrored kind (apps/v1 Deployments).
        watches_expected: members * 2,
        requests_per_second: (api1.requests - api0.requests - own_scrapes).max(0.0) / api_seconds,
        fetches_per_second: (col1.fetches - col0.fetches) / seconds(col0.at, col1.at),
        requests_by_kind,
        connections: ConnectionReport {
            members_per_apiserver: connections::members_per_apiserver(fleet),
            all_ready,
            counts,
            rss_bytes: proc1.rss_bytes,
            peak_rss_bytes: proc1.peak_rss_bytes,
        },
    };
    Ok((
        Running {
            collector,
            log,
            conditions,
        },
        report,
    ))
}

/// Rotates every member at once: mints a token of each member's next ServiceAccount, writes
/// all Secrets (at most `fleet.concurrency` writes in flight), deletes the old ServiceAccounts,
/// waits until every old token is rejected and one more probe period has passed, and reports.
///
/// "In use" is read from the collector's token-cache fetch counter, polled every 100 ms: after
/// a switch, a member's next request misses the cache and fetches exactly once, so the k-th
/// fetch after the start is the k-th member whose new token went out.
///
/// # Errors
/// API errors, or a step not done within `options.rotation_limit`.
pub async fn rotate_all(
    fleet: &mut Fleet,
    running: &Running,
    options: &PhaseOptions,
) -> anyhow::Result<RotationReport> {
    let generation = fleet.mint_next_generation(&fleet.members).await?;
    let f: &Fleet = fleet;
    let members = f.members.len();

    let collector = &running.collector;
    let before = collector_counters(collector).await?;
    running.log.clear_rotations();
    running.conditions.mark();
    let fetch_curve = Arc::new(Mutex::new(Vec::<(Duration, f64)>::new()));
    let start = Instant::now();
    let poller = {
        let curve = Arc::clone(&fetch_curve);
        let addr = collector.addr;
        tokio::spawn(async move {
            loop {
                if let Ok((200, text)) = testkit::http_get(addr, "/metrics").await {
                    let fetches =
                        metrics::sum(&text, "tether_token_fetches_total", r#"cache="members""#);
                    curve
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((start.elapsed(), fetches - before.fetches));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let acks = f.write_tokens(&f.members, &generation.tokens).await?;
    let writes = start.elapsed();

    // Every member's switch logged, or the limit.
    let deadline = Instant::now() + options.rotation_limit;
    while running.log.rotations().len() < members && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rotations = running.log.rotations();
    let switched = Percentiles::of(f.members.iter().zip(&acks).filter_map(|(m, ack)| {
        let at = rotations.get(&m.name)?;
        Some(at.duration_since(*ack).unwrap_or(Duration::ZERO))
    }));
    let not_switched = f
        .members
        .iter()
        .filter(|m| !rotations.contains_key(&m.name))
        .count();

    // Revoke the old credentials and wait until every apiserver rejects them.
    f.revoke(&f.members, Instant::now() + options.rotation_limit)
        .await?;
    let revoked_after = start.elapsed();
    // One more probe period: every member has sent a request since its old token died.
    tokio::time::sleep(options.probe_period + Duration::from_secs(2)).await;
    poller.abort();
    let after = collector_counters(collector).await?;
    let connections = ConnectionCount::read(collector.pid(), f, start);

    let curve = fetch_curve
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let in_use = Percentiles::from_curve(&curve, members);

    fleet.adopt(generation);
    Ok(RotationReport {
        members,
        writes,
        switched,
        in_use,
        fetches: after.fetches - before.fetches,
        relists: after.relists - before.relists,
        unauthorized: after.unauthorized - before.unauthorized,
        revoked_after,
        credentials_false: running.conditions.credentials_false_since_mark(),
        not_switched,
        connections,
    })
}

/// Starts a second collector on the fleet, the same but for `--member-http2=false` (HTTP/1.1
/// to every member), with no other collector running; waits until it has every member Ready by
/// its own `tether_member_ready` (the `Cluster`s are Ready already, from the first); then counts
/// its connections and reads its RSS over the settle time and the window of [`scale`], so that
/// the two reports compare. Also returns its log directory.
///
/// # Errors
/// The collector not starting or dying, or its metrics unreadable.
pub async fn without_http2(
    fleet: &Fleet,
    bin: &Path,
    options: &PhaseOptions,
) -> anyhow::Result<(ConnectionReport, PathBuf)> {
    let members = fleet.members.len() as f64;
    let extra = ["--member-http2=false".to_owned()];
    let control_plane = fleet.env.control_plane();
    let (mut collector, _log) =
        start_collector(bin, control_plane, options.probe_period, &extra).await?;
    let all_ready = until_own_ready(&mut collector, options.ready_limit, members).await?;
    let pid = collector.pid();
    let length = options.settle + options.window;
    let counts = connections::count_for(pid, fleet, Instant::now(), length).await;
    let proc = ProcSample::read(pid)?;
    let report = ConnectionReport {
        members_per_apiserver: connections::members_per_apiserver(fleet),
        all_ready,
        counts,
        rss_bytes: proc.rss_bytes,
        peak_rss_bytes: proc.peak_rss_bytes,
    };
    Ok((report, collector.log_dir.clone()))
}

/// [`until_all_ready`] by the collector's own view: its `tether_member_ready` counts `members`
/// (whatever the `Cluster`s' conditions say).
///
/// # Errors
/// As [`until_all_ready`], or its metrics unreadable.
pub(super) async fn until_own_ready(
    collector: &mut CollectorProcess,
    limit: Duration,
    members: f64,
) -> anyhow::Result<Option<Duration>> {
    until_all_ready(collector, limit, async |collector| {
        let text = collector.metrics().await?;
        Ok(metrics::sum(&text, "tether_member_ready", "") >= members)
    })
    .await
}

/// Asks `all_ready` every 100 ms until it answers true, and returns the time since `collector`
/// started; `None` after `limit`.
///
/// # Errors
/// The collector exiting, or `all_ready` failing.
pub(super) async fn until_all_ready(
    collector: &mut CollectorProcess,
    limit: Duration,
    mut all_ready: impl AsyncFnMut(&CollectorProcess) -> anyhow::Result<bool>,
) -> anyhow::Result<Option<Duration>> {
    let deadline = collector.started + limit;
    loop {
        if all_ready(collector).await? {
            return Ok(Some(collector.started.elapsed()));
        }
        anyhow::ensure!(
            collector.running(),
            "the collector exited (logs in {})",
            collector.log_dir.display()
        );
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
