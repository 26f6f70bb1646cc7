//! A Secret change: what it invalidates in the token cache and what the consumer hears.

use secrecy::ExposeSecret as _;

use super::*;
use crate::test_ca::ca_pem;

#[tokio::test]
async fn a_missing_secret_is_secret_not_found_until_it_appears() {
    let mut h = harness();
    h.list_namespace().await;
    h.define("member1", def("member1")).await;
    assert_eq!(h.expect_invalid("member1"), InvalidReason::SecretNotFound);
    h.write_secret(&[("token", b"t1")]).await;
    h.expect_upserted();
}

#[tokio::test]
async fn a_new_token_invalidates_the_cache_before_rotated_is_sent() {
    let mut h = ready_member1().await;
    let cached = h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(cached.token().unwrap().expose_secret(), "t1");
    let before = h.tokens.stats().invalidations;

    h.write_secret(&[("token", b"t2\n")]).await;
    h.expect_rotated("member1", key("member1"));
    assert_eq!(h.tokens.stats().invalidations, before + 1);
    let fresh = h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(fresh.token().unwrap().expose_secret(), "t2");
}

#[tokio::test]
async fn unrelated_secret_changes_neither_invalidate_nor_notify() {
    let mut h = ready_member1().await;
    let before = h.tokens.stats().invalidations;
    // another key, and the same token with different surrounding whitespace
    h.write_secret(&[("token", b"t1"), ("note", b"x")]).await;
    h.write_secret(&[("token", b"t1\n")]).await;
    assert_eq!(h.next(), None);
    assert_eq!(h.tokens.stats().invalidations, before);
}

#[tokio::test]
async fn a_new_ca_bundle_is_an_upsert_that_carries_it() {
    let mut h = ready_member1().await;
    let ca = ca_pem();
    h.write_secret(&[("token", b"t1"), ("caBundle", ca.as_bytes())])
        .await;
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Upserted {
            spec: spec("member1", "https://10.0.0.1:6443"),
            ca_bundle: Some(Bytes::from(ca.clone())),
        })
    );
    let cred = h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(cred.ca_bundle().unwrap().as_ref(), ca.as_bytes());
}

#[tokio::test]
async fn a_deleted_secret_is_secret_not_found_and_the_cache_forgets_it() {
    let mut h = ready_member1().await;
    h.tokens.get(&key("member1")).await.unwrap();
    h.table.remove_secret(&key("member1")).await.unwrap();
    assert_eq!(h.expect_invalid("member1"), InvalidReason::SecretNotFound);
    let err = h.tokens.get(&key("member1")).await.unwrap_err();
    assert!(
        matches!(*err, member_client::SourceError::NotFound { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn garbage_in_the_secret_is_secret_invalid() {
    let mut h = ready_member1().await;
    h.write_secret(&[("token", &[0xff, 0xfe])]).await;
    let InvalidReason::SecretInvalid(why) = h.expect_invalid("member1") else {
        panic!("expected SecretInvalid");
    };
    assert!(why.contains("UTF-8"), "{why}");
    // a different kind of garbage is a new reason
    h.write_secret(&[("nothing", b"")]).await;
    let reason = h.expect_invalid("member1");
    assert!(matches!(reason, InvalidReason::SecretInvalid(_)));
    // and a good token makes it usable again
    h.write_secret(&[("token", b"t3")]).await;
    h.expect_upserted();
}
