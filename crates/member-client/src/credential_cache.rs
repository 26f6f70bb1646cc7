//! The token cache: single-flight loads, per-entry expiry, compare-and-invalidate.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use dashmap::DashMap;
use futures::{
    FutureExt as _,
    future::{BoxFuture, Shared},
};
use moka::{
    future::Cache,
    ops::compute::{CompResult, Op},
};

use crate::{Credential, CredentialKey, CredentialKind, CredentialSource, SourceError};
pub use lifetime::CredentialCacheConfig;
#[cfg(test)]
use lifetime::entry_lifetime;
use lifetime::{Entry, EntryLifetime};
pub(crate) use slot::CredentialSlot;

/// Counters of what the cache did, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CredentialCacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads that found no valid entry and joined or started a load.
    pub misses: u64,
    /// Calls to [`CredentialSource::fetch`], successful or not.
    pub fetches: u64,
    /// Successful fetches by the [`CredentialKind`] they produced, in
    /// [`CredentialKind::ALL`] order (token, exec, certificate, federated).
    pub fetches_by_kind: [u64; CredentialKind::ALL.len()],
    /// Entries removed by [`CredentialCache::invalidate`] or a 401 that matched the cached token.
    pub invalidations: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    fetches: AtomicU64,
    fetches_by_kind: [AtomicU64; CredentialKind::ALL.len()],
    invalidations: AtomicU64,
}

/// Bearer tokens of member clusters, keyed by the [`CredentialKey`] that holds them.
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
/// - An entry lives `min(ttl, exp - expiry_skew, refresh_fraction × (exp - fetched))`, never
///   less than `min_ttl`.
///
/// Not guaranteed: that the fetched token is accepted by the member. That is the
/// [`CredentialLayer`](crate::CredentialLayer)'s job.
///
/// ```
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// use member_client::{file_source::FileSource, CredentialCache, CredentialCacheConfig};
/// let source = FileSource::new("/var/run/secrets/kubernetes.io/serviceaccount/token");
/// let key = source.secret_ref();
/// let cache = CredentialCache::new(source, CredentialCacheConfig::default());
/// let credential = cache.get(&key).await?;
/// cache.invalidate(&key).await; // the Secret changed: the next get reads it again
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CredentialCache {
    inner: Arc<Inner>,
}

/// One load, shared by every reader that missed while it ran.
type Load = Shared<BoxFuture<'static, Result<Arc<Credential>, Arc<SourceError>>>>;

struct Inner {
    config: CredentialCacheConfig,
    entries: Cache<CredentialKey, Entry>,
    source: Arc<dyn CredentialSource>,
    /// The loads in flight, one per key at most.
    loads: DashMap<CredentialKey, Load>,
    /// The transient error the last load of a key ended with, served while the next load
    /// runs; cleared by a successful load or an invalidation. At most one per key.
    failures: DashMap<CredentialKey, Arc<SourceError>>,
    /// For a key invalidated while its load was in flight: the clock at that invalidation.
    /// That load may not store what it read. Emptied as those loads end, so it holds at most
    /// one entry per load in flight.
    epochs: DashMap<CredentialKey, u64>,
    /// One clock for load generations and invalidations: a load is stale if an invalidation
    /// of its key ticked after the load began.
    clock: AtomicU64,
    /// Entries removed so far by an invalidation, counted after each removal: a
    /// [`CredentialSlot`] copied before the count moved may hold a removed entry.
    removals: AtomicU64,
    counters: Counters,
    #[cfg(test)]
    before_store: std::sync::Mutex<Option<Arc<tokio::sync::Barrier>>>,
}

/// How often a load fetches again because invalidations kept arriving while it fetched. After
/// that it hands out what it has without storing it; the next read fetches again.
const MAX_LOAD_ATTEMPTS: usize = 3;

impl CredentialCache {
    /// A cache that loads from `source`.
    pub fn new(source: impl CredentialSource, config: CredentialCacheConfig) -> Self {
        Self::from_arc(Arc::new(source), config)
    }

    /// A cache that loads from a shared `source`.
    pub fn from_arc(source: Arc<dyn CredentialSource>, config: CredentialCacheConfig) -> Self {
        let entries = Cache::builder()
            .max_capacity(config.max_capacity)
            .expire_after(EntryLifetime)
            .build();
        Self {
            inner: Arc::new(Inner {
                config,
                entries,
                source,
                loads: DashMap::new(),
                failures: DashMap::new(),
                epochs: DashMap::new(),
                clock: AtomicU64::new(0),
                removals: AtomicU64::new(0),
                counters: Counters::default(),
                #[cfg(test)]
                before_store: std::sync::Mutex::new(None),
            }),
        }
    }

    /// The credential for `key`, from the cache or, on a miss, from the source.
    ///
    /// A load runs in a task of its own, so it ends by its own deadline (an exec plugin's
    /// timeout) even when every caller waiting on it has gone. While the last load of `key`
    /// failed with a transient error (a plugin that hung or failed), callers get that error at
    /// once and a new load runs in the background, one at a time: a source that takes longer
    /// than a caller's deadline to fail is still reported as failing, not as slow.
    ///
    /// # Errors
    /// The source's error, shared with every caller that waited on the same load.
    pub async fn get(&self, key: &CredentialKey) -> Result<Arc<Credential>, Arc<SourceError>> {
        match self.cached(key).await {
            Some(entry) => Ok(entry.credential),
            None => self.miss(key).await,
        }
    }

    /// The valid entry for `key`, counted as a hit, if there is one.
    async fn cached(&self, key: &CredentialKey) -> Option<Entry> {
        let entry = self.inner.entries.get(key).await?;
        self.inner.counters.hits.fetch_add(1, Ordering::Relaxed);
        Some(entry)
    }

    /// Joins or starts the load of `key`, counted as a miss.
    async fn miss(&self, key: &CredentialKey) -> Result<Arc<Credential>, Arc<SourceError>> {
        let inner = &self.inner;
        inner.counters.misses.fetch_add(1, Ordering::Relaxed);
        let load = inner
            .loads
            .entry(key.clone())
            .or_insert_with(|| self.spawn_load(key))
            .clone();
        if let Some(failed) = inner.failures.get(key).map(|f| Arc::clone(f.value())) {
            return Err(failed);
        }
        load.await
    }

    /// Starts loading `key` in a task; the load removes itself from `loads` when it ends and
    /// records or clears the key's transient failure.
    fn spawn_load(&self, key: &CredentialKey) -> Load {
        let (cache, owned) = (self.clone(), key.clone());
        let task = tokio::spawn(async move {
            let key = owned;
            let loaded = cache.load(&key).await.map_err(Arc::new);
            match &loaded {
                Err(err) if err.is_transient() => {
                    cache.inner.failures.insert(key.clone(), Arc::clone(err));
                }
                _ => {
                    cache.inner.failures.remove(&key);
                }
            }
            cache.inner.loads.remove(&key);
            loaded
        });
        let key = key.clone();
        async move {
            task.await.unwrap_or_else(|panicked| {
                Err(Arc::new(SourceError::Read {
                    key,
                    source: Arc::new(panicked),
                }))
            })
        }
        .boxed()
        .shared()
    }

    /// Forgets `key`, so that the next [`get`](Self::get) reads the source. Call it when the
    /// Secret changed.
    pub async fn invalidate(&self, key: &CredentialKey) {
        let inner = &self.inner;
        // Tick before removing: a load already past its fetch then cannot store (its store is
        // a compute that reads the epoch, serialized with the removal below).
        let now = inner.clock.fetch_add(1, Ordering::SeqCst) + 1;
        if inner.loads.contains_key(key) {
            inner.epochs.insert(key.clone(), now);
        }
        // The Secret changed: what failed before says nothing of what it holds now.
        inner.failures.remove(key);
        inner
            .entries
            .entry_by_ref(key)
            .and_compute_with(|_| std::future::ready(Op::Remove))
            .await;
        inner.removals.fetch_add(1, Ordering::Release);
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
    pub async fn invalidate_if_current(&self, key: &CredentialKey, rejected: &Credential) -> bool {
        let generation = rejected.generation();
        let outcome = self
            .inner
            .entries
            .entry_by_ref(key)
            .and_compute_with(|entry| {
                let op = match entry {
                    Some(entry) if entry.value().credential.generation() == generation => {
                        Op::Remove
                    }
                    _ => Op::Nop,
                };
                std::future::ready(op)
            })
            .await;
        let removed = matches!(outcome, CompResult::Removed(_));
        if removed {
            self.inner.removals.fetch_add(1, Ordering::Release);
            self.inner
                .counters
                .invalidations
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(secret = %key, generation, "rejected credential invalidated");
        }
        removed
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> CredentialCacheStats {
        let c = &self.inner.counters;
        CredentialCacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            fetches: c.fetches.load(Ordering::Relaxed),
            fetches_by_kind: c
                .fetches_by_kind
                .each_ref()
                .map(|n| n.load(Ordering::Relaxed)),
            invalidations: c.invalidations.load(Ordering::Relaxed),
        }
    }

    /// Fetches `key` and stores the result, unless an invalidation ticked since the fetch
    /// began; then fetches again, up to [`MAX_LOAD_ATTEMPTS`].
    async fn load(&self, key: &CredentialKey) -> Result<Arc<Credential>, SourceError> {
        let inner = &self.inner;
        let mut attempt = 1;
        loop {
            let generation = inner.clock.fetch_add(1, Ordering::SeqCst) + 1;
            inner.counters.fetches.fetch_add(1, Ordering::Relaxed);
            let fetched = inner.source.fetch(key).await;
            if let Err(err) = &fetched {
                tracing::debug!(secret = %key, error = %err, "credential fetch failed");
            }
            let credential = Arc::new(fetched?.with_generation(generation));
            let kind = CredentialKind::ALL
                .iter()
                .position(|k| *k == credential.kind())
                .unwrap_or(0);
            inner.counters.fetches_by_kind[kind].fetch_add(1, Ordering::Relaxed);
            #[cfg(test)]
            self.pause_before_store().await;
            if self.store(key, &credential).await {
                inner.epochs.remove_if(key, |_, epoch| *epoch < generation);
                tracing::debug!(secret = %key, generation, "credential fetched");
                return Ok(credential);
            }
            if attempt == MAX_LOAD_ATTEMPTS {
                inner.epochs.remove_if(key, |_, epoch| *epoch < generation);
                return Ok(credential);
            }
            attempt += 1;
        }
    }

    /// Stores `credential` unless `key` was invalidated after its load began. A compute, so
    /// that the epoch check and the insert are one step with respect to
    /// [`invalidate`](Self::invalidate)'s removal.
    async fn store(&self, key: &CredentialKey, credential: &Arc<Credential>) -> bool {
        let (epochs, config) = (&self.inner.epochs, &self.inner.config);
        let outcome = self
            .inner
            .entries
            .entry_by_ref(key)
            .and_compute_with(|_| {
                let stale = epochs
                    .get(key)
                    .is_some_and(|epoch| *epoch > credential.generation());
                std::future::ready(if stale {
                    Op::Nop
                } else {
                    Op::Put(Entry::new(config, Arc::clone(credential)))
                })
            })
            .await;
        !matches!(outcome, CompResult::Unchanged(_) | CompResult::StillNone(_))
    }

    /// How many keys have an epoch recorded (for tests of its bound).
    #[cfg(test)]
    pub(crate) fn epoch_count(&self) -> usize {
        self.inner.epochs.len()
    }

    #[cfg(test)]
    async fn pause_before_store(&self) {
        let barrier = self
            .inner
            .before_store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(barrier) = barrier {
            barrier.wait().await;
            barrier.wait().await;
        }
    }
}

impl std::fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCache")
            .field("entries", &self.inner.entries.entry_count())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

mod lifetime;
mod slot;
#[cfg(test)]
mod tests;
