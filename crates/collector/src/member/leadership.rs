//! [`Leadership`]: whether this replica may write, as its leader-election Lease says; one
//! rule for every writer to the control plane (member status, ClusterProfiles).

use tokio::sync::watch;

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
        let never =
            tokio::time::timeout(std::time::Duration::from_millis(20), leadership.changed());
        assert!(never.await.is_err(), "no change after the end");
    }
}
