//! The guarantees the credential layer relies on, checked without HTTP.

use super::*;
use crate::test_util::FakeSource;

/// Polls `check` every 10 ms until it holds, failing the test after 10 s.
async fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        let now = tokio::time::Instant::now();
        assert!(now < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn key() -> CredentialKey {
    CredentialKey::new("karmada-cluster", "member1")
}

/// The token the cache hands out for [`key`] now.
async fn token(tokens: &CredentialCache) -> String {
    let credential = tokens.get(&key()).await.unwrap();
    credential.token().unwrap().expose_secret().to_owned()
}

#[tokio::test]
async fn invalidate_during_a_load_discards_what_that_load_read() {
    let source = Arc::new(FakeSource::token("token-a").gated());
    let tokens = CredentialCache::from_arc(source.clone(), CredentialCacheConfig::default());

    let reader = {
        let tokens = tokens.clone();
        tokio::spawn(async move { tokens.get(&key()).await })
    };
    until("the load has read the Secret", || source.fetches() == 1).await;
    // The Secret changes while that read is in flight, and the watch invalidates the key.
    source.set_token("token-b");
    tokens.invalidate(&key()).await;
    source.open_gate();

    let credential = reader.await.unwrap().unwrap();
    assert_eq!(credential.token().unwrap().expose_secret(), "token-b");
    assert_eq!(token(&tokens).await, "token-b");
    assert_eq!(source.fetches(), 2);
}

#[tokio::test]
async fn compare_and_invalidate_ignores_a_newer_value() {
    let source = Arc::new(FakeSource::token("token-a"));
    let tokens = CredentialCache::from_arc(source.clone(), CredentialCacheConfig::default());
    let old = tokens.get(&key()).await.unwrap();
    source.set_token("token-b");
    tokens.invalidate(&key()).await;
    let new = tokens.get(&key()).await.unwrap();
    assert!(new.generation() > old.generation());

    let why = "a 401 for the old token must not drop the new one";
    assert!(!tokens.invalidate_if_current(&key(), &old).await, "{why}");
    let current = tokens.get(&key()).await.unwrap();
    assert!(Arc::ptr_eq(&current, &new));
    assert!(tokens.invalidate_if_current(&key(), &new).await);
    assert_eq!(source.fetches(), 2);
    tokens.get(&key()).await.unwrap();
    assert_eq!(source.fetches(), 3);
}

#[tokio::test]
async fn failures_are_shared_by_waiters_and_not_cached() {
    let source = Arc::new(FakeSource::token("token-a").gated());
    source.delete();
    let tokens = CredentialCache::from_arc(source.clone(), CredentialCacheConfig::default());
    let readers: Vec<_> = (0..50)
        .map(|_| {
            let tokens = tokens.clone();
            tokio::spawn(async move { tokens.get(&key()).await })
        })
        .collect();
    until("all readers wait on the load", || {
        tokens.stats().misses == 50
    })
    .await;
    source.open_gate();
    let errors: Vec<_> = futures::future::join_all(readers)
        .await
        .into_iter()
        .map(|r| r.unwrap().unwrap_err())
        .collect();
    let why = "one load, one shared error";
    assert!(errors.iter().all(|e| Arc::ptr_eq(e, &errors[0])), "{why}");
    assert_eq!(source.fetches(), 1);

    source.set_token("token-a");
    assert_eq!(token(&tokens).await, "token-a");
    assert_eq!(source.fetches(), 2, "the failure was not cached");
}
