//! Section 7's measurement: a collector's start with streaming lists (the default) beside the
//! same start with `--member-streaming-lists=false`, on the same fleet, with no other collector
//! running. Each start runs until the collector has every member Ready by its own
//! `tether_member_ready`; the member apiservers' CPU time over it is read from their `/proc`
//! entries, and their LISTs and streaming lists from their own metrics. The two take turns,
//! `rounds` times each, so that neither always starts on warmer caches.

use std::{path::Path, time::Duration};

use super::{
    collector_log::start_collector, fleet::Fleet, proc_stats::ProcSample, run::until_own_ready,
};

/// One collector start.
#[derive(Clone, Debug, Default)]
pub struct StartCost {
    /// Collector start → every member Ready; `None` if not within the limit.
    pub all_ready: Option<Duration>,
    /// CPU time the member apiservers spent, summed, from the collector's start to all Ready.
    pub apiserver_cpu: Duration,
    /// LIST requests the member apiservers served meanwhile.
    pub lists: f64,
    /// Streaming lists whose initial events they sent meanwhile.
    pub streamed: f64,
}

/// Every start of each kind, in the order they ran.
#[derive(Clone, Debug, Default)]
pub struct InitialListReport {
    /// With streaming lists (the default).
    pub streaming: Vec<StartCost>,
    /// With `--member-streaming-lists=false`.
    pub paged: Vec<StartCost>,
}

impl InitialListReport {
    /// The median of `value` over `starts` (the lower of the middle two).
    pub fn median(starts: &[StartCost], value: impl Fn(&StartCost) -> f64) -> f64 {
        let mut values: Vec<f64> = starts.iter().map(value).collect();
        values.sort_by(f64::total_cmp);
        values
            .get(values.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or(f64::NAN)
    }
}

/// What the member apiservers have served and spent so far.
struct ApiserverTotals {
    cpu: Duration,
    lists: f64,
    streamed: f64,
}

async fn apiserver_totals(fleet: &Fleet) -> anyhow::Result<ApiserverTotals> {
    let mut totals = ApiserverTotals {
        cpu: Duration::ZERO,
        lists: 0.0,
        streamed: 0.0,
    };
    for apiserver in &fleet.apiservers {
        let index = apiserver.env_index;
        let process = (fleet.env.apiserver(index))
            .ok_or_else(|| anyhow::anyhow!("member apiserver {index} is not running"))?;
        totals.cpu += ProcSample::read(process.pid())?.cpu;
        let exposition = fleet.env.cluster(index).metrics().await?;
        totals.lists += exposition.sum("apiserver_request_total", r#"verb="LIST""#);
        totals.streamed += exposition.sum("apiserver_watch_list_duration_seconds_count", "");
    }
    Ok(totals)
}

/// Starts a collector on `fleet` with `--member-streaming-lists=<streaming>`, waits until it
/// has every member Ready (up to `limit`), measures, and stops it.
async fn start_once(
    fleet: &Fleet,
    bin: &Path,
    probe_period: Duration,
    limit: Duration,
    streaming: bool,
) -> anyhow::Result<StartCost> {
    let members = fleet.members.len() as f64;
    let extra = [
        format!("--member-streaming-lists={streaming}"),
        // The Clusters are Ready already; only this collector's own view counts.
        "--write-status=false".to_owned(),
    ];
    let before = apiserver_totals(fleet).await?;
    let control_plane = fleet.env.control_plane();
    let (mut collector, _log) = start_collector(bin, control_plane, probe_period, &extra).await?;
    let all_ready = until_own_ready(&mut collector, limit, members).await?;
    let after = apiserver_totals(fleet).await?;
    collector.terminate(Duration::from_secs(30)).await?;
    Ok(StartCost {
        all_ready,
        apiserver_cpu: after.cpu.saturating_sub(before.cpu),
        lists: after.lists - before.lists,
        streamed: after.streamed - before.streamed,
    })
}

/// `rounds` starts of each kind, taking turns (paged first in odd rounds).
///
/// # Errors
/// A collector not starting or dying, or an apiserver's `/proc` entry or metrics unreadable.
pub async fn compare(
    fleet: &Fleet,
    bin: &Path,
    probe_period: Duration,
    limit: Duration,
    rounds: usize,
) -> anyhow::Result<InitialListReport> {
    let mut report = InitialListReport::default();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for streaming in order {
            let cost = start_once(fleet, bin, probe_period, limit, streaming).await?;
            eprintln!(
                "scale-bench: start with streaming lists {streaming}: {:?} to all Ready, \
                 apiserver CPU {:?}, {} LISTs, {} streaming lists",
                cost.all_ready, cost.apiserver_cpu, cost.lists, cost.streamed
            );
            if streaming {
                report.streaming.push(cost);
            } else {
                report.paged.push(cost);
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(seconds: u64) -> StartCost {
        StartCost {
            apiserver_cpu: Duration::from_secs(seconds),
            ..StartCost::default()
        }
    }

    #[test]
    fn the_median_is_the_middle_start_or_the_lower_of_two() {
        let cpu = |c: &StartCost| c.apiserver_cpu.as_secs_f64();
        assert_eq!(
            InitialListReport::median(&[cost(9), cost(1), cost(5)], cpu),
            5.0
        );
        assert_eq!(InitialListReport::median(&[cost(9), cost(1)], cpu), 1.0);
        assert!(InitialListReport::median(&[], cpu).is_nan());
    }
}
