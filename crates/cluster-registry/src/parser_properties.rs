//! Properties of every registry parser of untrusted input: a Karmada `Cluster` becoming a
//! member, a Secret's credential (Karmada keys and Argo CD's `config` JSON), member files,
//! kubeconfigs ([`kubeconfig`]), and the admission of what they define. For any input: no panic, a typed reason, a name safe for
//! labels, and no token in any error.

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::{ByteString, api::core::v1::Secret};
use member_client::{CredentialKey, test_util::proptest_config as config_of};
use proptest::prelude::*;

mod kubeconfig;
mod provider_file;

use crate::{
    InvalidReason, MemberDefinition,
    admission::Admission,
    argocd,
    karmada::{self, Cluster, ClusterSpec, LocalSecretReference, SyncMode},
    names::is_dns1123_subdomain,
    secret_store::StoredSecret,
};

/// The token every generated input carries; no error may repeat it.
const TOKEN: &str = "tok-3f9a7c1e5b2d8e04";

fn config() -> ProptestConfig {
    config_of(1_000)
}

/// The most bytes a refusal's text may take, whatever the input's size: its detail is
/// written into a condition message and logged, and each part a definition controls goes
/// through `Text` (at most [`member_client::text::Text::MAX_BYTES`]).
const MAX_REASON_BYTES: usize = 4 * member_client::text::Text::MAX_BYTES;

/// Text much longer than anything a field should hold: up to ~160 KiB.
fn long() -> impl Strategy<Value = String> {
    prop_oneof![
        ("[ -~]{1,8}", 1usize..20_000).prop_map(|(unit, n)| unit.repeat(n)),
        ("https://[a-z]{1,4}", 1usize..20_000)
            .prop_map(|(unit, n)| format!("{unit}{}", "a.".repeat(n))),
        ("\\PC{1,4}", 1usize..10_000).prop_map(|(unit, n)| unit.repeat(n)),
    ]
}

/// Strings a definition's author might write: URL-ish, name-ish, or anything.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "https?://[a-z0-9.:@\\[\\]-]{0,30}(/[ -~]{0,10})?",
        "[a-z0-9.-]{0,20}",
        "\\PC{0,40}",
        any::<String>(),
    ]
}

/// Whatever a definition becomes, after admission: a safe name and, if refused, a reason
/// whose text holds no token and no control character.
fn check(definition: MemberDefinition, karmada: bool) -> Result<(), TestCaseError> {
    let admitted = Admission::default().admit(karmada, definition);
    prop_assert!(is_dns1123_subdomain(&admitted.name), "{:?}", admitted.name);
    if let Err(reason) = &admitted.spec {
        check_reason(reason)?;
    }
    Ok(())
}

fn check_reason(reason: &InvalidReason) -> Result<(), TestCaseError> {
    let text = format!("{reason} {reason:?}");
    prop_assert!(!text.contains(TOKEN), "{}", text);
    let shown = reason.to_string();
    prop_assert!(
        shown.len() <= MAX_REASON_BYTES,
        "{} bytes: {}",
        shown.len(),
        shown.chars().take(300).collect::<String>()
    );
    let detail = reason.detail().unwrap_or_default();
    prop_assert!(!detail.chars().any(char::is_control), "{:?}", detail);
    Ok(())
}

/// An error's text and `Debug` hold no token, and its text stays bounded.
fn check_error(err: &(impl std::fmt::Display + std::fmt::Debug)) -> Result<(), TestCaseError> {
    let text = format!("{err} {err:?}");
    prop_assert!(!text.contains(TOKEN), "{}", text);
    let shown = err.to_string();
    prop_assert!(shown.len() <= MAX_REASON_BYTES, "{} bytes", shown.len());
    Ok(())
}

fn check_secret(secret: &StoredSecret) -> Result<(), TestCaseError> {
    secret.credential().err().map_or(Ok(()), check_error)
}

fn secret(labels_argocd: bool, data: BTreeMap<String, Vec<u8>>) -> Secret {
    let mut secret = Secret::default();
    secret.metadata.name = Some("cluster-x".into());
    secret.metadata.namespace = Some("argocd".into());
    if labels_argocd {
        secret.metadata.labels = Some(BTreeMap::from([(
            "argocd.argoproj.io/secret-type".to_owned(),
            "cluster".to_owned(),
        )]));
    }
    secret.data = Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect());
    secret
}

/// Argo CD `config` values: valid JSON with the token in odd places, broken JSON around it.
fn argocd_config() -> impl Strategy<Value = String> {
    let insecure = prop_oneof![Just("true"), Just("false"), Just("\"yes\""), Just("1")];
    let ca = prop_oneof![
        Just("null".to_owned()),
        "\"[A-Za-z0-9+/=]{0,40}\"",
        Just(format!("\"{TOKEN}\""))
    ];
    prop_oneof![
        (insecure, ca).prop_map(|(insecure, ca)| format!(
            r#"{{"bearerToken":"{TOKEN}","tlsClientConfig":{{"insecure":{insecure},"caData":{ca}}}}}"#
        )),
        Just(format!(r#"{{"bearerToken":{TOKEN}}}"#)),
        Just(format!(r#"{{"bearerToken":["{TOKEN}"]}}"#)),
        Just(format!(r#"{{"bearerToken":"{TOKEN}\n{TOKEN}"}}"#)),
        "\\PC{0,30}".prop_map(|junk| format!(r#"{{"bearerToken":"{TOKEN}"{junk}"#)),
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn karmada_clusters_become_members_or_typed_reasons(
        name in text(),
        push in any::<bool>(),
        endpoint in proptest::option::of(text()),
        secret_ref in proptest::option::of((text(), text())),
        insecure in any::<bool>(),
        proxy in proptest::option::of(text()),
    ) {
        let spec = ClusterSpec {
            sync_mode: if push { SyncMode::Push } else { SyncMode::Pull },
            api_endpoint: endpoint,
            secret_ref: secret_ref.map(|(namespace, name)| LocalSecretReference { namespace, name }),
            insecure_skip_tls_verification: insecure,
            proxy_url: proxy,
        };
        let cluster = Cluster::new(&name, spec);
        check(karmada::member_from_cluster(&cluster), true)?;
    }

    #[test]
    fn argocd_secrets_become_members_and_credentials_or_typed_reasons(
        name in proptest::option::of(text()),
        server in proptest::option::of(text()),
        config in proptest::option::of(argocd_config()),
    ) {
        let mut data = BTreeMap::new();
        for (key, value) in [("name", name), ("server", server), ("config", config)] {
            if let Some(value) = value {
                data.insert(key.to_owned(), value.into_bytes());
            }
        }
        let secret = secret(true, data);
        check(argocd::member_from_secret(&secret), false)?;
        check_secret(&StoredSecret::from_secret(&CredentialKey::new("argocd", "cluster-x"), &secret))?;
    }

    #[test]
    fn karmada_secrets_are_credentials_or_typed_errors(
        token in prop_oneof![
            Just(TOKEN.as_bytes().to_vec()),
            Just(format!("{TOKEN}\n{TOKEN}").into_bytes()),
            Just([TOKEN.as_bytes(), &[0xff]].concat()),
            proptest::collection::vec(any::<u8>(), 0..64),
        ],
        ca in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..128)),
    ) {
        let mut data = BTreeMap::from([("token".to_owned(), token)]);
        if let Some(ca) = ca {
            data.insert("caBundle".to_owned(), ca);
        }
        let as_bytes: BTreeMap<_, _> = data.iter().map(|(k, v)| (k.clone(), Bytes::from(v.clone()))).collect();
        let key = CredentialKey::new("karmada-cluster", "m");
        check_secret(&StoredSecret::parsed(karmada::credential(&key, &as_bytes)))?;
        check_secret(&StoredSecret::from_secret(&key, &secret(false, data)))?;
    }

    #[test]
    fn member_files_parse_or_fail_typed(
        yaml in prop_oneof![
            (text(), text(), text(), proptest::option::of(text()), any::<bool>()).prop_map(
                |(name, endpoint, token_file, proxy, insecure)| {
                    let mut yaml = format!(
                        "name: {name:?}\napiEndpoint: {endpoint:?}\ntokenFile: {token_file:?}\n\
                         insecureSkipTLSVerification: {insecure}\n"
                    );
                    if let Some(proxy) = proxy {
                        yaml.push_str(&format!("proxyURL: {proxy:?}\n"));
                    }
                    yaml
                }
            ),
            "\\PC{0,120}",
            any::<String>(),
        ],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.yaml");
        std::fs::write(&path, &yaml).unwrap();
        check(crate::directory::read_member_blocking(dir.path(), path).definition, false)?;
    }
}

proptest! {
    #![proptest_config(config_of(256))]

    /// Inputs far longer than any field should be: every refusal's text stays bounded.
    #[test]
    fn oversized_definitions_give_bounded_reasons(
        name in prop_oneof![text(), long()],
        endpoint in prop_oneof![text(), long()],
        secret_ref in (prop_oneof![text(), long()], prop_oneof![text(), long()]),
        proxy in proptest::option::of(long()),
        config in prop_oneof![argocd_config(), long()],
    ) {
        let spec = ClusterSpec {
            sync_mode: SyncMode::Push,
            api_endpoint: Some(endpoint.clone()),
            secret_ref: Some(LocalSecretReference { namespace: secret_ref.0, name: secret_ref.1 }),
            insecure_skip_tls_verification: false,
            proxy_url: proxy.clone(),
        };
        check(karmada::member_from_cluster(&Cluster::new(&name, spec)), true)?;
        let data = BTreeMap::from([
            ("name".to_owned(), name.clone().into_bytes()),
            ("server".to_owned(), endpoint.clone().into_bytes()),
            ("config".to_owned(), config.into_bytes()),
        ]);
        let secret = secret(true, data);
        check(argocd::member_from_secret(&secret), false)?;
        check_secret(&StoredSecret::from_secret(&CredentialKey::new("argocd", "cluster-x"), &secret))?;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.yaml");
        let mut yaml = format!("name: {name:?}\napiEndpoint: {endpoint:?}\ntokenFile: {endpoint:?}\n");
        if let Some(proxy) = proxy {
            yaml.push_str(&format!("proxyURL: {proxy:?}\n"));
        }
        std::fs::write(&path, &yaml).unwrap();
        check(crate::directory::read_member_blocking(dir.path(), path).definition, false)?;
    }
}
