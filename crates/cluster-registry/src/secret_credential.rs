//! The credential one Secret holds, read on its own: for a program that fetched that Secret
//! itself (`tether-credential`) rather than through the registry's watches. An embedder of the
//! registry does not need it: the registry's [`SecretStore`](crate::SecretStore) reads Secrets
//! the same way.
//!
//! The Secret is read as the collector reads it, by the same parsers: an Argo CD cluster Secret
//! (label `argocd.argoproj.io/secret-type=cluster`) by the Argo CD parser; a kubeconfig
//! Secret (key `value` or `value.yaml`, and no `token`) by the kubeconfig parser;
//! anything else as Karmada's (`token`, optional `caBundle`). Which source the Secret came from
//! is not known here, so the kubeconfig keys are what tell a kubeconfig Secret from a Karmada
//! one.
//!
//! An exec plugin is not a credential that can be handed on: it is refused, never run.
//!
//! ```
//! use cluster_registry::secret_credential::credential_in_secret;
//! use k8s_openapi::api::core::v1::Secret;
//! use member_client::CredentialKey;
//! use secrecy::ExposeSecret as _;
//!
//! let secret: Secret = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "member1", "namespace": "karmada-cluster"},
//!     "stringData": {"token": "opaque-token"},
//! })).unwrap();
//! let key = CredentialKey::new("karmada-cluster", "member1");
//! let credential = credential_in_secret(&key, &secret).unwrap();
//! assert_eq!(credential.token().unwrap().expose_secret(), "opaque-token");
//! ```

use k8s_openapi::api::core::v1::Secret;
use member_client::{Credential, CredentialKey, SourceError};

use crate::{
    KubeconfigSecretsConfig, argocd, karmada,
    karmada::LocalSecretReference,
    names::{is_dns1123_label, is_dns1123_subdomain},
    secret_store::{SecretFormat, secret_data},
    stored_credential::StoredCredential,
};

/// The static credential (token and/or client certificate, with its CA bundle) in `secret`,
/// stored under `key`.
///
/// # Errors
/// What [`SecretStore`](crate::SecretStore) reports for the same Secret
/// ([`SourceError::MissingKey`], [`SourceError::Invalid`], the token's and certificate's own
/// errors), and [`SourceError::Invalid`] when the Secret's credential is an exec plugin.
pub fn credential_in_secret(
    key: &CredentialKey,
    secret: &Secret,
) -> Result<Credential, SourceError> {
    let data = secret_data(secret);
    // Flux's keys cover Cluster API's `value` too; the selector and namespaces are unused here.
    let kubeconfig = KubeconfigSecretsConfig::flux(Vec::new(), "");
    let stored = match SecretFormat::of(secret) {
        SecretFormat::ArgoCd => argocd::credential(key, &data)?,
        // A Karmada Secret has `token`; a kubeconfig Secret keeps it inside the kubeconfig.
        SecretFormat::Karmada
            if !data.contains_key(karmada::TOKEN_KEY)
                && kubeconfig.keys.iter().any(|k| data.contains_key(k)) =>
        {
            kubeconfig.credential(key, secret)?
        }
        SecretFormat::Karmada => karmada::credential(key, &data)?.into(),
    };
    match stored {
        StoredCredential::Static(credential) => Ok(credential),
        StoredCredential::Exec(plan) => Err(SourceError::Invalid {
            key: key.clone(),
            reason: format!(
                "its credential is an exec plugin ({}), which only the collector runs; it holds \
                 no token or certificate to hand on",
                plan.config.command
            ),
        }),
    }
}

/// The [`CredentialKey`] of `reference`, checked to name a Secret: the namespace a DNS-1123 label,
/// the name a DNS-1123 subdomain. Anything else (`..`, a `/`) could make a request path name
/// something other than a Secret.
///
/// # Errors
/// [`SourceError::Invalid`] saying which part is not a Kubernetes name.
pub fn secret_ref(reference: &LocalSecretReference) -> Result<CredentialKey, SourceError> {
    let key = CredentialKey::new(&reference.namespace, &reference.name);
    let invalid = |what: &str| SourceError::Invalid {
        key: key.clone(),
        reason: format!("the {what}"),
    };
    if !is_dns1123_label(&reference.namespace) {
        return Err(invalid("namespace is not a DNS-1123 label"));
    }
    if !is_dns1123_subdomain(&reference.name) {
        return Err(invalid("name is not a DNS-1123 subdomain"));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        kubeconfig::fixtures::kubeconfig,
        labels::{ARGOCD_SECRET_TYPE, ARGOCD_SECRET_TYPE_CLUSTER},
        test_ca::{b64, ca_pem, client_pem},
    };
    use member_client::CredentialKind;
    use rstest::rstest;
    use secrecy::ExposeSecret as _;
    use serde_json::{Value, json};

    fn key() -> CredentialKey {
        CredentialKey::new("fleet", "member1")
    }

    fn secret(labels: Value, string_data: Value) -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "member1", "namespace": "fleet", "labels": labels},
            "stringData": string_data,
        }))
        .unwrap()
    }

    fn argocd_labels() -> Value {
        json!({ARGOCD_SECRET_TYPE: ARGOCD_SECRET_TYPE_CLUSTER})
    }

    fn token_of(secret: &Secret) -> String {
        let credential = credential_in_secret(&key(), secret).unwrap();
        credential.token().unwrap().expose_secret().to_owned()
    }

    #[test]
    fn a_karmada_secret_gives_its_token_and_ca_bundle() {
        let ca = ca_pem();
        let s = secret(json!({}), json!({"token": "karmada-tok\n", "caBundle": ca}));
        let credential = credential_in_secret(&key(), &s).unwrap();
        assert_eq!(credential.token().unwrap().expose_secret(), "karmada-tok");
        assert_eq!(credential.ca_bundle().unwrap(), ca.as_bytes());
        assert_eq!(credential.kind(), CredentialKind::Token);
    }

    #[test]
    fn an_argocd_secret_gives_its_bearer_token_even_with_a_value_key() {
        let config = json!({"bearerToken": "argo-tok"}).to_string();
        let s = secret(argocd_labels(), json!({"config": config, "value": "x"}));
        assert_eq!(token_of(&s), "argo-tok");
    }

    #[rstest]
    #[case::cluster_api("value")]
    #[case::flux("value.yaml")]
    fn a_kubeconfig_secret_gives_its_users_token(#[case] data_key: &str) {
        let s = secret(
            json!({}),
            json!({data_key: kubeconfig(&[], &["token: kubeconfig-tok"])}),
        );
        assert_eq!(token_of(&s), "kubeconfig-tok");
    }

    #[test]
    fn a_token_key_makes_it_karmadas_even_beside_a_value_key() {
        let s = secret(
            json!({}),
            json!({"token": "karmada-tok", "value": "not yaml: ["}),
        );
        assert_eq!(token_of(&s), "karmada-tok");
    }

    #[test]
    fn a_kubeconfig_client_certificate_is_the_identity() {
        let (cert, client_key) = client_pem("system:tether");
        let user = [
            format!("client-certificate-data: {}", b64(&cert)),
            format!("client-key-data: {}", b64(&client_key)),
        ];
        let user: Vec<&str> = user.iter().map(String::as_str).collect();
        let s = secret(json!({}), json!({"value": kubeconfig(&[], &user)}));
        let credential = credential_in_secret(&key(), &s).unwrap();
        assert!(credential.token().is_none());
        let identity = credential.identity().unwrap();
        assert_eq!(identity.subject(), "system:tether");
        assert_eq!(credential.expires_at(), Some(identity.not_after()));
    }

    #[test]
    fn an_argocd_certificate_and_token_are_both_kept() {
        let (cert, client_key) = client_pem("argo");
        let config = json!({"bearerToken": "argo-tok", "tlsClientConfig": {
            "certData": b64(&cert), "keyData": b64(&client_key)}});
        let s = secret(argocd_labels(), json!({"config": config.to_string()}));
        let credential = credential_in_secret(&key(), &s).unwrap();
        assert_eq!(credential.token().unwrap().expose_secret(), "argo-tok");
        assert_eq!(credential.identity().unwrap().subject(), "argo");
    }

    #[rstest]
    #[case::kubeconfig(json!({}), json!({"value": kubeconfig(&[], &[
        "exec: {apiVersion: client.authentication.k8s.io/v1, command: /usr/bin/aws}",
    ])}))]
    #[case::argocd(argocd_labels(), json!({"config": json!({"execProviderConfig": {
        "command": "/usr/bin/aws", "apiVersion": "client.authentication.k8s.io/v1beta1"}}).to_string()}))]
    fn an_exec_plugin_is_refused_not_run(#[case] labels: Value, #[case] data: Value) {
        let err = credential_in_secret(&key(), &secret(labels, data)).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, SourceError::Invalid { .. }), "{err:?}");
        assert!(text.contains("exec plugin (/usr/bin/aws)"), "{text}");
        assert!(text.contains("fleet/member1"), "{text}");
    }

    #[rstest]
    #[case::karmada(json!({}), json!({"caBundle": "x"}), "\"token\"")]
    #[case::argocd(argocd_labels(), json!({"name": "m"}), "\"config\"")]
    fn a_secret_without_a_credential_is_missing_key(
        #[case] labels: Value,
        #[case] data: Value,
        #[case] field: &str,
    ) {
        let err = credential_in_secret(&key(), &secret(labels, data)).unwrap_err();
        assert!(matches!(err, SourceError::MissingKey { .. }), "{err:?}");
        assert!(err.to_string().contains(field), "{err}");
    }

    #[test]
    fn errors_never_quote_the_token() {
        let config = r#"{"bearerToken": ["tok-s3cr3t"]}"#;
        let s = secret(argocd_labels(), json!({"config": config}));
        let err = credential_in_secret(&key(), &s).unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
    }

    #[rstest]
    #[case::plain("fleet", "member1", true)]
    #[case::dotted_name("fleet", "member1.kubeconfig", true)]
    #[case::dotted_namespace("fle.et", "member1", false)]
    #[case::parent("fleet", "..", false)]
    #[case::slash("fleet", "a/b", false)]
    #[case::empty_name("fleet", "", false)]
    #[case::empty_namespace("", "member1", false)]
    #[case::upper("fleet", "Member1", false)]
    fn a_secret_ref_must_name_a_secret(
        #[case] namespace: &str,
        #[case] name: &str,
        #[case] ok: bool,
    ) {
        let reference = LocalSecretReference {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let got = secret_ref(&reference);
        assert_eq!(got.is_ok(), ok, "{got:?}");
        if let Ok(key) = got {
            assert_eq!(key, CredentialKey::new(namespace, name));
        }
    }
}
