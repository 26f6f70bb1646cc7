//! Federated members: a definition gets its own federated credential, and only where the
//! registry mints them; no Secret is waited for or watched.

use bytes::Bytes;
use serde_json::json;

use super::*;
use crate::{
    federation::{CA_BUNDLE_ANNOTATION, CREDENTIAL_ANNOTATION, Federation},
    test_ca::ca_pem,
};

/// The Karmada Cluster `name` that asks for a federated credential, verified with `ca`.
fn federated_cluster(name: &str, ca: &str) -> MemberDefinition {
    let cluster: karmada::Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {
            "name": name,
            "annotations": { CREDENTIAL_ANNOTATION: "federated", CA_BUNDLE_ANNOTATION: ca },
        },
        "spec": { "syncMode": "Push", "apiEndpoint": "https://10.0.0.1:6443" },
    }))
    .unwrap();
    karmada::member_from_cluster(&cluster)
}

fn federated_harness() -> Harness {
    harness_with(SecretStore::new(), true)
}

#[tokio::test]
async fn a_federated_member_is_ready_with_its_own_key_and_its_ca_without_any_secret() {
    let mut h = federated_harness();
    let ca = ca_pem();
    h.define("member1", federated_cluster("member1", &ca)).await;

    match h.next() {
        Some(RegistryEvent::Upserted { spec, ca_bundle }) => {
            assert_eq!(spec.secret_ref, CredentialKey::federated("member1"));
            assert_eq!(
                spec.federation,
                Some(Federation::new(Some(Bytes::from(ca.clone()))))
            );
            assert_eq!(ca_bundle, Some(Bytes::from(ca)));
        }
        other => panic!("expected Upserted, got {other:?}"),
    }
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
    assert!(
        h.table.karmada_secret_namespaces().is_empty(),
        "no Secret namespace is watched for a federated member"
    );
}

#[tokio::test]
async fn without_federation_a_federated_member_says_why() {
    let mut h = harness();
    h.define("member1", federated_cluster("member1", &ca_pem()))
        .await;
    let reason = h.expect_invalid("member1");
    assert_eq!(reason.condition_reason(), "DefinitionInvalid");
    assert!(
        reason.to_string().contains("--federated-service-account"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_definition_naming_another_members_federated_key_is_refused() {
    let mut h = federated_harness();
    let mut stolen = spec("member1", "https://10.0.0.1:6443");
    stolen.secret_ref = CredentialKey::federated("member2");
    stolen.federation = Some(Federation::default());
    h.define("member1", def_with("member1", stolen)).await;
    assert_eq!(
        h.expect_invalid("member1").condition_reason(),
        "SecretForbidden"
    );
}

#[tokio::test]
async fn a_federated_key_without_federation_is_refused() {
    let mut h = federated_harness();
    let mut posing = spec("member1", "https://10.0.0.1:6443");
    posing.secret_ref = CredentialKey::federated("member1");
    h.define("member1", def_with("member1", posing)).await;
    assert_eq!(
        h.expect_invalid("member1").condition_reason(),
        "SecretForbidden"
    );
}
