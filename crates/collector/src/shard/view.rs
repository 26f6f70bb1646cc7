//! [`ShardView`]: the live replicas as one replica sees them, and whether it is one of them.

use std::collections::BTreeSet;

/// This replica as a member of the group: its identity and the generation of its Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) identity: String,
    /// Counts the processes that have held this identity's Lease; a restarted replica is a
    /// new generation, so a fence written before the restart is not taken for its own.
    pub(crate) generation: i32,
}

impl Member {
    /// The owner in a status claim: `<identity>/<generation>`.
    pub(crate) fn fence(&self) -> String {
        format!("{}/{}", self.identity, self.generation)
    }
}

/// The replicas whose Leases are live, as of this replica's last read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShardView {
    pub(crate) replicas: BTreeSet<String>,
    /// `None` until this replica's Lease is written, and again whenever its last renewal is
    /// older than the Lease duration: then it must not write anything.
    pub(crate) me: Option<Member>,
    /// Counts the times `me` became `Some`: a replica whose Lease lapsed (a long pause, a
    /// partition) may have had its members taken over meanwhile, so on rejoining it writes
    /// and claims them afresh.
    pub(crate) term: u64,
}

impl ShardView {
    /// `me`, in the first term of its first generation, among the live `replicas`.
    #[cfg(test)]
    pub(crate) fn of(me: &str, replicas: &[&str]) -> Self {
        Self {
            replicas: replicas.iter().map(|r| (*r).to_owned()).collect(),
            me: Some(Member {
                identity: me.to_owned(),
                generation: 1,
            }),
            term: 1,
        }
    }
}
