//! The member table without any apiserver: a harness that feeds it definitions and Secrets and
//! reads what it tells the consumer, and one file per concern.

mod bindings;
mod definitions;
mod federated;
mod member_files;
mod namespaces;
mod scope;
mod secrets;

use std::collections::BTreeMap;

use member_client::{CredentialCacheConfig, validation::MemberEndpoint};

use super::*;
use crate::karmada;

struct Harness {
    table: MemberTable,
    events: mpsc::Receiver<RegistryEvent>,
    tokens: CredentialCache,
    views: SharedViews,
}

/// Tests define members at `https://h...` and loopback, in `ns`.
fn test_admission() -> crate::admission::Admission {
    crate::admission::Admission {
        policy: member_client::validation::EndpointPolicy::loopback().allow_insecure_tls(true),
        secret_namespaces: ["ns", "karmada-cluster"].map(str::to_owned).into(),
    }
}

fn harness() -> Harness {
    harness_over(SecretStore::new())
}

/// A harness whose table keeps its Secrets in `store`.
fn harness_over(store: SecretStore) -> Harness {
    harness_with(store, false)
}

/// A harness whose table keeps its Secrets in `store`, and whose federated members get a
/// credential if `federation`.
fn harness_with(store: SecretStore, federation: bool) -> Harness {
    let tokens = CredentialCache::new(store.clone(), CredentialCacheConfig::default());
    let (tx, events) = mpsc::channel(64);
    let views = SharedViews::default();
    let table = MemberTable::new(tokens.clone(), store, tx, views.clone(), test_admission());
    let table = if federation {
        table.with_federation()
    } else {
        table
    };
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

    fn origin(&self, name: &str) -> Option<Origin> {
        self.views.read().unwrap().get(name)?.origin.clone()
    }

    /// Defines `definition` as the Karmada Cluster `cluster`.
    async fn define(&mut self, cluster: &str, definition: MemberDefinition) {
        self.table
            .apply_definition(karmada_origin(cluster), definition)
            .await
            .unwrap();
    }

    /// Deletes the Karmada Cluster `cluster`.
    async fn undefine(&mut self, cluster: &str) {
        self.table
            .remove_definition(&karmada_origin(cluster))
            .await
            .unwrap();
    }

    /// Writes member1's Secret with these data.
    async fn write_secret(&mut self, pairs: &[(&str, &[u8])]) {
        self.table
            .apply_secret(key("member1"), secret(pairs))
            .await
            .unwrap();
    }

    /// The Secrets of member1's namespace have been listed.
    async fn list_namespace(&mut self) {
        self.table
            .namespace_listed("karmada-cluster")
            .await
            .unwrap();
    }

    /// The next event, which must be `CredentialsRotated` for `name`, whose credential is
    /// stored under `secret`.
    fn expect_rotated(&mut self, name: &str, secret: CredentialKey) {
        let name = name.to_owned();
        let rotated = RegistryEvent::CredentialsRotated { name, secret };
        assert_eq!(self.next(), Some(rotated));
    }

    /// The next event, which must be `Upserted`; returns its spec.
    fn expect_upserted(&mut self) -> MemberSpec {
        match self.next() {
            Some(RegistryEvent::Upserted { spec, .. }) => spec,
            other => panic!("expected Upserted, got {other:?}"),
        }
    }

    /// The next event, which must be `Invalid` for `name`; returns its reason.
    fn expect_invalid(&mut self, name: &str) -> InvalidReason {
        match self.next() {
            Some(RegistryEvent::Invalid { name: n, reason }) if n == name => reason,
            other => panic!("expected Invalid for {name}, got {other:?}"),
        }
    }
}

fn key(name: &str) -> CredentialKey {
    CredentialKey::new("karmada-cluster", name)
}

fn spec(name: &str, endpoint: &str) -> MemberSpec {
    MemberSpec {
        name: name.to_owned(),
        endpoint: MemberEndpoint::new(endpoint),
        secret_ref: key(name),
        federation: None,
        mint_request: None,
    }
}

fn def(name: &str) -> MemberDefinition {
    def_with(name, spec(name, "https://10.0.0.1:6443"))
}

/// `def(name)` with its spec replaced by `spec`.
fn def_with(name: &str, spec: MemberSpec) -> MemberDefinition {
    MemberDefinition {
        name: name.to_owned(),
        spec: Ok(spec),
    }
}

/// A member `name` at `endpoint` whose credential is member1's Secret.
fn sharing_member1s_secret(name: &str, endpoint: &str) -> MemberDefinition {
    let spec = MemberSpec {
        name: name.to_owned(),
        ..spec("member1", endpoint)
    };
    def_with(name, spec)
}

/// member1's Secret with these data, parsed as the Karmada source parses it.
fn secret(pairs: &[(&str, &[u8])]) -> StoredSecret {
    let data: BTreeMap<String, Bytes> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Bytes::copy_from_slice(v)))
        .collect();
    StoredSecret::parsed(karmada::credential(&key("member1"), &data))
}

fn karmada_origin(name: &str) -> Origin {
    Origin::Karmada(name.to_owned())
}

/// A harness where member1 is defined, its Secret holds the token `t1` and its namespace is
/// listed; the Upserted is consumed.
async fn ready_member1() -> Harness {
    let mut h = harness();
    h.write_secret(&[("token", b"t1")]).await;
    h.define("member1", def("member1")).await;
    h.list_namespace().await;
    assert_eq!(
        h.next(),
        Some(RegistryEvent::Upserted {
            spec: spec("member1", "https://10.0.0.1:6443"),
            ca_bundle: None,
        })
    );
    h
}
