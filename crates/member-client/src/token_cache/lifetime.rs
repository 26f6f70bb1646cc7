//! How long a cache entry lives.

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use moka::Expiry;

use super::TokenCacheConfig;
use crate::{Credential, SecretRef};

/// Per-entry lifetime: `min(ttl, exp - skew, fraction × (exp - now))`, at least `min_ttl`.
pub(super) struct EntryLifetime(pub(super) TokenCacheConfig);

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

pub(super) fn entry_lifetime(
    config: &TokenCacheConfig,
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
