//! The token cache: single-flight loads, per-entry expiry, compare-and-invalidate.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use dashmap::DashMap;
use moka::{
    Expiry,
    future::Cache,
    ops::compute::{CompResult, Op},
};

use crate::{Credential, CredentialSource, SecretRef, SourceError};

/// How long entries live.
#[derive(Clone, Debug)]
pub struct TokenCacheConfig {
    /// The longest an entry is kept without an invalidation. This is the safety net behind
    /// event-driven invalidation (a missed Secret event, a file rewritten in place), not the main
    /// path. Default: 5 minutes, the period Karmada re-reads member Secrets.
    pub ttl: Duration,
    /// How long before a JWT's `exp` its entry expires, so that the next request fetches the
    /// renewed token before the old one is rejected. Default: 30 s.
    pub expiry_skew: Duration,
    /// The shortest an entry is kept, so that a source that keeps returning an expired token
    /// is not read on every request. Default: 1 s.
    pub min_ttl: Duration,
    /// How many Secrets the cache holds at most. Default: 100,000.
    pub max_capacity: u64,
}

impl Default for TokenCacheConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(300),
            expiry_skew: Duration::from_secs(30),
            min_ttl: Duration::from_secs(1),
            max_capacity: 100_000,
        }
    }
}

/// Counters of what the cache did, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenCacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads that found no valid entry and joined or started a load.
    pub misses: u64,
    /// Calls to [`CredentialSource::fetch`], successful or not.
    pub fetches: u64,
    /// Entries removed by [`TokenCache::invalidate`] or a 401 that matched the cached token.
    pub invalidations: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    fetches: AtomicU64,
    invalidations: AtomicU64,
}

/// Bearer tokens of member clusters, keyed by the [`SecretRef`] that holds them.
///
/// # Concurrent calls
/// Cloning is cheap (one `Arc`) and no lock is held while reading: a reader that finds a valid
/// entry never waits. Concurrent misses on one key share a single [`CredentialSource::fetch`];
/// every waiter gets the same value, or the same `Arc<SourceError>`. Failures are not cached:
/// the next read fetches again.
///
/// # Guarantees
/// - After [`invalidate`](Self::invalidate) returns, no read returns a value fetched before the
///   call started, even if a fetch was in flight: a load that sees an invalidation while it
///   runs fetches again before it is stored.
/// - [`invalidate_if_current`](Self::invalidate_if_current) removes an entry only if it is the
///   very value a request was rejected with, so N requests rejected with the same token cause
///   one refetch, not N.
/// - An entry lives `min(ttl, exp - expiry_skew)`, never less than `min_ttl`.
///
/// Not guaranteed: that the fetched token is accepted by the member. That is the
/// [`BearerLayer`](crate::BearerLayer)'s job.
///
/// ```
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// use member_client::{FileSource, TokenCache, TokenCacheConfig};
/// let source = FileSource::new("/var/run/secrets/kubernetes.io/serviceaccount/token");
/// let key = source.secret_ref();
/// let cache = TokenCache::new(source, TokenCacheConfig::default());
/// let credential = cache.get(&key).await?;
/// cache.invalidate(&key).await; // the Secret changed: the next get reads it again
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TokenCache {
    inner: Arc<Inner>,
}

struct Inner {
    entries: Cache<SecretRef, Arc<Credential>>,
    source: Arc<dyn CredentialSource>,
    /// Bumped by every `invalidate`; a load compares it before and after fetching.
    epochs: DashMap<SecretRef, u64>,
    generations: AtomicU64,
    counters: Counters,
}

/// How often a load fetches again because invalidations kept arriving while it fetched. After
/// that it stores what it has; the next invalidation removes it anyway.
const MAX_LOAD_ATTEMPTS: usize = 3;

impl TokenCache {
    /// A cache that loads from `source`.
    pub fn new(source: impl CredentialSource, config: TokenCacheConfig) -> Self {
        Self::from_arc(Arc::new(source), config)
    }

    /// A cache that loads from a shared `source`.
    pub fn from_arc(source: Arc<dyn CredentialSource>, config: TokenCacheConfig) -> Self {
        let entries = Cache::builder()
            .max_capacity(config.max_capacity)
            .expire_after(EntryLifetime(config))
            .build();
        Self {
            inner: Arc::new(Inner {
                entries,
                source,
                epochs: DashMap::new(),
                generations: AtomicU64::new(0),
                counters: Counters::default(),
            }),
        }
    }

    /// The credential for `key`, from the cache or, on a miss, from the source.
    ///
    /// # Errors
    /// The source's error, shared with every caller that waited on the same load.
    pub async fn get(&self, key: &SecretRef) -> Result<Arc<Credential>, Arc<SourceError>> {
        let inner = &self.inner;
        if let Some(credential) = inner.entries.get(key).await {
            inner.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(credential);
        }
        inner.counters.misses.fetch_add(1, Ordering::Relaxed);
        inner.entries.try_get_with_by_ref(key, self.load(key)).await
    }

    /// Forgets `key`, so that the next [`get`](Self::get) reads the source. Call it when the
    /// Secret changed.
    pub async fn invalidate(&self, key: &SecretRef) {
        // Bump the epoch first: a load already past its fetch then knows its value is stale.
        *self.inner.epochs.entry(key.clone()).or_default() += 1;
        self.inner.entries.invalidate(key).await;
        self.inner
            .counters
            .invalidations
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!(secret = %key, "credential invalidated");
    }

    /// Forgets `key` only if the cached value is `rejected` (same load), and says whether it did.
    ///
    /// This is what a 401 calls: of N requests rejected with the same token, the first removes
    /// the entry and the rest find a newer one (or a load in flight) and leave it be.
    pub async fn invalidate_if_current(&self, key: &SecretRef, rejected: &Credential) -> bool {
        let generation = rejected.generation();
        let outcome = self
            .inner
            .entries
            .entry_by_ref(key)
            .and_compute_with(|entry| {
                let op = match entry {
                    Some(entry) if entry.value().generation() == generation => Op::Remove,
                    _ => Op::Nop,
                };
                std::future::ready(op)
            })
            .await;
        let removed = matches!(outcome, CompResult::Removed(_));
        if removed {
            self.inner
                .counters
                .invalidations
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(secret = %key, generation, "rejected credential invalidated");
        }
        removed
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> TokenCacheStats {
        let c = &self.inner.counters;
        TokenCacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            fetches: c.fetches.load(Ordering::Relaxed),
            invalidations: c.invalidations.load(Ordering::Relaxed),
        }
    }

    fn epoch(&self, key: &SecretRef) -> u64 {
        self.inner.epochs.get(key).map_or(0, |epoch| *epoch)
    }

    async fn load(&self, key: &SecretRef) -> Result<Arc<Credential>, SourceError> {
        let inner = &self.inner;
        let mut attempt = 1;
        loop {
            let epoch = self.epoch(key);
            inner.counters.fetches.fetch_add(1, Ordering::Relaxed);
            let fetched = inner.source.fetch(key).await;
            if let Err(err) = &fetched {
                tracing::debug!(secret = %key, error = %err, "credential fetch failed");
            }
            let credential = fetched?;
            if self.epoch(key) == epoch || attempt == MAX_LOAD_ATTEMPTS {
                let generation = inner.generations.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::debug!(secret = %key, generation, "credential fetched");
                return Ok(Arc::new(credential.with_generation(generation)));
            }
            attempt += 1;
        }
    }
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache")
            .field("entries", &self.inner.entries.entry_count())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Per-entry lifetime: `min(ttl, exp - skew)`, at least `min_ttl`.
struct EntryLifetime(TokenCacheConfig);

impl Expiry<SecretRef, Arc<Credential>> for EntryLifetime {
    fn expire_after_create(
        &self,
        _key: &SecretRef,
        value: &Arc<Credential>,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(entry_lifetime(
            &self.0,
            value.expires_at(),
            SystemTime::now(),
        ))
    }
}

fn entry_lifetime(
    config: &TokenCacheConfig,
    expires_at: Option<SystemTime>,
    now: SystemTime,
) -> Duration {
    let Some(expires_at) = expires_at else {
        return config.ttl;
    };
    let until_refresh = expires_at
        .duration_since(now)
        .unwrap_or(Duration::ZERO)
        .saturating_sub(config.expiry_skew);
    until_refresh
        .min(config.ttl)
        .max(config.min_ttl.min(config.ttl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[rstest]
    #[case::opaque_token_gets_the_ttl(None, S(300))]
    #[case::far_exp_is_capped_by_ttl(Some(S(3600)), S(300))]
    #[case::near_exp_minus_skew(Some(S(100)), S(70))]
    #[case::exp_within_skew_gets_min_ttl(Some(S(20)), S(1))]
    #[case::expired_gets_min_ttl(Some(Duration::ZERO), S(1))]
    fn lifetime_is_ttl_or_exp_minus_skew(#[case] exp_in: Option<Duration>, #[case] want: Duration) {
        let now = SystemTime::UNIX_EPOCH + S(1_000_000);
        let got = entry_lifetime(&TokenCacheConfig::default(), exp_in.map(|d| now + d), now);
        assert_eq!(got, want);
    }

    #[test]
    fn token_expired_long_ago_gets_min_ttl() {
        let now = SystemTime::UNIX_EPOCH + S(1_000_000);
        let got = entry_lifetime(&TokenCacheConfig::default(), Some(now - S(50)), now);
        assert_eq!(got, S(1));
    }

    #[test]
    fn min_ttl_never_exceeds_ttl() {
        let config = TokenCacheConfig {
            ttl: Duration::from_millis(10),
            ..TokenCacheConfig::default()
        };
        let now = SystemTime::UNIX_EPOCH + S(1_000_000);
        assert_eq!(
            entry_lifetime(&config, Some(now), now),
            Duration::from_millis(10)
        );
    }
}
