//! Entry lifetimes, the epoch guard and its bound.

use super::*;
use crate::test_util::FakeSource;
use rstest::rstest;
use secrecy::ExposeSecret as _;
use std::time::{Duration, SystemTime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidation_between_fetch_and_store_is_not_lost() {
    let source = Arc::new(FakeSource::token("old"));
    let cache = CredentialCache::from_arc(source.clone(), CredentialCacheConfig::default());
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    *cache.inner.before_store.lock().unwrap() = Some(Arc::clone(&barrier));
    let key = CredentialKey::new("ns", "s");
    let reader = tokio::spawn({
        let (cache, key) = (cache.clone(), key.clone());
        async move { cache.get(&key).await }
    });
    // The load has fetched "old" and waits just before its store.
    barrier.wait().await;
    *cache.inner.before_store.lock().unwrap() = None;
    source.set_token("new");
    cache.invalidate(&key).await;
    barrier.wait().await;
    let _ = reader.await.unwrap().unwrap();
    let after = cache.get(&key).await.unwrap();
    let why = "a value read before the invalidation was stored";
    assert_eq!(after.token().unwrap().expose_secret(), "new", "{why}");
    let why = "the epoch map shrinks once the load ends";
    assert_eq!(cache.epoch_count(), 0, "{why}");
}

#[tokio::test]
async fn epochs_are_not_kept_for_keys_without_a_load() {
    let cache = CredentialCache::new(FakeSource::token("t"), CredentialCacheConfig::default());
    for i in 0..1000 {
        let key = CredentialKey::new("ns", format!("s{i}"));
        cache.get(&key).await.unwrap();
        cache.invalidate(&key).await;
    }
    assert_eq!(cache.epoch_count(), 0);
}

const S: fn(u64) -> Duration = Duration::from_secs;

#[rstest]
#[case::opaque_token_gets_the_ttl(None, S(300))]
#[case::far_exp_is_capped_by_ttl(Some(3600), S(300))]
#[case::near_exp_minus_skew(Some(100), S(70))]
#[case::exp_within_skew_gets_min_ttl(Some(20), S(1))]
#[case::expired_gets_min_ttl(Some(0), S(1))]
#[case::expired_long_ago_gets_min_ttl(Some(-50), S(1))]
fn lifetime_is_ttl_or_exp_minus_skew(#[case] exp_in: Option<i64>, #[case] want: Duration) {
    let now = SystemTime::UNIX_EPOCH + S(1_000_000);
    let exp = exp_in.map(|secs| match u64::try_from(secs) {
        Ok(ahead) => now + S(ahead),
        Err(_) => now - S(secs.unsigned_abs()),
    });
    let config = CredentialCacheConfig::default();
    assert_eq!(entry_lifetime(&config, exp, now), want);
}

#[rstest]
// 80 % of 600 s (480) comes before exp - skew (570)
#[case::short_lived_refreshed_at_80_percent(0.8, S(600), S(480))]
#[case::a_day_long_eks_token(0.8, S(86_400), Duration::from_secs_f64(69_120.0))]
// the skew wins when it leaves less
#[case::skew_wins_close_to_exp(0.8, S(100), S(70))]
#[case::fraction_one_is_exp_minus_skew(1.0, S(600), S(570))]
#[case::nonsense_fraction_is_one(7.0, S(600), S(570))]
#[case::zero_fraction_is_one(0.0, S(600), S(570))]
fn short_lived_credentials_refresh_at_a_fraction_of_their_lifetime(
    #[case] fraction: f64,
    #[case] exp_in: Duration,
    #[case] want: Duration,
) {
    let config = CredentialCacheConfig {
        ttl: S(100_000),
        refresh_fraction: fraction,
        ..CredentialCacheConfig::default()
    };
    let now = SystemTime::UNIX_EPOCH + S(1_000_000);
    assert_eq!(entry_lifetime(&config, Some(now + exp_in), now), want);
}

#[test]
fn min_ttl_never_exceeds_ttl() {
    let config = CredentialCacheConfig {
        ttl: Duration::from_millis(10),
        ..CredentialCacheConfig::default()
    };
    let now = SystemTime::UNIX_EPOCH + S(1_000_000);
    let lifetime = entry_lifetime(&config, Some(now), now);
    assert_eq!(lifetime, Duration::from_millis(10));
}

/// A source that takes `delay_ms` per fetch and fails (transiently) the first `failures` times.
fn slow(delay_ms: u64, failures: usize) -> Arc<FakeSource> {
    let source = FakeSource::token("fresh").with_delay(Duration::from_millis(delay_ms));
    Arc::new(source.failing_first(failures))
}

/// A caller that gives up (a probe's deadline) does not cancel the load: it ends by its own
/// deadline, and what it read is kept.
#[tokio::test]
async fn a_load_whose_callers_all_gave_up_still_runs_to_its_end() {
    let source = slow(200, 0);
    let cache = CredentialCache::from_arc(source.clone(), CredentialCacheConfig::default());
    let key = CredentialKey::new("ns", "s");
    let gave_up = tokio::time::timeout(Duration::from_millis(20), cache.get(&key)).await;
    assert!(gave_up.is_err(), "the caller's deadline passed first");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(source.finished(), 1);
    cache.get(&key).await.unwrap();
    let why = "the abandoned load's result was stored";
    assert_eq!(cache.stats().fetches, 1, "{why}");
}

/// After a transient failure, callers hear of it at once while one retry runs behind them,
/// instead of each waiting out a slow source; a success or an invalidation ends that.
#[tokio::test]
async fn a_transient_failure_is_served_while_a_retry_runs() {
    let source = slow(150, 2);
    let cache = CredentialCache::from_arc(source.clone(), CredentialCacheConfig::default());
    let key = CredentialKey::new("ns", "s");
    assert!(cache.get(&key).await.is_err(), "the first load fails");

    // A retry starts; this caller is told of the last failure without waiting for it.
    let started = std::time::Instant::now();
    assert!(cache.get(&key).await.is_err());
    let took = started.elapsed();
    assert!(took < Duration::from_millis(100), "{took:?}");
    let why = "one retry at a time, none waited on";
    assert!(cache.get(&key).await.is_err(), "{why}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(source.finished(), 2, "exactly one retry ran");

    // The retry failed too; a changed Secret makes the next caller wait for a fresh read.
    cache.invalidate(&key).await;
    let fresh = cache.get(&key).await.unwrap();
    assert_eq!(fresh.token().unwrap().expose_secret(), "fresh");
    assert_eq!(source.finished(), 3);
}

mod semantics;
mod slot;
