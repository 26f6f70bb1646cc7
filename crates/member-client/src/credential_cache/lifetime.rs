//! How long a cache entry lives.

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use moka::Expiry;

use super::CredentialCacheConfig;
use crate::{Credential, CredentialKey};

/// A stored credential with the instant it expires, fixed when it is stored: the cache expires
/// it then, and so does any copy of it (a [`CredentialSlot`](super::CredentialSlot)).
#[derive(Clone)]
pub(super) struct Entry {
    pub(super) credential: Arc<Credential>,
    pub(super) until: Instant,
}

impl Entry {
    /// `credential`, stored now: it lives `min(ttl, exp - skew, fraction × (exp - now))`, at
    /// least `min_ttl`.
    pub(super) fn new(config: &CredentialCacheConfig, credential: Arc<Credential>) -> Self {
        let lifetime = entry_lifetime(config, credential.expires_at(), SystemTime::now());
        Self {
            credential,
            until: Instant::now() + lifetime,
        }
    }
}

/// Expires each entry at its [`Entry::until`].
pub(super) struct EntryLifetime;

impl Expiry<CredentialKey, Entry> for EntryLifetime {
    fn expire_after_create(
        &self,
        _key: &CredentialKey,
        value: &Entry,
        created_at: Instant,
    ) -> Option<Duration> {
        Some(value.until.saturating_duration_since(created_at))
    }
}

pub(super) fn entry_lifetime(
    config: &CredentialCacheConfig,
    expires_at: Option<SystemTime>,
    now: SystemTime,
) -> Duration {
    let Some(expires_at) = expires_at else {
        return config.ttl;
    };
    let remaining = expires_at.duration_since(now).unwrap_or(Duration::ZERO);
    let fraction = if config.refresh_fraction > 0.0 && config.refresh_fraction <= 1.0 {
        config.refresh_fraction
    } else {
        1.0
    };
    remaining
        .saturating_sub(config.expiry_skew)
        .min(remaining.mul_f64(fraction))
        .min(config.ttl)
        .max(config.min_ttl.min(config.ttl))
}
