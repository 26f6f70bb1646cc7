//! The collector's Prometheus metrics, encoded as OpenMetrics text for `/metrics`.
//!
//! Most families are read at scrape time from handles that already count: the
//! [`CredentialCache`]s ([`CredentialCache::stats`]) and each member's [`CredentialHealth`]. So the
//! numbers on `/metrics` are the very counters the client stack keeps, with nothing to keep in
//! sync. Only what no handle counts (relists, watch errors, readiness, rotation latency) is
//! recorded through [`Metrics`].

mod member_info;
mod registry_gauges;
mod scrape;
mod shard;

use std::{fmt, sync::Arc, time::Duration};

use member_client::{CredentialCache, CredentialHealth, FailureKind};
use prometheus_client::{
    metrics::{family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

use crate::cli::MembersFrom;
use member_info::MemberInfo;
use registry_gauges::RegistryGauges;
use scrape::{MemberEntry, Watched, failure_kind_label};
use shard::ShardMetrics;

/// Upper bounds of `tether_rotation_to_use_seconds`, from 1 ms to 60 s. A rotation picked up
/// through a Secret event lands in the low buckets; one caught only by a 401 or by the cache's
/// TTL safety net lands in the seconds-to-a-minute ones.
const ROTATION_BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The collector's metrics: a registry whose families are prefixed `tether_`.
///
/// # Concurrent calls
/// Cloning is cheap (one `Arc`), and every clone records into the same registry. Recording
/// takes a short write lock on the per-member table; a scrape takes a read lock on it while it
/// encodes. No lock is held across an `.await`.
///
/// # Guarantees
/// - Counters read from a [`CredentialCache`] or a [`CredentialHealth`] are as fresh as the scrape.
/// - After [`forget_member`](Self::forget_member), no family has a sample for that member,
///   unless something records for it again.
/// - Nothing here reads a token: only counters and states, so tokens cannot reach `/metrics`.
#[derive(Clone)]
pub(crate) struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    /// Never mutated after [`Metrics::new`]: what changes lives in `watched` and in the
    /// histogram, both shared with the registry.
    registry: Registry,
    watched: Arc<Watched>,
    rotation_to_use: Histogram,
    source_listed: Family<Vec<(String, String)>, Gauge>,
    registry_gauges: Arc<RegistryGauges>,
    member_info: Arc<MemberInfo>,
    shard: ShardMetrics,
}

impl Metrics {
    /// A registry with every `tether_` family and nothing watched yet.
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("tether");
        let rotation_to_use = Histogram::new(ROTATION_BUCKETS);
        registry.register_with_unit(
            "rotation_to_use",
            "Time from a credential rotation being noticed to the first request that used the new credential",
            Unit::Seconds,
            rotation_to_use.clone(),
        );
        let build_info = Family::<[(&str, &str); 1], Gauge>::default();
        build_info
            .get_or_create(&[("version", env!("CARGO_PKG_VERSION"))])
            .set(1);
        registry.register(
            "build_info",
            "1, labelled with the collector's version",
            build_info,
        );
        let source_listed = Family::<Vec<(String, String)>, Gauge>::default();
        registry.register(
            "member_source_listed",
            "1 while a source of member definitions is listed, 0 while its list fails or has not run \
             yet: source is its kind (as in tether_member_info), location the namespace or \
             directory it reads (empty for Karmada Clusters)",
            source_listed.clone(),
        );
        let watched = Arc::new(Watched::default());
        registry.register_collector(Box::new(Arc::clone(&watched)));
        let registry_gauges = Arc::new(RegistryGauges::default());
        registry.register_collector(Box::new(Arc::clone(&registry_gauges)));
        let member_info = Arc::new(MemberInfo::new(Arc::clone(&watched)));
        registry.register_collector(Box::new(Arc::clone(&member_info)));
        let shard = ShardMetrics::register(&mut registry);
        Self {
            inner: Arc::new(Inner {
                registry,
                watched,
                rotation_to_use,
                source_listed,
                registry_gauges,
                member_info,
                shard,
            }),
        }
    }

    /// Reports the counters of `cache` under the label `cache="<name>"` (e.g. `members`,
    /// `self`). Watching a second cache under the same name replaces the first.
    pub(crate) fn watch_credential_cache(&self, name: &str, cache: CredentialCache) {
        self.inner
            .watched
            .credential_caches_mut()
            .insert(name.to_owned(), cache);
    }

    /// Reports `tether_insecure_members`, `tether_member_credentials_held` and the endpoints in
    /// `tether_member_info` from `registry` at each scrape; `members_from` is every member's
    /// `source` label.
    pub(crate) fn watch_registry(
        &self,
        registry: cluster_registry::Registry,
        members_from: MembersFrom,
    ) {
        self.inner.registry_gauges.watch(registry.clone());
        self.inner.member_info.watch(registry, members_from);
    }

    /// Reports `member`'s 401s, retries and credential state from `health`, and counts it in
    /// `tether_members`. Watching a member again replaces its health handle and keeps its
    /// other counters.
    pub(crate) fn watch_member(&self, member: &str, health: CredentialHealth) {
        self.update_member(member, |entry| entry.health = Some(health));
    }

    /// Removes every sample of `member` from every family.
    ///
    /// NB: call it after the member's informers have stopped; a later `record_*` for the
    /// member brings it back.
    pub(crate) fn forget_member(&self, member: &str) {
        self.inner.watched.members_mut().remove(member);
    }

    /// Counts one relist of `resource` (e.g. `apps/v1/deployments`) on `member`.
    pub(crate) fn record_relist(&self, member: &str, resource: &str) {
        self.update_member(member, |entry| {
            *entry.relists.entry(resource.to_owned()).or_default() += 1;
        });
    }

    /// Counts one failed list or watch of `resource` on `member`, by what the failure means.
    pub(crate) fn record_watch_error(&self, member: &str, resource: &str, kind: FailureKind) {
        self.update_member(member, |entry| {
            let key = (resource.to_owned(), failure_kind_label(kind));
            *entry.watch_errors.entry(key).or_default() += 1;
        });
    }

    /// Counts a token mint for `member` (`tether_token_mints_total`); `result` is one of
    /// `success`, `failed`, `expired`, `conflict`, `refused`.
    pub(crate) fn record_token_mint(&self, member: &str, result: &'static str) {
        self.update_member(member, |entry| {
            *entry.token_mints.entry(result).or_default() += 1;
        });
    }

    /// Records how long a rotated credential took from being noticed to its first use.
    pub(crate) fn observe_rotation_to_use(&self, elapsed: Duration) {
        self.inner.rotation_to_use.observe(elapsed.as_secs_f64());
    }

    /// Sets `tether_member_source_listed{source,location}` to 1 or 0.
    pub(crate) fn set_source_listed(&self, source: &cluster_registry::Source, listed: bool) {
        let labels = vec![
            ("source".to_owned(), source.kind().as_str().to_owned()),
            ("location".to_owned(), source.location()),
        ];
        self.inner
            .source_listed
            .get_or_create(&labels)
            .set(i64::from(listed));
    }

    /// Sets `tether_leader` to 1 or 0; until the first call it has no sample.
    pub(crate) fn set_leader(&self, leader: bool) {
        self.inner.watched.set_leader(leader);
    }

    /// Sets `tether_shard_members{replica}` and `tether_shard_replicas`.
    pub(crate) fn set_shard(&self, replica: &str, members: usize, replicas: usize) {
        self.inner.shard.set(replica, members, replicas);
    }

    /// Counts `n` members moved `direction` (`in` or `out`) in `tether_shard_moves_total`.
    pub(crate) fn record_shard_moves(&self, direction: &str, n: usize) {
        self.inner.shard.record_moves(direction, n);
    }

    /// Sets `tether_member_ready{member}` to 1 or 0.
    pub(crate) fn set_member_ready(&self, member: &str, ready: bool) {
        self.update_member(member, |entry| entry.ready = Some(ready));
    }

    fn update_member(&self, member: &str, update: impl FnOnce(&mut MemberEntry)) {
        let mut members = self.inner.watched.members_mut();
        update(members.entry(member.to_owned()).or_default());
    }

    /// Every family as OpenMetrics text, ending in `# EOF`.
    ///
    /// # Errors
    /// Only if formatting fails, which writing into a `String` does not do in practice.
    pub(crate) fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)?;
        Ok(text)
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("members", &self.inner.watched.members().len())
            .field(
                "credential_caches",
                &self.inner.watched.credential_caches().len(),
            )
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod documented;
#[cfg(test)]
mod tests;
