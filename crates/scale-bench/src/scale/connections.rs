//! The collector's established TCP connections to the member apiservers, counted from its
//! `/proc` entry ([`testkit::established_connections`]: its own sockets only, not the
//! apiservers' ends or the bench's), per apiserver and per member.
//!
//! `/proc` cannot tell which member a connection is for: members share apiservers and differ
//! only by token. With HTTP/2 each member should hold one connection, so a count above the
//! members on an apiserver is how many connections beyond one per member there are (at most that
//! many members hold more than one).

use std::time::{Duration, Instant};

use super::fleet::Fleet;

/// How often the connections are counted from all Ready to the end of the steady-state window.
pub const COUNT_PERIOD: Duration = Duration::from_secs(5);

/// One count of a collector's connections.
#[derive(Clone, Debug, Default)]
pub struct ConnectionCount {
    /// When, after the instant the counts are stamped from (every member Ready; for the mass
    /// rotation, its start).
    pub after: Duration,
    /// Per member apiserver, in [`Fleet::apiservers`]' order.
    pub per_apiserver: Vec<usize>,
}

impl ConnectionCount {
    /// Counts `pid`'s established connections to each of `fleet`'s member apiservers, stamped
    /// with the time since `since`.
    pub fn read(pid: u32, fleet: &Fleet, since: Instant) -> Self {
        Self {
            after: since.elapsed(),
            per_apiserver: (fleet.apiservers.iter())
                .map(|server| testkit::established_connections(pid, server.port))
                .collect(),
        }
    }

    /// Over every member apiserver.
    pub fn total(&self) -> usize {
        self.per_apiserver.iter().sum()
    }

    /// Connections beyond one per member, summed over the apiservers (`members_per_apiserver`
    /// in the same order).
    pub fn beyond_one_per_member(&self, members_per_apiserver: &[usize]) -> usize {
        (self.per_apiserver.iter().zip(members_per_apiserver))
            .map(|(held, members)| held.saturating_sub(*members))
            .sum()
    }
}

/// Counts `pid`'s connections now and every [`COUNT_PERIOD`] for `length`, and once more at its
/// end; the collector's process is sampled from the bench's, so this adds no load to it beyond
/// the kernel's reads of its `/proc` entry.
pub async fn count_for(
    pid: u32,
    fleet: &Fleet,
    ready: Instant,
    length: Duration,
) -> Vec<ConnectionCount> {
    let end = Instant::now() + length;
    let mut counts = vec![ConnectionCount::read(pid, fleet, ready)];
    while Instant::now() < end {
        tokio::time::sleep(COUNT_PERIOD.min(end.saturating_duration_since(Instant::now()))).await;
        counts.push(ConnectionCount::read(pid, fleet, ready));
    }
    counts
}

/// One collector's connections and RSS from all Ready to the end of the steady-state window.
#[derive(Clone, Debug, Default)]
pub struct ConnectionReport {
    /// Members per member apiserver, in [`Fleet::apiservers`]' order.
    pub members_per_apiserver: Vec<usize>,
    /// Collector start → every member Ready; `None` if not within the limit.
    pub all_ready: Option<Duration>,
    /// The counts, in time order; the last is at the end of the window.
    pub counts: Vec<ConnectionCount>,
    /// Collector RSS at the end of the window.
    pub rss_bytes: u64,
    /// Collector peak RSS so far (`VmHWM`).
    pub peak_rss_bytes: u64,
}

impl ConnectionReport {
    /// Members over all apiservers.
    pub fn members(&self) -> usize {
        self.members_per_apiserver.iter().sum()
    }

    /// The count at the end of the window.
    pub fn steady(&self) -> ConnectionCount {
        self.counts.last().cloned().unwrap_or_default()
    }

    /// The largest count (the first of equals).
    pub fn most(&self) -> ConnectionCount {
        let most = (self.counts.iter()).reduce(|a, b| if b.total() > a.total() { b } else { a });
        most.cloned().unwrap_or_default()
    }

    /// The fewest connections seen (the count after all Ready may still be opening some).
    pub fn fewest(&self) -> usize {
        self.counts
            .iter()
            .map(ConnectionCount::total)
            .min()
            .unwrap_or(0)
    }

    /// Connections of `count` per member.
    pub fn per_member(&self, count: &ConnectionCount) -> f64 {
        count.total() as f64 / self.members().max(1) as f64
    }

    /// Collector RSS at the end of the window, per member.
    pub fn rss_per_member(&self) -> u64 {
        self.rss_bytes / self.members().max(1) as u64
    }
}

/// Members per member apiserver of `fleet`, in [`Fleet::apiservers`]' order.
pub fn members_per_apiserver(fleet: &Fleet) -> Vec<usize> {
    let mut members = vec![0; fleet.apiservers.len()];
    for member in &fleet.members {
        members[member.apiserver] += 1;
    }
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(after: u64, per_apiserver: &[usize]) -> ConnectionCount {
        ConnectionCount {
            after: Duration::from_secs(after),
            per_apiserver: per_apiserver.to_vec(),
        }
    }

    #[test]
    fn connections_beyond_one_per_member_are_counted_per_apiserver() {
        // One apiserver short of its members does not hide another's surplus.
        assert_eq!(count(0, &[4, 2, 3]).beyond_one_per_member(&[3, 3, 3]), 1);
        assert_eq!(count(0, &[3, 3, 3]).beyond_one_per_member(&[3, 3, 3]), 0);
    }

    #[test]
    fn report_takes_steady_from_the_last_count_and_most_from_the_largest() {
        let report = ConnectionReport {
            members_per_apiserver: vec![2, 2],
            counts: vec![count(0, &[2, 2]), count(5, &[3, 2]), count(10, &[2, 2])],
            rss_bytes: 4096,
            ..ConnectionReport::default()
        };
        assert_eq!(report.steady().after, Duration::from_secs(10));
        assert_eq!(report.most().after, Duration::from_secs(5));
        assert_eq!(report.fewest(), 4);
        assert_eq!(report.per_member(&report.most()), 1.25);
        assert_eq!(report.rss_per_member(), 1024);
    }
}
