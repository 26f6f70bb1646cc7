//! The collector's Prometheus metrics, encoded as OpenMetrics text for `/metrics`.
//!
//! Most families are read at scrape time from handles that already count: the
//! [`TokenCache`]s ([`TokenCache::stats`]) and each member's [`CredentialHealth`]. So the
//! numbers on `/metrics` are the very counters the client stack keeps, with nothing to keep in
//! sync. Only what no handle counts (relists, watch errors, readiness, rotation latency) is
//! recorded through [`Metrics`].
//!
//! ```
//! use std::time::Duration;
//! use collector::metrics::Metrics;
//! use member_client::{CredentialHealth, FailureKind};
//!
//! let metrics = Metrics::new();
//! metrics.watch_member("member1", CredentialHealth::new());
//! metrics.record_watch_error("member1", "apps/v1/deployments", FailureKind::Unauthorized);
//! metrics.observe_rotation_to_use(Duration::from_millis(40));
//! let text = metrics.encode()?;
//! assert!(text.contains(
//!     r#"tether_watch_errors_total{member="member1",resource="apps/v1/deployments",kind="unauthorized"} 1"#
//! ));
//! # Ok::<(), std::fmt::Error>(())
//! ```

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
    time::Duration,
};

use member_client::{CredentialHealth, CredentialState, FailureKind, TokenCache};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{
        MetricType, counter::ConstCounter, family::Family, gauge::ConstGauge, gauge::Gauge,
        histogram::Histogram,
    },
    registry::{Registry, Unit},
};

/// Upper bounds of `tether_rotation_to_use_seconds`, from 1 ms to 60 s. A rotation picked up
/// through a Secret event lands in the low buckets; one caught only by a 401 or by the cache's
/// TTL safety net lands in the seconds-to-a-minute ones.
const ROTATION_BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Every value of the `state` label of `tether_credential_state`, in output order.
const CREDENTIAL_STATES: [&str; 4] = ["unknown", "valid", "rejected", "unavailable"];

/// The collector's metrics: a registry whose families are prefixed `tether_`.
///
/// # Concurrent calls
/// Cloning is cheap (one `Arc`), and every clone records into the same registry. Recording
/// takes a short write lock on the per-member table; a scrape takes a read lock on it while it
/// encodes. No lock is held across an `.await`.
///
/// # Guarantees
/// - Counters read from a [`TokenCache`] or a [`CredentialHealth`] are as fresh as the scrape.
/// - After [`forget_member`](Self::forget_member), no family has a sample for that member,
///   unless something records for it again.
/// - Nothing here reads a token: only counters and states, so tokens cannot reach `/metrics`.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    /// Never mutated after [`Metrics::new`]: what changes lives in `watched` and in the
    /// histogram, both shared with the registry.
    registry: Registry,
    watched: Arc<Watched>,
    rotation_to_use: Histogram,
    leader: Gauge,
    source_listed: Family<Vec<(String, String)>, Gauge>,
}

impl Metrics {
    /// A registry with every `tether_` family and nothing watched yet.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tether");
        let rotation_to_use = Histogram::new(ROTATION_BUCKETS);
        registry.register_with_unit(
            "rotation_to_use",
            "Time from a credential rotation being noticed to the first request that used the new token",
            Unit::Seconds,
            rotation_to_use.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader-election Lease and writes status (1 without leader election)",
            leader.clone(),
        );
        let source_listed = Family::<Vec<(String, String)>, Gauge>::default();
        registry.register(
            "member_source_listed",
            "1 while a source of member definitions is listed, 0 while its list fails or has not run yet",
            source_listed.clone(),
        );
        let watched = Arc::new(Watched::default());
        registry.register_collector(Box::new(Arc::clone(&watched)));
        Self {
            inner: Arc::new(Inner {
                registry,
                watched,
                rotation_to_use,
                leader,
                source_listed,
            }),
        }
    }

    /// Reports the counters of `cache` under the label `cache="<name>"` (e.g. `members`,
    /// `self`). Watching a second cache under the same name replaces the first.
    pub fn watch_token_cache(&self, name: &str, cache: TokenCache) {
        self.inner
            .watched
            .token_caches_mut()
            .insert(name.to_owned(), cache);
    }

    /// Reports `member`'s 401s, retries and credential state from `health`, and counts it in
    /// `tether_members`. Watching a member again replaces its health handle and keeps its
    /// other counters.
    pub fn watch_member(&self, member: &str, health: CredentialHealth) {
        self.inner
            .watched
            .members_mut()
            .entry(member.to_owned())
            .or_default()
            .health = Some(health);
    }

    /// Removes every sample of `member` from every family.
    ///
    /// NB: call it after the member's informers have stopped; a later `record_*` for the
    /// member brings it back.
    pub fn forget_member(&self, member: &str) {
        self.inner.watched.members_mut().remove(member);
    }

    /// Counts one relist of `resource` (e.g. `apps/v1/deployments`) on `member`.
    pub fn record_relist(&self, member: &str, resource: &str) {
        let mut members = self.inner.watched.members_mut();
        let entry = members.entry(member.to_owned()).or_default();
        *entry.relists.entry(resource.to_owned()).or_default() += 1;
    }

    /// Counts one failed list or watch of `resource` on `member`, by what the failure means.
    pub fn record_watch_error(&self, member: &str, resource: &str, kind: FailureKind) {
        let mut members = self.inner.watched.members_mut();
        let entry = members.entry(member.to_owned()).or_default();
        *entry
            .watch_errors
            .entry((resource.to_owned(), failure_kind_label(kind)))
            .or_default() += 1;
    }

    /// Records how long a rotated credential took from being noticed to its first use.
    pub fn observe_rotation_to_use(&self, elapsed: Duration) {
        self.inner.rotation_to_use.observe(elapsed.as_secs_f64());
    }

    /// Sets `tether_member_source_listed{source}` to 1 or 0.
    pub fn set_source_listed(&self, source: &str, listed: bool) {
        self.inner
            .source_listed
            .get_or_create(&vec![("source".to_owned(), source.to_owned())])
            .set(i64::from(listed));
    }

    /// Sets `tether_leader` to 1 or 0.
    pub fn set_leader(&self, leader: bool) {
        self.inner.leader.set(i64::from(leader));
    }

    /// Sets `tether_member_ready{member}` to 1 or 0.
    pub fn set_member_ready(&self, member: &str, ready: bool) {
        self.inner
            .watched
            .members_mut()
            .entry(member.to_owned())
            .or_default()
            .ready = Some(ready);
    }

    /// Every family as OpenMetrics text, ending in `# EOF`.
    ///
    /// # Errors
    /// Only if formatting fails, which writing into a `String` does not do in practice.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)?;
        Ok(text)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("members", &self.inner.watched.members().len())
            .field("token_caches", &self.inner.watched.token_caches().len())
            .finish_non_exhaustive()
    }
}

/// What a member has that no handle counts for us, plus the handle that counts the rest.
#[derive(Debug, Default)]
struct MemberEntry {
    /// `None` for a member that only has recorded samples (its informers started before
    /// `watch_member`); such a member is not counted in `tether_members`.
    health: Option<CredentialHealth>,
    ready: Option<bool>,
    relists: BTreeMap<String, u64>,
    watch_errors: BTreeMap<(String, &'static str), u64>,
}

/// The scrape-time collector. `BTreeMap`s so that samples come out sorted by label.
#[derive(Debug, Default)]
struct Watched {
    token_caches: RwLock<BTreeMap<String, TokenCache>>,
    members: RwLock<BTreeMap<String, MemberEntry>>,
}

// The maps hold plain counters and handles, and every writer leaves them consistent before it
// could panic, so a poisoned lock is recovered rather than failing every later scrape.
impl Watched {
    fn token_caches(&self) -> RwLockReadGuard<'_, BTreeMap<String, TokenCache>> {
        self.token_caches
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn token_caches_mut(&self) -> RwLockWriteGuard<'_, BTreeMap<String, TokenCache>> {
        self.token_caches
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn members(&self) -> RwLockReadGuard<'_, BTreeMap<String, MemberEntry>> {
        self.members.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn members_mut(&self) -> RwLockWriteGuard<'_, BTreeMap<String, MemberEntry>> {
        self.members.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn encode_token_caches(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let caches = self.token_caches();
        let stats: Vec<_> = caches
            .iter()
            .map(|(name, cache)| (name.as_str(), cache.stats()))
            .collect();
        let families = [
            (
                "token_fetches",
                "Reads of a credential source, successful or not.",
                stats
                    .iter()
                    .map(|(n, s)| (*n, s.fetches))
                    .collect::<Vec<_>>(),
            ),
            (
                "token_cache_hits",
                "Token reads answered from the cache.",
                stats.iter().map(|(n, s)| (*n, s.hits)).collect(),
            ),
            (
                "token_cache_misses",
                "Token reads that found no valid entry.",
                stats.iter().map(|(n, s)| (*n, s.misses)).collect(),
            ),
            (
                "token_invalidations",
                "Cached tokens dropped because their Secret changed or a 401 rejected them.",
                stats.iter().map(|(n, s)| (*n, s.invalidations)).collect(),
            ),
        ];
        for (name, help, samples) in families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (cache, value) in samples {
                ConstCounter::new(value).encode(family.encode_family(&[("cache", cache)])?)?;
            }
        }
        Ok(())
    }

    fn encode_members(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let members = self.members();
        let watched: Vec<_> = members
            .iter()
            .filter_map(|(name, entry)| Some((name.as_str(), entry.health.as_ref()?)))
            .collect();

        let family = encoder.encode_descriptor(
            "members",
            "Member clusters being watched.",
            None,
            MetricType::Gauge,
        )?;
        // A usize gauge would not overflow an i64 here; the cast saturates regardless.
        ConstGauge::new(i64::try_from(watched.len()).unwrap_or(i64::MAX)).encode(family)?;

        let mut family = encoder.encode_descriptor(
            "unauthorized_responses",
            "401 responses from a member, before and after token refreshes.",
            None,
            MetricType::Counter,
        )?;
        for (member, health) in &watched {
            let value = health.stats().unauthorized_responses;
            ConstCounter::new(value).encode(family.encode_family(&[("member", *member)])?)?;
        }

        let mut family = encoder.encode_descriptor(
            "retries",
            "Requests sent again with a refreshed token after a 401.",
            None,
            MetricType::Counter,
        )?;
        for (member, health) in &watched {
            let value = health.stats().retries;
            ConstCounter::new(value).encode(family.encode_family(&[("member", *member)])?)?;
        }

        let mut family = encoder.encode_descriptor(
            "credential_state",
            "1 for what the member last said of its credential, 0 for the other states.",
            None,
            MetricType::Gauge,
        )?;
        for (member, health) in &watched {
            let current = credential_state_label(&health.current());
            for state in CREDENTIAL_STATES {
                let labels = [("member", *member), ("state", state)];
                ConstGauge::new(i64::from(state == current))
                    .encode(family.encode_family(&labels)?)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "member_ready",
            "1 while a member's Ready condition is True, else 0.",
            None,
            MetricType::Gauge,
        )?;
        for (member, entry) in members.iter() {
            if let Some(ready) = entry.ready {
                ConstGauge::new(i64::from(ready))
                    .encode(family.encode_family(&[("member", member.as_str())])?)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "relists",
            "Full relists of a mirrored resource on a member.",
            None,
            MetricType::Counter,
        )?;
        for (member, entry) in members.iter() {
            for (resource, value) in &entry.relists {
                let labels = [("member", member.as_str()), ("resource", resource.as_str())];
                ConstCounter::new(*value).encode(family.encode_family(&labels)?)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "watch_errors",
            "Failed lists and watches of a mirrored resource on a member, by failure kind.",
            None,
            MetricType::Counter,
        )?;
        for (member, entry) in members.iter() {
            for ((resource, kind), value) in &entry.watch_errors {
                let labels = [
                    ("member", member.as_str()),
                    ("resource", resource.as_str()),
                    ("kind", kind),
                ];
                ConstCounter::new(*value).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

impl Collector for Watched {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        self.encode_token_caches(&mut encoder)?;
        self.encode_members(&mut encoder)
    }
}

/// The `kind` label: the [`FailureKind`] in snake_case.
fn failure_kind_label(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Unauthorized => "unauthorized",
        FailureKind::Forbidden => "forbidden",
        FailureKind::NotFound => "not_found",
        FailureKind::CredentialUnavailable => "credential_unavailable",
        FailureKind::Unreachable => "unreachable",
        FailureKind::Other => "other",
    }
}

/// The `state` label; the reason of `Unavailable` stays out of labels (unbounded values).
fn credential_state_label(state: &CredentialState) -> &'static str {
    match state {
        CredentialState::Unknown => "unknown",
        CredentialState::Valid => "valid",
        CredentialState::Rejected => "rejected",
        CredentialState::Unavailable { .. } => "unavailable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::{CredentialSource, SecretRef, SourceError, TokenCacheConfig};

    const TOKEN: &str = "s3cr3t-token-value";

    /// Always returns [`TOKEN`], so a test can look for it in the output.
    #[derive(Debug)]
    struct FixedSource;

    #[async_trait::async_trait]
    impl CredentialSource for FixedSource {
        async fn fetch(&self, _key: &SecretRef) -> Result<member_client::Credential, SourceError> {
            member_client::Credential::from_token_bytes(TOKEN.as_bytes())
        }
    }

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
    }

    #[test]
    fn recorded_counters_appear_as_exact_samples() {
        let metrics = Metrics::new();
        metrics.record_relist("m1", "apps/v1/deployments");
        metrics.record_relist("m1", "apps/v1/deployments");
        metrics.record_watch_error("m1", "core/v1/nodes", FailureKind::CredentialUnavailable);
        metrics.set_member_ready("m1", true);
        metrics.set_member_ready("m2", false);

        let text = metrics.encode().unwrap();
        let lines = lines(&text);
        for want in [
            r#"tether_relists_total{member="m1",resource="apps/v1/deployments"} 2"#,
            r#"tether_watch_errors_total{member="m1",resource="core/v1/nodes",kind="credential_unavailable"} 1"#,
            r#"tether_member_ready{member="m1"} 1"#,
            r#"tether_member_ready{member="m2"} 0"#,
            "# TYPE tether_relists counter",
            "# EOF",
        ] {
            assert!(lines.contains(&want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn member_counters_and_state_are_read_from_health_at_scrape_time() {
        let metrics = Metrics::new();
        let health = CredentialHealth::new();
        metrics.watch_member("m1", health.clone());
        let before = metrics.encode().unwrap();
        assert!(
            lines(&before).contains(&r#"tether_credential_state{member="m1",state="unknown"} 1"#)
        );
        assert!(lines(&before).contains(&"tether_members 1"));

        health.report(CredentialState::Rejected);
        let text = metrics.encode().unwrap();
        let lines = lines(&text);
        for want in [
            r#"tether_unauthorized_responses_total{member="m1"} 0"#,
            r#"tether_retries_total{member="m1"} 0"#,
            r#"tether_credential_state{member="m1",state="unknown"} 0"#,
            r#"tether_credential_state{member="m1",state="valid"} 0"#,
            r#"tether_credential_state{member="m1",state="rejected"} 1"#,
            r#"tether_credential_state{member="m1",state="unavailable"} 0"#,
        ] {
            assert!(lines.contains(&want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn unavailable_reason_stays_out_of_labels() {
        let metrics = Metrics::new();
        let health = CredentialHealth::new();
        metrics.watch_member("m1", health.clone());
        health.report(CredentialState::Unavailable {
            reason: "secret ns/s not found".into(),
        });
        let text = metrics.encode().unwrap();
        assert!(
            lines(&text).contains(&r#"tether_credential_state{member="m1",state="unavailable"} 1"#)
        );
        assert!(!text.contains("not found"), "{text}");
    }

    #[test]
    fn forgotten_member_disappears_from_every_family() {
        let metrics = Metrics::new();
        metrics.watch_member("m1", CredentialHealth::new());
        metrics.watch_member("m2", CredentialHealth::new());
        metrics.record_relist("m1", "apps/v1/deployments");
        metrics.record_watch_error("m1", "apps/v1/deployments", FailureKind::Unreachable);
        metrics.set_member_ready("m1", true);

        metrics.forget_member("m1");

        let text = metrics.encode().unwrap();
        assert!(!text.contains(r#"member="m1""#), "{text}");
        assert!(text.contains(r#"member="m2""#), "{text}");
        assert!(lines(&text).contains(&"tether_members 1"));
    }

    #[test]
    fn recorded_only_members_are_not_counted_as_watched() {
        let metrics = Metrics::new();
        metrics.record_relist("m1", "apps/v1/deployments");
        let text = metrics.encode().unwrap();
        assert!(lines(&text).contains(&"tether_members 0"), "{text}");
    }

    #[test]
    fn rotation_latency_lands_in_its_bucket() {
        let metrics = Metrics::new();
        metrics.observe_rotation_to_use(Duration::from_millis(40));
        let text = metrics.encode().unwrap();
        let lines = lines(&text);
        for want in [
            "# TYPE tether_rotation_to_use_seconds histogram",
            "# UNIT tether_rotation_to_use_seconds seconds",
            r#"tether_rotation_to_use_seconds_bucket{le="0.025"} 0"#,
            r#"tether_rotation_to_use_seconds_bucket{le="0.05"} 1"#,
            r#"tether_rotation_to_use_seconds_bucket{le="60.0"} 1"#,
            "tether_rotation_to_use_seconds_count 1",
        ] {
            assert!(lines.contains(&want), "missing {want:?} in\n{text}");
        }
    }

    #[tokio::test]
    async fn token_cache_counters_are_read_at_scrape_time_and_tokens_never_appear() {
        let metrics = Metrics::new();
        let cache = TokenCache::new(FixedSource, TokenCacheConfig::default());
        metrics.watch_token_cache("members", cache.clone());
        let key = SecretRef::new("ns", "member1");
        cache.get(&key).await.unwrap(); // miss + fetch
        cache.get(&key).await.unwrap(); // hit
        cache.invalidate(&key).await;

        let text = metrics.encode().unwrap();
        let lines = lines(&text);
        for want in [
            r#"tether_token_fetches_total{cache="members"} 1"#,
            r#"tether_token_cache_hits_total{cache="members"} 1"#,
            r#"tether_token_cache_misses_total{cache="members"} 1"#,
            r#"tether_token_invalidations_total{cache="members"} 1"#,
        ] {
            assert!(lines.contains(&want), "missing {want:?} in\n{text}");
        }
        assert!(!text.contains(TOKEN), "token leaked into /metrics:\n{text}");
        assert!(!format!("{metrics:?}").contains(TOKEN));
    }
}
