//! The Secret store: formats, parse results kept as they are, exec plugins run on fetch.

mod exec;

use super::*;
use rstest::rstest;
use secrecy::ExposeSecret as _;
use serde_json::json;

fn key() -> CredentialKey {
    CredentialKey::new("karmada-cluster", "member1")
}

fn secret(labels: serde_json::Value, string_data: serde_json::Value) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": "member1", "labels": labels},
        "stringData": string_data,
    }))
    .unwrap()
}

fn store_with(secret: StoredSecret) -> SecretStore {
    let store = SecretStore::new();
    store.insert(key(), secret);
    store
}

#[rstest]
#[case::unlabelled(json!({}), SecretFormat::Karmada)]
#[case::argocd_cluster(json!({"argocd.argoproj.io/secret-type": "cluster"}), SecretFormat::ArgoCd)]
#[case::argocd_repository(json!({"argocd.argoproj.io/secret-type": "repository"}), SecretFormat::Karmada)]
fn the_format_follows_the_argocd_label(
    #[case] labels: serde_json::Value,
    #[case] want: SecretFormat,
) {
    assert_eq!(SecretFormat::of(&secret(labels, json!({}))), want);
}

#[rstest]
#[case::karmada(json!({}), json!({"token": "karmada-token"}), "karmada-token")]
#[case::argocd(
    json!({"argocd.argoproj.io/secret-type": "cluster"}),
    json!({"config": r#"{"bearerToken":"argo-token"}"#}),
    "argo-token"
)]
#[tokio::test]
async fn each_format_is_read_by_its_parser(
    #[case] labels: serde_json::Value,
    #[case] data: serde_json::Value,
    #[case] want: &str,
) {
    let store = store_with(StoredSecret::from_secret(&key(), &secret(labels, data)));
    let cred = store.fetch(&key()).await.unwrap();
    assert_eq!(cred.token().unwrap().expose_secret(), want);
}

#[test]
fn string_data_is_merged_over_data() {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "data": {"token": "b2xk", "caBundle": "Y2E="},
        "stringData": {"token": "new"},
    }))
    .unwrap();
    let data = secret_data(&secret);
    assert_eq!(data["token"].as_ref(), b"new");
    assert_eq!(data["caBundle"].as_ref(), b"ca");
}

#[tokio::test]
async fn a_parse_failure_is_stored_and_returned_as_it_is() {
    let store = store_with(StoredSecret::parsed(Err::<StoredCredential, _>(
        SourceError::EmptyToken,
    )));
    for _ in 0..2 {
        let err = store.fetch(&key()).await.unwrap_err();
        assert!(matches!(err, SourceError::EmptyToken), "{err:?}");
    }
}

#[tokio::test]
async fn a_secret_not_in_the_store_is_not_found() {
    let err = SecretStore::new().fetch(&key()).await.unwrap_err();
    assert!(matches!(err, SourceError::NotFound { key: k } if k == key()));
}

#[test]
fn debug_never_shows_the_token() {
    let secret = StoredSecret::from_secret(&key(), &secret(json!({}), json!({"token": "s3cr3t"})));
    let printed = format!("{secret:?} {:?}", store_with(secret.clone()));
    assert!(!printed.contains("s3cr3t"), "{printed}");
}
