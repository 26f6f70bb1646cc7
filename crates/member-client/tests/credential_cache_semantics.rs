//! CredentialCache guarantees that the layer relies on, checked without HTTP.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails by panicking"
)]

mod support;

use std::{sync::Arc, time::Duration};

use member_client::test_util::FakeSource;
use member_client::{CredentialCache, CredentialCacheConfig, CredentialKey};
use secrecy::ExposeSecret;
use support::wait_until;

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
    wait_until(
        "the load has read the Secret",
        Duration::from_secs(10),
        || source.fetches() == 1,
    )
    .await;
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

    assert!(
        !tokens.invalidate_if_current(&key(), &old).await,
        "a 401 for the old token must not drop the new one"
    );
    assert_eq!(
        Arc::as_ptr(&tokens.get(&key()).await.unwrap()),
        Arc::as_ptr(&new)
    );
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
    wait_until(
        "all readers wait on the load",
        Duration::from_secs(10),
        || tokens.stats().misses == 50,
    )
    .await;
    source.open_gate();
    let errors: Vec<_> = futures::future::join_all(readers)
        .await
        .into_iter()
        .map(|r| r.unwrap().unwrap_err())
        .collect();
    assert!(
        errors.iter().all(|e| Arc::ptr_eq(e, &errors[0])),
        "one load, one shared error"
    );
    assert_eq!(source.fetches(), 1);

    source.set_token("token-a");
    assert_eq!(token(&tokens).await, "token-a");
    assert_eq!(source.fetches(), 2, "the failure was not cached");
}
