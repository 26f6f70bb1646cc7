//! A client's copy of its entry: used while valid, never after a removal or past its expiry.

use super::*;
use crate::test_util::FakeSource;

/// A cache over a source holding `t0`.
fn cache_of_t0(config: CredentialCacheConfig) -> (Arc<FakeSource>, CredentialCache) {
    let source = Arc::new(FakeSource::token("t0"));
    (source.clone(), CredentialCache::from_arc(source, config))
}

async fn token_via(cache: &CredentialCache, slot: &CredentialSlot, key: &CredentialKey) -> String {
    let credential = cache.get_via(slot, key).await.unwrap();
    credential.token().unwrap().expose_secret().to_owned()
}

#[tokio::test]
async fn a_filled_slot_answers_without_the_map() {
    let (source, cache) = cache_of_t0(CredentialCacheConfig::default());
    let (slot, key) = (CredentialSlot::default(), CredentialKey::new("ns", "s"));
    assert_eq!(token_via(&cache, &slot, &key).await, "t0", "a miss loads");
    assert_eq!(token_via(&cache, &slot, &key).await, "t0", "a hit fills");

    // Gone from the map behind the slot's back (not an invalidation: nothing counted).
    cache.inner.entries.invalidate(&key).await;
    source.set_token("t1");
    assert_eq!(token_via(&cache, &slot, &key).await, "t0");
    assert_eq!(cache.stats().fetches, 1, "the slot answered");
    let fresh = cache.get(&key).await.unwrap();
    assert_eq!(fresh.token().unwrap().expose_secret(), "t1");
}

#[tokio::test]
async fn no_slot_returns_what_an_invalidation_removed() {
    let (source, cache) = cache_of_t0(CredentialCacheConfig::default());
    let (slot, key) = (CredentialSlot::default(), CredentialKey::new("ns", "s"));
    let (other, other_key) = (CredentialSlot::default(), CredentialKey::new("ns", "other"));
    for _ in 0..2 {
        token_via(&cache, &slot, &key).await;
        token_via(&cache, &other, &other_key).await;
    }

    source.set_token("t1");
    cache.invalidate(&key).await;
    let why = "after invalidate";
    assert_eq!(token_via(&cache, &slot, &key).await, "t1", "{why}");
    let why = "another key's entry is still cached: its slot reads it again, and no fetch runs";
    assert_eq!(token_via(&cache, &other, &other_key).await, "t0", "{why}");

    token_via(&cache, &slot, &key).await;
    let rejected = cache.get(&key).await.unwrap();
    source.set_token("t2");
    assert!(cache.invalidate_if_current(&key, &rejected).await);
    let why = "after a 401's compare-and-invalidate";
    assert_eq!(token_via(&cache, &slot, &key).await, "t2", "{why}");
}

#[tokio::test]
async fn a_slot_expires_with_its_entry() {
    let (source, cache) = cache_of_t0(CredentialCacheConfig {
        ttl: Duration::from_millis(200),
        min_ttl: Duration::ZERO,
        ..CredentialCacheConfig::default()
    });
    let (slot, key) = (CredentialSlot::default(), CredentialKey::new("ns", "s"));
    token_via(&cache, &slot, &key).await;
    assert_eq!(token_via(&cache, &slot, &key).await, "t0");
    source.set_token("t1");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let why = "the copy lived past the entry's lifetime";
    assert_eq!(token_via(&cache, &slot, &key).await, "t1", "{why}");
}

/// Refills racing an invalidation (a reader that read the entry just before the removal and
/// stores its copy just after) never hand out the removed value afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refills_racing_invalidations_never_outlive_them() {
    let (source, cache) = cache_of_t0(CredentialCacheConfig::default());
    let slot = Arc::new(CredentialSlot::default());
    let key = CredentialKey::new("ns", "s");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racer = tokio::spawn({
        let (cache, slot, key, stop) = (cache.clone(), slot.clone(), key.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                cache.get_via(&slot, &key).await.unwrap();
                tokio::task::yield_now().await;
            }
        }
    });
    for version in 1..=300 {
        source.set_token(format!("t{version}"));
        cache.invalidate(&key).await;
        assert_eq!(token_via(&cache, &slot, &key).await, format!("t{version}"));
    }
    stop.store(true, Ordering::SeqCst);
    racer.await.unwrap();
}
