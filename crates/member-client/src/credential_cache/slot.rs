//! One client's copy of its cache entry, so that a request whose credential is cached reads no
//! shared map: the cache's lookup (hashing the key, recording the read for eviction, the
//! housekeeping that follows) is most of what the bearer layer costs per request.

use std::{
    fmt,
    sync::{Arc, atomic::Ordering},
    time::Instant,
};

use arc_swap::ArcSwapOption;

use super::{CredentialCache, Entry};
use crate::{Credential, CredentialKey, SourceError};

/// A copy of one key's [`CredentialCache`] entry, valid while no invalidation has removed an entry
/// from the cache since it was taken and the entry has not expired.
///
/// Any removal makes every slot of that cache stale, not only the removed key's: a slot then
/// reads the cache once, as if it had none. An entry the cache evicts for capacity stays
/// usable in a slot until it expires, as it would in a client that had just read it.
#[derive(Default)]
pub(crate) struct CredentialSlot {
    held: ArcSwapOption<Held>,
}

struct Held {
    credential: Arc<Credential>,
    /// The cache's removal count read before the entry was.
    removals: u64,
    until: Instant,
}

impl CredentialSlot {
    /// Forgets the copy; the next read goes to the cache.
    pub(crate) fn clear(&self) {
        self.held.store(None);
    }
}

impl fmt::Debug for CredentialSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialSlot")
            .field("held", &self.held.load().is_some())
            .finish()
    }
}

impl CredentialCache {
    /// [`get`](Self::get), answered from `slot` while its copy is valid, and refilling it from
    /// the cache when it is not. `slot` must only ever be used with `key`.
    ///
    /// Keeps `get`'s guarantees: after [`invalidate`](Self::invalidate) or a successful
    /// [`invalidate_if_current`](Self::invalidate_if_current) returns, no slot returns what
    /// was removed, since the removal count is read before the entry and moved after the
    /// removal.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    /// What `slot` holds while its copy is valid: [`get_via`](Self::get_via) without the
    /// cache, and so without a future to hold its state.
    pub(crate) fn held(&self, slot: &CredentialSlot) -> Option<Arc<Credential>> {
        let removals = self.inner.removals.load(Ordering::Acquire);
        let held = slot.held.load();
        let held = held
            .as_ref()
            .filter(|held| held.removals == removals && Instant::now() < held.until)?;
        self.inner.counters.hits.fetch_add(1, Ordering::Relaxed);
        Some(Arc::clone(&held.credential))
    }

    pub(crate) async fn get_via(
        &self,
        slot: &CredentialSlot,
        key: &CredentialKey,
    ) -> Result<Arc<Credential>, Arc<SourceError>> {
        if let Some(held) = self.held(slot) {
            return Ok(held);
        }
        let removals = self.inner.removals.load(Ordering::Acquire);
        let Some(Entry { credential, until }) = self.cached(key).await else {
            // What a load returns is copied on the next read, from the entry it stored.
            return self.miss(key).await;
        };
        slot.held.store(Some(Arc::new(Held {
            credential: Arc::clone(&credential),
            removals,
            until,
        })));
        Ok(credential)
    }
}
