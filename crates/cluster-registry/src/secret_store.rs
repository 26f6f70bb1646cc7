//! The in-memory Secret store the registry's watches feed, and the credential source over it.

use std::{collections::BTreeMap, fmt, sync::Arc};

use async_trait::async_trait;
use bytes::Bytes;
use dashmap::DashMap;
use k8s_openapi::api::core::v1::Secret;
use member_client::{Credential, CredentialSource, SecretRef, SourceError, validation};

use crate::{argocd, karmada, labels};

/// How a Secret holds its credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecretFormat {
    /// Karmada's keys: `token` (required) and `caBundle` (PEM, optional). Member files use it
    /// too.
    Karmada,
    /// Argo CD's `config` JSON: `bearerToken` and `tlsClientConfig.caData` (base64 of PEM).
    ArgoCd,
}

impl SecretFormat {
    /// The format of `secret`: [`ArgoCd`](Self::ArgoCd) if it carries the label
    /// `argocd.argoproj.io/secret-type=cluster`, else [`Karmada`](Self::Karmada).
    pub fn of(secret: &Secret) -> Self {
        if labels::is_argocd_cluster(secret.metadata.labels.iter().flatten()) {
            Self::ArgoCd
        } else {
            Self::Karmada
        }
    }
}

/// One Secret as the store keeps it: its format and data, nothing else.
///
/// `Debug` shows the format and the data keys, never the values.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSecret {
    format: SecretFormat,
    data: BTreeMap<String, Bytes>,
    /// Set when a file-backed secret could not be read whole (a missing CA file, say).
    unreadable: Option<String>,
}

impl StoredSecret {
    /// Keeps what the store needs of `secret`: its [`SecretFormat`] and its data
    /// (`stringData` merged over `data`).
    pub fn from_secret(secret: &Secret) -> Self {
        Self {
            format: SecretFormat::of(secret),
            data: argocd::secret_data(secret),
            unreadable: None,
        }
    }

    /// A [`Karmada`](SecretFormat::Karmada)-format secret with these data.
    pub fn karmada(data: BTreeMap<String, Bytes>) -> Self {
        Self {
            format: SecretFormat::Karmada,
            data,
            unreadable: None,
        }
    }

    /// A secret that exists but could not be read whole; its credential is
    /// [`SourceError::Invalid`] with `reason`.
    pub(crate) fn unreadable(reason: String) -> Self {
        Self {
            format: SecretFormat::Karmada,
            data: BTreeMap::new(),
            unreadable: Some(reason),
        }
    }

    /// How it holds its credential.
    pub fn format(&self) -> SecretFormat {
        self.format
    }

    /// Parses the credential, as the [`TokenCache`](member_client::TokenCache) will get it.
    ///
    /// # Errors
    /// [`SourceError::MissingKey`] (no `token`, no `config`, no `config.bearerToken`),
    /// [`SourceError::EmptyToken`], [`SourceError::TokenNotUtf8`],
    /// [`SourceError::TokenNotHeaderSafe`], or [`SourceError::Invalid`] (a CA bundle that is
    /// not PEM, a `config` that is not JSON).
    pub fn credential(&self, key: &SecretRef) -> Result<Credential, SourceError> {
        if let Some(reason) = &self.unreadable {
            return Err(SourceError::Invalid {
                key: key.clone(),
                reason: reason.clone(),
            });
        }
        match self.format {
            SecretFormat::Karmada => karmada_credential(key, &self.data),
            SecretFormat::ArgoCd => argocd::credential(key, &self.data),
        }
    }
}

impl fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredSecret")
            .field("format", &self.format)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .field("unreadable", &self.unreadable)
            .finish()
    }
}

fn karmada_credential(
    key: &SecretRef,
    data: &BTreeMap<String, Bytes>,
) -> Result<Credential, SourceError> {
    let token = data
        .get(karmada::TOKEN_KEY)
        .ok_or_else(|| SourceError::MissingKey {
            key: key.clone(),
            field: karmada::TOKEN_KEY.to_owned(),
        })?;
    let credential = Credential::from_token_bytes(token)?;
    // An empty caBundle is what `kubectl karmada join` writes for insecure members: no bundle.
    match data.get(karmada::CA_BUNDLE_KEY).filter(|ca| !ca.is_empty()) {
        None => Ok(credential),
        Some(ca) => {
            validation::ca_bundle(ca).map_err(|err| SourceError::Invalid {
                key: key.clone(),
                reason: format!("{}: {}", karmada::CA_BUNDLE_KEY, err.detail()),
            })?;
            Ok(credential.with_ca_bundle(ca.clone()))
        }
    }
}

/// The Secrets that members reference, in memory, keyed by [`SecretRef`].
///
/// The registry's watches write it; the [`TokenCache`](member_client::TokenCache) reads it
/// through its [`CredentialSource`] impl, so a cache miss costs a map lookup and a parse, never
/// an API call.
///
/// # Concurrent calls
/// Cloning is cheap (one `Arc`). Reads take a shard lock for the lookup only and copy an `Arc`
/// out. A read sees the Secret as of the last watch event the registry processed: it is as
/// stale as the watch (milliseconds on a healthy control plane).
#[derive(Clone, Default)]
pub struct SecretStore {
    entries: Arc<DashMap<SecretRef, Arc<StoredSecret>>>,
}

impl SecretStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The Secret stored under `key`.
    pub fn get(&self, key: &SecretRef) -> Option<Arc<StoredSecret>> {
        self.entries.get(key).map(|e| Arc::clone(e.value()))
    }

    /// How many Secrets are stored.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no Secret is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Stores `secret` under `key` and returns what was there.
    pub(crate) fn insert(&self, key: SecretRef, secret: StoredSecret) -> Option<Arc<StoredSecret>> {
        self.entries.insert(key, Arc::new(secret))
    }

    /// Removes `key` and returns what was there.
    pub(crate) fn remove(&self, key: &SecretRef) -> Option<Arc<StoredSecret>> {
        self.entries.remove(key).map(|(_, v)| v)
    }
}

impl fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretStore")
            .field("len", &self.len())
            .finish()
    }
}

#[async_trait]
impl CredentialSource for SecretStore {
    /// # Errors
    /// [`SourceError::NotFound`] when the store has no such Secret, else as
    /// [`StoredSecret::credential`].
    async fn fetch(&self, key: &SecretRef) -> Result<Credential, SourceError> {
        match self.get(key) {
            Some(secret) => secret.credential(key),
            None => Err(SourceError::NotFound { key: key.clone() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_ca::ca_pem;
    use rstest::rstest;
    use secrecy::ExposeSecret as _;
    use serde_json::json;

    fn key() -> SecretRef {
        SecretRef::new("karmada-cluster", "member1")
    }

    fn karmada_secret(data: &[(&str, &[u8])]) -> StoredSecret {
        StoredSecret::karmada(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), Bytes::copy_from_slice(v)))
                .collect(),
        )
    }

    fn store_with(secret: StoredSecret) -> SecretStore {
        let store = SecretStore::new();
        store.insert(key(), secret);
        store
    }

    #[rstest]
    // whitespace around the token is trimmed
    #[case::plain(&[("token", &b"abc"[..])], "abc", false)]
    #[case::trailing_newline(&[("token", &b"abc\n"[..])], "abc", false)]
    #[case::surrounding_whitespace(&[("token", &b" \tabc \r\n"[..])], "abc", false)]
    // an empty caBundle means no bundle
    #[case::empty_ca(&[("token", &b"abc"[..]), ("caBundle", &b""[..])], "abc", false)]
    // unrelated keys are ignored
    #[case::extra_keys(&[("token", &b"abc"[..]), ("ca.crt", &b"x"[..])], "abc", false)]
    #[tokio::test]
    async fn karmada_secrets_become_credentials(
        #[case] data: &[(&str, &[u8])],
        #[case] want_token: &str,
        #[case] want_ca: bool,
    ) {
        let cred = store_with(karmada_secret(data))
            .fetch(&key())
            .await
            .unwrap();
        assert_eq!(cred.token().expose_secret(), want_token);
        assert_eq!(cred.ca_bundle().is_some(), want_ca);
    }

    #[tokio::test]
    async fn a_pem_ca_bundle_is_kept() {
        let ca = ca_pem();
        let store = store_with(karmada_secret(&[
            ("token", b"t"),
            ("caBundle", ca.as_bytes()),
        ]));
        let cred = store.fetch(&key()).await.unwrap();
        assert_eq!(cred.ca_bundle().unwrap().as_ref(), ca.as_bytes());
    }

    #[rstest]
    #[case::missing_token(&[("caBundle", &b""[..])], "MissingKey")]
    #[case::empty_token(&[("token", &b""[..])], "EmptyToken")]
    #[case::whitespace_token(&[("token", &b" \n "[..])], "EmptyToken")]
    #[case::non_utf8_token(&[("token", &[0x61, 0xff][..])], "TokenNotUtf8")]
    #[case::inner_newline(&[("token", &b"a\nb"[..])], "TokenNotHeaderSafe")]
    #[case::ca_not_pem(&[("token", &b"t"[..]), ("caBundle", &b"garbage"[..])], "Invalid")]
    #[tokio::test]
    async fn bad_karmada_secrets_are_typed_errors(
        #[case] data: &[(&str, &[u8])],
        #[case] want: &str,
    ) {
        let err = store_with(karmada_secret(data))
            .fetch(&key())
            .await
            .unwrap_err();
        assert!(format!("{err:?}").starts_with(want), "{err:?}");
    }

    #[tokio::test]
    async fn a_secret_not_in_the_store_is_not_found() {
        let err = SecretStore::new().fetch(&key()).await.unwrap_err();
        assert!(matches!(err, SourceError::NotFound { key: k } if k == key()));
    }

    #[tokio::test]
    async fn an_unreadable_secret_is_invalid_with_its_reason() {
        let store = store_with(StoredSecret::unreadable("caFile /x: not found".into()));
        let err = store.fetch(&key()).await.unwrap_err();
        assert!(matches!(&err, SourceError::Invalid { reason, .. } if reason.contains("caFile")));
    }

    #[rstest]
    #[case::unlabelled(json!({}), SecretFormat::Karmada)]
    #[case::argocd_cluster(json!({"argocd.argoproj.io/secret-type": "cluster"}), SecretFormat::ArgoCd)]
    #[case::argocd_repository(json!({"argocd.argoproj.io/secret-type": "repository"}), SecretFormat::Karmada)]
    fn the_format_follows_the_argocd_label(
        #[case] labels: serde_json::Value,
        #[case] want: SecretFormat,
    ) {
        let secret: Secret =
            serde_json::from_value(json!({"metadata": {"name": "s", "labels": labels}})).unwrap();
        assert_eq!(StoredSecret::from_secret(&secret).format(), want);
    }

    #[tokio::test]
    async fn argocd_secrets_are_read_from_config() {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "s", "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "data": {"config": base64_of(r#"{"bearerToken":"argo-token"}"#)},
        }))
        .unwrap();
        let store = store_with(StoredSecret::from_secret(&secret));
        let cred = store.fetch(&key()).await.unwrap();
        assert_eq!(cred.token().expose_secret(), "argo-token");
    }

    #[test]
    fn debug_shows_keys_not_values() {
        let secret = karmada_secret(&[("token", b"s3cr3t")]);
        let printed = format!("{secret:?}");
        assert!(
            printed.contains("token") && !printed.contains("s3cr3t"),
            "{printed}"
        );
    }

    fn base64_of(s: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    }
}
