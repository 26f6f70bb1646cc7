//! [`Leadership`]: whether this replica may write, as its leader-election Lease says; one
//! rule for every writer to the control plane (member status, ClusterProfiles).

use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::watch;

/// How often a writer tries again what failed.
const RETRY_PERIOD: Duration = Duration::from_secs(5);

/// Requests a writer has in flight at once.
const CONCURRENT_WRITES: usize = 16;

/// Whether this replica writes: always without leader election; with it, only while it leads;
/// never again once the election has ended, since it cannot know it leads any more.
pub(crate) enum Leadership {
    /// No leader election: this replica always writes.
    Unelected,
    /// Following the Lease.
    Elected(watch::Receiver<bool>),
    /// The election ended.
    Ended,
}

impl Leadership {
    /// Follows `leader` (`None`: no election).
    pub(crate) fn new(leader: Option<watch::Receiver<bool>>) -> Self {
        leader.map_or(Self::Unelected, Self::Elected)
    }

    /// Resolves at the next change of leadership, the end of the election included; never
    /// without an election or after it ended.
    pub(crate) async fn changed(&mut self) {
        let Self::Elected(leader) = self else {
            return std::future::pending().await;
        };
        if leader.changed().await.is_err() {
            *self = Self::Ended;
        }
    }

    /// Whether this replica may write now.
    pub(crate) fn leading(&self) -> bool {
        match self {
            Self::Unelected => true,
            Self::Elected(leader) => *leader.borrow(),
            Self::Ended => false,
        }
    }
}

/// A writer to the control plane that only the leader runs: it writes what is due whenever it
/// is woken, and every [`RETRY_PERIOD`] for what failed.
pub(crate) trait LeaderWrites {
    /// Resolves when something new may be due.
    async fn woken(&mut self);
    /// Leadership changed: a new leader writes everything again, since the previous one may
    /// have died before writing the last changes.
    fn leadership_changed(&mut self);
    /// Instead of writing, while another replica leads.
    fn following(&mut self) {}
    /// Writes what is due.
    async fn write_due(&mut self);
}

/// Runs `writes` for ever, writing while `leader` (`None`: no election) says this replica
/// leads.
pub(crate) async fn write_while_leading(
    mut writes: impl LeaderWrites,
    leader: Option<watch::Receiver<bool>>,
) {
    let mut leadership = Leadership::new(leader);
    let mut retry = tokio::time::interval(RETRY_PERIOD);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = writes.woken() => {}
            _ = retry.tick() => {}
            () = leadership.changed() => writes.leadership_changed(),
        }
        if leadership.leading() {
            writes.write_due().await;
        } else {
            writes.following();
        }
    }
}

/// `write` run on each of `items`, [`CONCURRENT_WRITES`] at once: the outcomes, in the order
/// they came.
pub(crate) async fn concurrently<T, F: Future>(
    items: impl IntoIterator<Item = T>,
    write: impl FnMut(T) -> F,
) -> Vec<F::Output> {
    futures::stream::iter(items)
        .map(write)
        .buffer_unordered(CONCURRENT_WRITES)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn follows_the_lease_until_the_election_ends() {
        assert!(Leadership::new(None).leading());
        let (tx, rx) = watch::channel(false);
        let mut leadership = Leadership::new(Some(rx));
        assert!(!leadership.leading());
        tx.send_replace(true);
        leadership.changed().await;
        assert!(leadership.leading());
        drop(tx);
        leadership.changed().await;
        assert!(!leadership.leading(), "an ended election leads nothing");
        let never = tokio::time::timeout(Duration::from_millis(20), leadership.changed());
        assert!(never.await.is_err(), "no change after the end");
    }
}
