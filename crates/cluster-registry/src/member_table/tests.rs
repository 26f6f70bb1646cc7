use std::{collections::BTreeMap, time::Duration};

use member_client::TokenCacheConfig;
use secrecy::ExposeSecret as _;

use super::*;
use crate::test_ca::ca_pem;

struct Harness {
    table: MemberTable,
    events: mpsc::Receiver<RegistryEvent>,
    tokens: TokenCache,
    views: SharedViews,
}

fn harness() -> Harness {
    let store = SecretStore::new();
    let tokens = TokenCache::new(store.clone(), TokenCacheConfig::default());
    let (tx, events) = mpsc::channel(64);
    let views = SharedViews::default();
    let table = MemberTable::new(tokens.clone(), store, tx, views.clone());
    Harness {
        table,
        events,
        tokens,
        views,
    }
}

impl Harness {
    fn next(&mut self) -> Option<RegistryEvent> {
        self.events.try_recv().ok()
    }

    fn state(&self, name: &str) -> Option<MemberState> {
        self.views
            .read()
            .unwrap()
            .get(name)
            .map(|v| v.state.clone())
    }
}

fn key(name: &str) -> SecretRef {
    SecretRef::new("karmada-cluster", name)
}

fn spec(name: &str, endpoint: &str) -> MemberSpec {
    MemberSpec {
        name: name.to_owned(),
        api_endpoint: endpoint.to_owned(),
        secret_ref: key(name),
        insecure_skip_tls_verify: false,
        proxy_url: None,
    }
}

fn def(name: &str) -> MemberDefinition {
    MemberDefinition {
        name: name.to_owned(),
        spec: Ok(spec(name, "https://10.0.0.1:6443")),
    }
}

/// member1's Secret with these data, parsed as the Karmada source parses it.
fn secret(pairs: &[(&str, &[u8])]) -> StoredSecret {
    let data: BTreeMap<String, Bytes> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Bytes::copy_from_slice(v)))
        .collect();
    StoredSecret::parsed(crate::karmada::credential(&key("member1"), &data))
}

fn karmada(name: &str) -> Origin {
    Origin::Karmada(name.to_owned())
}

/// member1 defined, its Secret holding `token`, its namespace listed; the Upserted consumed.
async fn ready_member1(h: &mut Harness, token: &[u8]) {
    h.table
        .apply_secret(key("member1"), secret(&[("token", token)]))
        .await
        .unwrap();
    h.table
        .apply_definition(karmada("member1"), def("member1"))
        .await
        .unwrap();
    h.table.namespace_listed("karmada-cluster").await.unwrap();
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Upserted {
            spec: spec("member1", "https://10.0.0.1:6443"),
            ca_bundle: None,
        })
    );
}

#[tokio::test]
async fn karmada_members_wait_for_their_namespace_to_be_listed() {
    let mut h = harness();
    h.table
        .apply_definition(karmada("member1"), def("member1"))
        .await
        .unwrap();
    assert_eq!(
        h.next(),
        None,
        "nothing is said before the Secrets are listed"
    );
    assert_eq!(h.state("member1"), Some(MemberState::Pending));
    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t1")]))
        .await
        .unwrap();
    h.table.namespace_listed("karmada-cluster").await.unwrap();
    assert!(matches!(h.next(), Some(RegistryEvent::Upserted { .. })));
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
}

#[tokio::test]
async fn a_refused_list_makes_waiting_members_secret_forbidden_until_it_is_listed() {
    let mut h = harness();
    h.table
        .apply_definition(karmada("member1"), def("member1"))
        .await
        .unwrap();
    let refusal = "secrets is forbidden: cannot list resource \"secrets\"".to_owned();
    h.table
        .namespace_forbidden("karmada-cluster", refusal.clone())
        .await
        .unwrap();
    let forbidden = InvalidReason::SecretForbidden(refusal.clone());
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Invalid {
            name: "member1".into(),
            reason: forbidden.clone()
        })
    );
    assert_eq!(
        h.state("member1"),
        Some(MemberState::Invalid { reason: forbidden })
    );
    // The watch retries and is refused again: nothing new to say.
    h.table
        .namespace_forbidden("karmada-cluster", refusal)
        .await
        .unwrap();
    assert_eq!(h.next(), None);

    // RBAC granted: the retry lists, and the member is used.
    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t1")]))
        .await
        .unwrap();
    h.table.namespace_listed("karmada-cluster").await.unwrap();
    assert!(matches!(h.next(), Some(RegistryEvent::Upserted { .. })));
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
}

#[tokio::test]
async fn a_refusal_after_a_list_keeps_what_was_listed() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    h.table
        .namespace_forbidden("karmada-cluster", "RBAC revoked".into())
        .await
        .unwrap();
    assert_eq!(h.next(), None);
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
}

#[tokio::test]
async fn a_missing_secret_is_secret_not_found_until_it_appears() {
    let mut h = harness();
    h.table.namespace_listed("karmada-cluster").await.unwrap();
    h.table
        .apply_definition(karmada("member1"), def("member1"))
        .await
        .unwrap();
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Invalid {
            name: "member1".into(),
            reason: InvalidReason::SecretNotFound
        })
    );
    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t1")]))
        .await
        .unwrap();
    assert!(matches!(h.next(), Some(RegistryEvent::Upserted { .. })));
}

#[tokio::test]
async fn a_new_token_invalidates_the_cache_before_rotated_is_sent() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let cached = h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(cached.token().expose_secret(), "t1");
    let before = h.tokens.stats().invalidations;

    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t2\n")]))
        .await
        .unwrap();
    assert_eq!(
        h.next(),
        Some(RegistryEvent::CredentialsRotated {
            name: "member1".into(),
            secret: key("member1")
        })
    );
    assert_eq!(h.tokens.stats().invalidations, before + 1);
    let fresh = h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(fresh.token().expose_secret(), "t2");
}

#[tokio::test]
async fn unrelated_secret_changes_neither_invalidate_nor_notify() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let before = h.tokens.stats().invalidations;
    // another key, and the same token with different surrounding whitespace
    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t1"), ("note", b"x")]))
        .await
        .unwrap();
    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t1\n")]))
        .await
        .unwrap();
    assert_eq!(h.next(), None);
    assert_eq!(h.tokens.stats().invalidations, before);
}

#[tokio::test]
async fn a_new_ca_bundle_is_an_upsert_that_carries_it() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let ca = ca_pem();
    h.table
        .apply_secret(
            key("member1"),
            secret(&[("token", b"t1"), ("caBundle", ca.as_bytes())]),
        )
        .await
        .unwrap();
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
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    h.tokens.get(&key("member1")).await.unwrap();
    h.table.remove_secret(&key("member1")).await.unwrap();
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Invalid {
            name: "member1".into(),
            reason: InvalidReason::SecretNotFound
        })
    );
    let err = h.tokens.get(&key("member1")).await.unwrap_err();
    assert!(matches!(*err, SourceError::NotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn garbage_in_the_secret_is_secret_invalid() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    h.table
        .apply_secret(key("member1"), secret(&[("token", &[0xff, 0xfe])]))
        .await
        .unwrap();
    let Some(RegistryEvent::Invalid {
        reason: InvalidReason::SecretInvalid(why),
        ..
    }) = h.next()
    else {
        panic!("expected SecretInvalid");
    };
    assert!(why.contains("UTF-8"), "{why}");
    // a different kind of garbage is a new reason
    h.table
        .apply_secret(key("member1"), secret(&[("nothing", b"")]))
        .await
        .unwrap();
    assert!(matches!(
        h.next(),
        Some(RegistryEvent::Invalid {
            reason: InvalidReason::SecretInvalid(_),
            ..
        })
    ));
    // and a good token makes it usable again
    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t3")]))
        .await
        .unwrap();
    assert!(matches!(h.next(), Some(RegistryEvent::Upserted { .. })));
}

#[tokio::test]
async fn removing_a_member_says_removed_once() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    h.table
        .remove_definition(&karmada("member1"))
        .await
        .unwrap();
    assert_eq!(h.next(), Some(RegistryEvent::Removed("member1".into())));
    h.table
        .remove_definition(&karmada("member1"))
        .await
        .unwrap();
    assert_eq!(h.next(), None);
    assert_eq!(h.state("member1"), None);
}

#[tokio::test]
async fn removing_a_pending_member_says_nothing() {
    let mut h = harness();
    h.table
        .apply_definition(karmada("member1"), def("member1"))
        .await
        .unwrap();
    h.table
        .remove_definition(&karmada("member1"))
        .await
        .unwrap();
    assert_eq!(h.next(), None);
}

#[tokio::test]
async fn an_invalid_member_leaves_the_others_alone() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let bad = MemberDefinition {
        name: "member2".into(),
        spec: Err(InvalidReason::EndpointInvalid("no".into())),
    };
    h.table
        .apply_definition(karmada("member2"), bad)
        .await
        .unwrap();
    assert!(matches!(h.next(), Some(RegistryEvent::Invalid { name, .. }) if name == "member2"));
    assert_eq!(h.next(), None);
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
}

#[tokio::test]
async fn a_changed_endpoint_is_an_upsert() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let mut moved = def("member1");
    moved.spec = Ok(spec("member1", "https://10.0.0.2:6443"));
    h.table
        .apply_definition(karmada("member1"), moved)
        .await
        .unwrap();
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Upserted {
            spec: spec("member1", "https://10.0.0.2:6443"),
            ca_bundle: None,
        })
    );
    // applying the same definition again says nothing
    h.table
        .apply_definition(karmada("member1"), def("member1"))
        .await
        .unwrap();
    h.next();
    h.table
        .apply_definition(karmada("member1"), def("member1"))
        .await
        .unwrap();
    assert_eq!(h.next(), None);
}

#[tokio::test]
async fn a_duplicate_name_waits_until_the_first_definition_goes() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let file = Origin::File("/m/member1.yaml".into());
    let mut other = def("member1");
    other.spec = Ok(spec("member1", "https://10.9.9.9"));
    h.table.apply_definition(file.clone(), other).await.unwrap();
    assert_eq!(h.next(), None, "the first definition stays in use");
    h.table
        .remove_definition(&karmada("member1"))
        .await
        .unwrap();
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Upserted {
            spec: spec("member1", "https://10.9.9.9"),
            ca_bundle: None,
        })
    );
}

#[tokio::test]
async fn a_renamed_member_is_removed_then_upserted() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let mut renamed = def("member1");
    renamed.name = "member9".into();
    renamed.spec = Ok(MemberSpec {
        name: "member9".into(),
        ..spec("member1", "https://10.0.0.1:6443")
    });
    h.table
        .apply_definition(karmada("member1"), renamed)
        .await
        .unwrap();
    assert_eq!(h.next(), Some(RegistryEvent::Removed("member1".into())));
    assert!(
        matches!(h.next(), Some(RegistryEvent::Upserted { spec: s, .. }) if s.name == "member9")
    );
}

#[tokio::test]
async fn two_members_sharing_a_secret_both_hear_of_a_rotation() {
    let mut h = harness();
    ready_member1(&mut h, b"t1").await;
    let mut twin = def("twin");
    twin.spec = Ok(MemberSpec {
        name: "twin".into(),
        ..spec("member1", "https://10.0.0.3")
    });
    h.table
        .apply_definition(karmada("twin"), twin)
        .await
        .unwrap();
    assert!(matches!(h.next(), Some(RegistryEvent::Upserted { .. })));
    let before = h.tokens.stats().invalidations;
    h.table
        .apply_secret(key("member1"), secret(&[("token", b"t2")]))
        .await
        .unwrap();
    let mut rotated = vec![
        h.next().unwrap().member().to_owned(),
        h.next().unwrap().member().to_owned(),
    ];
    rotated.sort();
    assert_eq!(rotated, ["member1", "twin"]);
    assert_eq!(
        h.tokens.stats().invalidations,
        before + 1,
        "one invalidation for the shared Secret"
    );
}

#[tokio::test]
async fn a_dropped_receiver_stops_the_table() {
    let mut h = harness();
    drop(h.events);
    h.table.namespace_listed("karmada-cluster").await.unwrap();
    let closed = tokio::time::timeout(
        Duration::from_secs(5),
        h.table.apply_definition(karmada("member1"), def("member1")),
    )
    .await
    .unwrap();
    assert!(closed.is_err());
}
