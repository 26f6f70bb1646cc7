//! How long a cache entry lives.

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use moka::Expiry;

use crate::{Credential, CredentialKey};

/// How long entries live.
#[derive(Clone, Debug)]
pub struct CredentialCacheConfig {
    /// The longest an entry is kept without an invalidation. This is the safety net behind
    /// event-driven invalidation (a missed Secret event, a file rewritten in place), not the main
    /// path. Default: 5 minutes, the period Karmada re-reads member Secrets.
    pub ttl: Duration,
    /// How long before a credential's expiry (JWT `exp`, an exec plugin's
    /// `expirationTimestamp`, a certificate's `notAfter`) its entry expires, so that the next
    /// request fetches the renewed credential before the old one is rejected. Default: 30 s.
    pub expiry_skew: Duration,
    /// The share of a credential's remaining lifetime, counted from when it was fetched,
    /// after which it is fetched again. Default: 0.8, as OCM renews: a 24 h EKS token is
    /// renewed after 19.2 h, a 10-minute token after 8. Values outside `(0, 1]` are taken as 1.
    pub refresh_fraction: f64,
    /// The shortest an entry is kept, so that a source that keeps returning an expired token
    /// is not read on every request. Default: 1 s.
    pub min_ttl: Duration,
    /// How many Secrets the cache holds at most. Default: 100,000.
    pub max_capacity: u64,
}

impl Default for CredentialCacheConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(300),
            expiry_skew: Duration::from_secs(30),
            refresh_fraction: 0.8,
            min_ttl: Duration::from_secs(1),
            max_capacity: 100_000,
        }
    }
}

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
