//! The sharded mode of the bench (`hack/bench.sh --sharded`): several collector replicas with
//! `--shards auto` over one fleet, each a process of its own. It measures start to all Ready,
//! each replica's RSS, CPU and credentials held, the members moved and the time to an owner
//! (and to credentials held by the owners only) again when one replica is SIGKILLed and when
//! one is added, every status write against the claims
//! ([`testkit::StatusWriters`]), and a mass rotation across all shards.

mod replicas;
mod report;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use testkit::StatusWriters;

pub use report::{Handover, ReplicaCost, ShardedReport, print};

use crate::scale::{
    conditions::ConditionWatch, fleet::Fleet, proc_stats::ProcSample, run::apiserver_counters,
};
use replicas::{Replica, metric_sum, owners, shares_held};

/// How often ownership is read from the replicas during a handover.
const POLL: Duration = Duration::from_millis(500);

/// Knobs of the sharded run.
#[derive(Clone, Debug)]
pub struct ShardedOptions {
    /// Replicas at the start (one is killed, one added).
    pub replicas: usize,
    /// `--shard-lease-seconds`.
    pub lease_seconds: u64,
    /// `--probe-period`.
    pub probe_period: Duration,
    /// Give up on a step (all Ready, a handover, the rotation) after this long.
    pub limit: Duration,
    /// The steady-state window for RSS, CPU and request rates.
    pub window: Duration,
}

/// Runs the sharded phases on `fleet` with the collector `bin`.
///
/// # Errors
/// A replica not starting, or API errors while rotating.
pub async fn run(
    fleet: &mut Fleet,
    bin: &Path,
    options: &ShardedOptions,
) -> anyhow::Result<ShardedReport> {
    let members = fleet.members.len();
    let writers = StatusWriters::start(fleet.control_plane.clone());
    let conditions = ConditionWatch::start(fleet.control_plane.clone());
    let started = Instant::now();
    let mut group = Vec::with_capacity(options.replicas + 1);
    for i in 1..=options.replicas {
        let identity = format!("shard-{i}");
        group.push(replicas::start(bin, fleet, &identity, options).await?);
    }
    let deadline = Instant::now() + options.limit;
    while conditions.ready() < members && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
    }
    let all_ready = (conditions.ready() >= members).then(|| started.elapsed());
    let settled = settle(&group, members, deadline).await;

    // Steady state: every replica's cost over one window.
    let api0 = apiserver_counters(fleet).await?;
    let before: Vec<ProcSample> = group
        .iter()
        .map(|r| ProcSample::read(r.process.pid()))
        .collect::<anyhow::Result<_>>()?;
    tokio::time::sleep(options.window).await;
    let api1 = apiserver_counters(fleet).await?;
    let owned = owners(&group).await;
    let served_by = |identity: &String| owned.values().filter(|o| o.contains(identity)).count();
    let mut costs = Vec::with_capacity(group.len());
    for (replica, before) in group.iter().zip(&before) {
        let after = ProcSample::read(replica.process.pid())?;
        costs.push(ReplicaCost {
            identity: replica.identity.clone(),
            members: served_by(&replica.identity),
            credentials_held: replicas::credentials_held(replica).await,
            rss_bytes: after.rss_bytes,
            cpu_cores: after.cores_since(before),
        });
    }
    let window = api1.at.saturating_duration_since(api0.at);
    let seconds = window.as_secs_f64().max(f64::EPSILON);

    // SIGKILL the last replica: its members have no owner until the others take them.
    let killed = group.pop().context("no replica to kill")?;
    let orphans = served_by(&killed.identity);
    let at = Instant::now();
    drop(killed);
    let kill = handover(&group, members, &owned, at, options.limit, None).await;

    // Add a replica.
    let owned = owners(&group).await;
    let at = Instant::now();
    let identity = format!("shard-{}", options.replicas + 1);
    group.push(replicas::start(bin, fleet, &identity, options).await?);
    let add = handover(&group, members, &owned, at, options.limit, Some(&identity)).await;

    let rotation = rotate(fleet, &group, &conditions, options).await?;
    Ok(ShardedReport {
        members,
        replicas: options.replicas,
        lease_seconds: options.lease_seconds,
        all_ready,
        settled,
        costs,
        watches: api1.watches,
        requests_per_second: (api1.requests - api0.requests) / seconds,
        orphans,
        kill,
        add,
        rotation,
        status_writes: writers.writes().values().sum(),
        double_writes: writers.double_writes().len(),
    })
}

/// Waits until every member is served by exactly one replica; `true` if it happened.
async fn settle(group: &[Replica], members: usize, deadline: Instant) -> bool {
    loop {
        let owned = owners(group).await;
        if owned.len() == members && owned.values().all(|o| o.len() == 1) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Follows ownership from `at` until every member is served by exactly one of `group` (and,
/// with `joining`, that replica serves some): how many changed owner against `before`, the
/// longest any member went unserved, the longest any was served twice, and the time to the
/// exact partition.
async fn handover(
    group: &[Replica],
    members: usize,
    before: &BTreeMap<String, Vec<String>>,
    at: Instant,
    limit: Duration,
    joining: Option<&str>,
) -> Handover {
    let mut unserved_since: BTreeMap<String, Instant> = BTreeMap::new();
    let mut doubled_since: BTreeMap<String, Instant> = BTreeMap::new();
    let mut longest_unserved = Duration::ZERO;
    let mut longest_doubled = Duration::ZERO;
    // `Some(None)`: the replicas do not report what they hold.
    let mut credentials_at: Option<Option<Duration>> = None;
    let mut rebalanced_at = None;
    let every: BTreeSet<String> = before.keys().cloned().collect();
    loop {
        let now_owned = owners(group).await;
        let now = Instant::now();
        for member in &every {
            let served = now_owned.get(member).map_or(0, Vec::len);
            if served == 0 {
                unserved_since.entry(member.clone()).or_insert(at);
            } else if let Some(since) = unserved_since.remove(member) {
                longest_unserved = longest_unserved.max(now.duration_since(since));
            }
            if served > 1 {
                doubled_since.entry(member.clone()).or_insert(now);
            } else if let Some(since) = doubled_since.remove(member) {
                longest_doubled = longest_doubled.max(now.duration_since(since));
            }
        }
        let joined = joining.is_none_or(|j| now_owned.values().any(|o| o.iter().any(|r| r == j)));
        let exact =
            joined && now_owned.len() == members && now_owned.values().all(|o| o.len() == 1);
        if exact && rebalanced_at.is_none() {
            rebalanced_at = Some(now.duration_since(at));
        }
        if exact && credentials_at.is_none() {
            // Each owner holds its share's credentials, and no replica any other: the handover
            // of the credentials is over too.
            match shares_held(group, &now_owned).await {
                Some(true) => credentials_at = Some(Some(now.duration_since(at))),
                Some(false) => {}
                None => credentials_at = Some(None),
            }
        }
        let done = exact && credentials_at.is_some();
        if done || now.duration_since(at) >= limit {
            let moved = now_owned
                .iter()
                .filter(|(m, o)| before.get(*m).is_some_and(|b| b != *o))
                .count();
            for since in unserved_since.values() {
                longest_unserved = longest_unserved.max(now.duration_since(*since));
            }
            return Handover {
                moved,
                longest_unserved,
                longest_doubled,
                rebalanced: rebalanced_at,
                credentials_in_place: credentials_at.flatten(),
                credentials_reported: credentials_at != Some(None),
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Rotates every member at once across the shards (new ServiceAccounts' tokens written, the
/// old ones deleted and rejected), then one probe period: relists, 401s and fetches.
async fn rotate(
    fleet: &mut Fleet,
    group: &[Replica],
    conditions: &ConditionWatch,
    options: &ShardedOptions,
) -> anyhow::Result<report::Rotation> {
    let generation = fleet.mint_next_generation(&fleet.members).await?;
    let members = r#"cache="members""#;
    let fetches0 = metric_sum(group, "tether_token_fetches_total", members).await;
    let relists0 = metric_sum(group, "tether_relists_total", "").await;
    let unauthorized0 = metric_sum(group, "tether_unauthorized_responses_total", "").await;
    conditions.mark();
    let start = Instant::now();
    let f: &Fleet = fleet;
    f.write_tokens(&f.members, &generation.tokens).await?;
    f.revoke(&f.members, Instant::now() + options.limit).await?;
    tokio::time::sleep(options.probe_period + Duration::from_secs(2)).await;
    let elapsed = start.elapsed();
    let rotation = report::Rotation {
        fetches: metric_sum(group, "tether_token_fetches_total", members).await - fetches0,
        relists: metric_sum(group, "tether_relists_total", "").await - relists0,
        unauthorized: metric_sum(group, "tether_unauthorized_responses_total", "").await
            - unauthorized0,
        credentials_false: conditions.credentials_false_since_mark().len(),
        ready: conditions.ready(),
        elapsed,
    };
    fleet.adopt(generation);
    Ok(rotation)
}
