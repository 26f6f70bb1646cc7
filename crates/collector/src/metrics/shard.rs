//! The sharding families: `tether_shard_members{replica}`, `tether_shard_replicas` and
//! `tether_shard_moves_total{direction}`. Without `--shards auto` none has a sample.

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// The sharding families, registered once.
#[derive(Clone, Default)]
pub(super) struct ShardMetrics {
    members: Family<Vec<(String, String)>, Gauge>,
    replicas: Family<Vec<(String, String)>, Gauge>,
    moves: Family<Vec<(String, String)>, Counter>,
}

impl ShardMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let this = Self::default();
        registry.register(
            "shard_members",
            "Members this replica owns (--shards auto), labelled with its identity",
            this.members.clone(),
        );
        registry.register(
            "shard_replicas",
            "Live replicas of the shard group, as this replica last read their Leases",
            this.replicas.clone(),
        );
        registry.register(
            "shard_moves",
            "Members this replica took over from another replica (direction=\"in\") or handed \
             to one (direction=\"out\")",
            this.moves.clone(),
        );
        this
    }

    /// This replica (`replica`) owns `members` of a group of `replicas`.
    pub(super) fn set(&self, replica: &str, members: usize, replicas: usize) {
        let label = vec![("replica".to_owned(), replica.to_owned())];
        self.members
            .get_or_create(&label)
            .set(i64::try_from(members).unwrap_or(i64::MAX));
        self.replicas
            .get_or_create(&Vec::new())
            .set(i64::try_from(replicas).unwrap_or(i64::MAX));
    }

    /// Counts `n` members moved in `direction` (`in` or `out`).
    pub(super) fn record_moves(&self, direction: &str, n: usize) {
        let label = vec![("direction".to_owned(), direction.to_owned())];
        let counter = self.moves.get_or_create(&label);
        counter.inc_by(u64::try_from(n).unwrap_or(u64::MAX));
    }
}
