//! A scoped store: a member whose credential is not held is judged as any other, without its
//! token in memory; holding it reads its Secret once; releasing it drops the token.

use std::sync::{
    Mutex,
    atomic::{AtomicUsize, Ordering},
};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use member_client::SourceError;
use secrecy::ExposeSecret as _;
use serde_json::json;

use super::*;
use crate::{
    secret_reader::{SecretGet, SecretReader},
    test_ca::ca_pem,
};

/// An API holding Secrets in memory, with a watch cache that may lag behind, counting the
/// reads of each.
#[derive(Clone, Default)]
struct FakeApi {
    secrets: Arc<Mutex<BTreeMap<CredentialKey, Secret>>>,
    /// What the watch cache serves where it differs from storage.
    behind: Arc<Mutex<BTreeMap<CredentialKey, Secret>>>,
    reads: Arc<AtomicUsize>,
    storage_reads: Arc<AtomicUsize>,
}

#[async_trait]
impl SecretGet for FakeApi {
    async fn get(&self, key: &CredentialKey, cached: bool) -> Result<Option<Secret>, SourceError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if !cached {
            self.storage_reads.fetch_add(1, Ordering::SeqCst);
        }
        let behind = cached.then(|| self.behind.lock().unwrap().get(key).cloned());
        Ok(behind
            .flatten()
            .or_else(|| self.secrets.lock().unwrap().get(key).cloned()))
    }
}

struct Scoped {
    h: Harness,
    api: FakeApi,
    reader: SecretReader,
    store: SecretStore,
    /// The CA bundle member1's Secret carries.
    ca: String,
}

impl Scoped {
    fn new() -> Self {
        let store = SecretStore::new().scoped();
        let api = FakeApi::default();
        let reader = SecretReader::new(api.clone(), Arc::new(StoredSecret::from_secret));
        Self {
            h: harness_over(store.clone()),
            api,
            reader,
            store,
            ca: ca_pem(),
        }
    }

    /// member1's Secret becomes `string_data` (labelled for `bound_to`), in the API and
    /// through the watch.
    async fn write(&mut self, bound_to: &str, string_data: serde_json::Value) {
        let secret = k8s_secret(bound_to, string_data);
        let key = key("member1");
        (self.api.secrets.lock().unwrap()).insert(key.clone(), secret.clone());
        let stored = self.reader.stored(&key, &secret);
        self.h.table.apply_secret(key, stored).await.unwrap();
    }

    /// member1 defined, its namespace listed, its Secret holding `tok-1` and a CA; the Upserted
    /// is checked and consumed.
    async fn ready() -> Self {
        let mut s = Self::new();
        s.write(
            "member1",
            json!({"token": "tok-1", "caBundle": s.ca.clone()}),
        )
        .await;
        s.h.define("member1", def("member1")).await;
        s.h.list_namespace().await;
        match s.h.next() {
            Some(RegistryEvent::Upserted { ca_bundle, .. }) => {
                assert_eq!(ca_bundle.as_deref(), Some(s.ca.as_bytes()));
            }
            other => panic!("expected Upserted, got {other:?}"),
        }
        s
    }

    fn reads(&self) -> usize {
        self.api.reads.load(Ordering::SeqCst)
    }
}

fn k8s_secret(bound_to: &str, string_data: serde_json::Value) -> Secret {
    serde_json::from_value(json!({
        "metadata": {
            "name": "member1",
            "namespace": "karmada-cluster",
            "labels": {crate::MEMBER_LABEL: bound_to},
        },
        "stringData": string_data,
    }))
    .unwrap()
}

#[tokio::test]
async fn a_member_not_held_is_ready_with_its_ca_and_without_its_token() {
    let s = Scoped::ready().await;
    let stored = s.store.get(&key("member1")).unwrap();
    assert!(!stored.holds_credential());
    assert_eq!(s.store.credentials_held(), 0);
    assert!(!format!("{stored:?}").contains("tok-1"), "{stored:?}");
    assert_eq!(s.reads(), 0);
}

#[tokio::test]
async fn holding_reads_the_secret_once_and_keeps_its_credential() {
    let mut s = Scoped::ready().await;
    s.store.hold(&key("member1"));
    let credential = s.h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(credential.token().unwrap().expose_secret(), "tok-1");
    assert_eq!(credential.ca_bundle().unwrap().as_ref(), s.ca.as_bytes());
    assert_eq!(s.reads(), 1);
    assert_eq!(
        s.api.storage_reads.load(Ordering::SeqCst),
        0,
        "the cache had it"
    );
    assert_eq!(s.store.credentials_held(), 1);
    // Kept: the next miss is a lookup, not a read.
    s.h.tokens.invalidate(&key("member1")).await;
    s.h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(s.reads(), 1);
    // Reading it again told the consumer nothing.
    assert_eq!(s.h.next(), None);
}

#[tokio::test]
async fn a_rotation_while_withheld_is_told_and_the_new_token_is_read() {
    let mut s = Scoped::ready().await;
    s.write(
        "member1",
        json!({"token": "tok-1", "caBundle": s.ca.clone()}),
    )
    .await;
    assert_eq!(s.h.next(), None, "the same content is no change");
    s.write("member1", json!({"token": "t2", "caBundle": s.ca.clone()}))
        .await;
    s.h.expect_rotated("member1", key("member1"));
    s.store.hold(&key("member1"));
    let credential = s.h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(credential.token().unwrap().expose_secret(), "t2");
}

#[tokio::test]
async fn a_held_credential_is_kept_through_rotations_and_dropped_on_release() {
    let mut s = Scoped::ready().await;
    s.store.hold(&key("member1"));
    s.write("member1", json!({"token": "t2", "caBundle": s.ca.clone()}))
        .await;
    s.h.expect_rotated("member1", key("member1"));
    assert!(s.store.get(&key("member1")).unwrap().holds_credential());
    let credential = s.h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(credential.token().unwrap().expose_secret(), "t2");
    assert_eq!(s.reads(), 0, "a held Secret comes from the watch");

    s.store.release(&key("member1"));
    assert!(!s.store.get(&key("member1")).unwrap().holds_credential());
    assert_eq!(s.store.credentials_held(), 0);
    assert_eq!(s.h.next(), None, "releasing tells the consumer nothing");
    assert_eq!(
        s.h.state("member1"),
        Some(MemberState::Ready),
        "and judges the member as before"
    );
}

#[tokio::test]
async fn a_secret_rebound_while_withheld_is_not_handed_out() {
    let s = Scoped::ready().await;
    // Relabelled for member2 in the API; the watch has not told yet.
    let moved = k8s_secret("member2", json!({"token": "tok-1"}));
    (s.api.secrets.lock().unwrap()).insert(key("member1"), moved);
    s.store.hold(&key("member1"));
    let err = s.h.tokens.get(&key("member1")).await.unwrap_err();
    assert!(err.to_string().contains("member1"), "{err}");
    assert!(!s.store.get(&key("member1")).unwrap().holds_credential());
}

#[tokio::test]
async fn a_withheld_secret_gone_from_the_api_is_not_found() {
    let s = Scoped::ready().await;
    s.api.secrets.lock().unwrap().clear();
    s.store.hold(&key("member1"));
    let err = s.h.tokens.get(&key("member1")).await.unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
}

#[tokio::test]
async fn a_watch_cache_behind_the_watch_is_read_past() {
    let s = Scoped::ready().await;
    // The apiserver's cache still serves the token before tok-1.
    let old = k8s_secret("member1", json!({"token": "t0", "caBundle": s.ca.clone()}));
    (s.api.behind.lock().unwrap()).insert(key("member1"), old);
    s.store.hold(&key("member1"));
    let credential = s.h.tokens.get(&key("member1")).await.unwrap();
    assert_eq!(credential.token().unwrap().expose_secret(), "tok-1");
    assert_eq!(s.api.storage_reads.load(Ordering::SeqCst), 1);
}
