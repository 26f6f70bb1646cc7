//! The in-memory Secret store the registry's watches feed, and the credential source over it.
//!
//! Each Secret (or member file) is parsed once, when it arrives, by its source's parser
//! ([`karmada`](crate::karmada), [`argocd`](crate::argocd)); the store keeps what that parse
//! produced and hands it out as it is.

use std::{collections::BTreeMap, fmt, sync::Arc, time::SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use dashmap::DashMap;
use k8s_openapi::api::core::v1::Secret;
use member_client::{
    Credential, CredentialKey, CredentialSource, SourceError,
    exec::{self, ExecPolicy},
};

#[cfg(feature = "argocd")]
use crate::argocd;
#[cfg(feature = "karmada")]
use crate::karmada;
#[cfg(all(feature = "karmada", feature = "argocd"))]
use crate::labels;
use crate::{secret_binding::SecretBinding, stored_credential::StoredCredential};

/// How a Secret holds its credential. A build reads only the formats of its sources.
#[cfg(any(feature = "karmada", feature = "argocd"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SecretFormat {
    /// Karmada's keys: `token` (required) and `caBundle` (PEM, optional). Member files use it
    /// too.
    #[cfg(feature = "karmada")]
    Karmada,
    /// Argo CD's `config` JSON: `bearerToken` and `tlsClientConfig.caData` (base64 of PEM).
    #[cfg(feature = "argocd")]
    ArgoCd,
}

#[cfg(any(feature = "karmada", feature = "argocd"))]
impl SecretFormat {
    /// The format of `secret`: [`ArgoCd`](Self::ArgoCd) if it carries the label
    /// `argocd.argoproj.io/secret-type=cluster`, else [`Karmada`](Self::Karmada).
    #[cfg(all(feature = "karmada", feature = "argocd"))]
    pub(crate) fn of(secret: &Secret) -> Self {
        if labels::is_argocd_cluster(secret.metadata.labels.iter().flatten()) {
            Self::ArgoCd
        } else {
            Self::Karmada
        }
    }

    /// Karmada's: without the Argo CD source, no Secret is read as Argo CD's.
    #[cfg(all(feature = "karmada", not(feature = "argocd")))]
    pub(crate) fn of(_secret: &Secret) -> Self {
        Self::Karmada
    }

    /// Argo CD's: without the Karmada source, only Argo CD's Secrets are read.
    #[cfg(all(feature = "argocd", not(feature = "karmada")))]
    pub(crate) fn of(_secret: &Secret) -> Self {
        Self::ArgoCd
    }
}

/// One Secret as the store keeps it: the credential (or exec plugin) parsed from it when it
/// arrived, or why it has none, and which member it is bound to.
///
/// `Debug` never shows the token: [`Credential`]'s own `Debug` redacts it, an exec plugin's
/// shows no env values, and a [`SourceError`] never quotes it.
#[derive(Clone, Debug)]
pub struct StoredSecret {
    credential: Result<StoredCredential, SourceError>,
    binding: SecretBinding,
}

impl StoredSecret {
    /// Parses `secret`, stored under `key`, by its [`SecretFormat`].
    #[cfg(any(feature = "karmada", feature = "argocd"))]
    pub(crate) fn from_secret(key: &CredentialKey, secret: &Secret) -> Self {
        let data = secret_data(secret);
        Self {
            binding: SecretBinding::of(secret),
            ..Self::parsed(match SecretFormat::of(secret) {
                #[cfg(feature = "karmada")]
                SecretFormat::Karmada => {
                    karmada::credential(key, &data).map(StoredCredential::from)
                }
                #[cfg(feature = "argocd")]
                SecretFormat::ArgoCd => argocd::credential(key, &data),
            })
        }
    }

    /// Without the Karmada and Argo CD sources, no Secret is read by their formats; only the
    /// kubeconfig Secrets' source (which parses its own) watches Secrets then.
    #[cfg(not(any(feature = "karmada", feature = "argocd")))]
    pub(crate) fn from_secret(key: &CredentialKey, _secret: &Secret) -> Self {
        Self::parsed(Err::<StoredCredential, _>(SourceError::Invalid {
            key: key.clone(),
            reason: "this build reads neither Karmada's nor Argo CD's Secrets".to_owned(),
        }))
    }

    /// What a source's parser made of a Secret or file, with no binding but the key it is
    /// stored under (see [`SecretBinding`]).
    pub(crate) fn parsed(credential: Result<impl Into<StoredCredential>, SourceError>) -> Self {
        Self {
            credential: credential.map(Into::into),
            binding: SecretBinding::default(),
        }
    }

    /// `self` bound as `binding` says; for tests.
    #[cfg(test)]
    pub(crate) fn bound(self, binding: SecretBinding) -> Self {
        Self { binding, ..self }
    }

    /// Which member the Secret serves, with the key it is stored under.
    pub(crate) fn binding(&self) -> &SecretBinding {
        &self.binding
    }

    /// The credential or exec plugin, as parsed.
    ///
    /// # Errors
    /// Why the Secret holds no usable credential: [`SourceError::MissingKey`] (no `token`, no
    /// `config`, no `config.bearerToken`), [`SourceError::EmptyToken`],
    /// [`SourceError::TokenNotUtf8`], [`SourceError::TokenNotHeaderSafe`],
    /// [`SourceError::Identity`] (a client certificate or key that does not parse or match), or
    /// [`SourceError::Invalid`] (a CA bundle that is not PEM, a `config` that is not JSON, a
    /// member file that cannot be read, a kubeconfig that names a file).
    pub(crate) fn stored(&self) -> Result<&StoredCredential, &SourceError> {
        self.credential.as_ref()
    }

    /// The PEM CA bundle that came with the credential, if it parsed and has one: the bundle an
    /// [`Upserted`](crate::RegistryEvent::Upserted) event carries for the member.
    pub fn ca_bundle(&self) -> Option<&Bytes> {
        self.credential.as_ref().ok()?.ca_bundle()
    }

    /// The command of the exec plugin the credential comes from, if it is one (never its
    /// environment, which may hold secrets).
    pub fn exec_command(&self) -> Option<&str> {
        match self.credential.as_ref().ok()? {
            StoredCredential::Exec(plan) => Some(plan.config.command.as_str()),
            StoredCredential::Static(_) => None,
        }
    }

    /// The static credential, if the Secret holds one (not an exec plugin); for tests and
    /// properties.
    #[cfg(test)]
    pub(crate) fn credential(&self) -> Result<&Credential, &SourceError> {
        Ok(self.credential.as_ref()?.static_credential())
    }
}

/// `data` with `stringData` merged over it, as the apiserver does on write.
pub(crate) fn secret_data(secret: &Secret) -> BTreeMap<String, Bytes> {
    let mut data: BTreeMap<String, Bytes> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), Bytes::copy_from_slice(&v.0)))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), Bytes::copy_from_slice(v.as_bytes()));
    }
    data
}

/// The Secrets that members reference, in memory, keyed by [`CredentialKey`].
///
/// The registry's watches write it; the [`CredentialCache`](member_client::CredentialCache) reads it
/// through its [`CredentialSource`] impl, so a cache miss costs a map lookup, never a parse or
/// an API call.
///
/// # Concurrent calls
/// Cloning is cheap (one `Arc`). Reads take a shard lock for the lookup only and copy an `Arc`
/// out. A read sees the Secret as of the last watch event the registry processed: it is as
/// stale as the watch (milliseconds on a healthy control plane).
///
/// A Secret that holds an exec plugin (a kubeconfig's `exec`, Argo CD's `execProviderConfig`)
/// is run on fetch, under the store's [`ExecPolicy`]: only commands on its allow-list run.
#[derive(Clone, Default)]
pub struct SecretStore {
    entries: Arc<DashMap<CredentialKey, Arc<StoredSecret>>>,
    exec: Arc<ExecPolicy>,
}

impl SecretStore {
    /// An empty store, under which no exec plugin may run.
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// An empty store whose exec plugins run under `policy`.
    pub(crate) fn with_exec_policy(policy: ExecPolicy) -> Self {
        Self {
            entries: Arc::default(),
            exec: Arc::new(policy),
        }
    }

    /// The Secret stored under `key`.
    pub fn get(&self, key: &CredentialKey) -> Option<Arc<StoredSecret>> {
        self.entries.get(key).map(|e| Arc::clone(e.value()))
    }

    /// How many Secrets are stored.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The CA bundle of the member whose credential is stored under `key`, if that credential
    /// is usable as far as can be told without fetching: parsed, and an exec plugin on the
    /// allow-list.
    pub(crate) fn usable(&self, key: &CredentialKey) -> Result<Option<Bytes>, SourceError> {
        let stored = self.stored(key)?;
        if let StoredCredential::Exec(plan) = &stored {
            plan.policy(&self.exec).check(&plan.config)?;
        }
        Ok(stored.ca_bundle().cloned())
    }

    /// What was parsed from the Secret stored under `key`, or why it holds no credential.
    fn stored(&self, key: &CredentialKey) -> Result<StoredCredential, SourceError> {
        let secret = self
            .get(key)
            .ok_or_else(|| SourceError::NotFound { key: key.clone() })?;
        secret.stored().cloned().map_err(SourceError::clone)
    }

    /// Stores `secret` under `key` and returns what was there.
    pub(crate) fn insert(
        &self,
        key: CredentialKey,
        secret: StoredSecret,
    ) -> Option<Arc<StoredSecret>> {
        self.entries.insert(key, Arc::new(secret))
    }

    /// Removes `key` and returns what was there.
    pub(crate) fn remove(&self, key: &CredentialKey) -> Option<Arc<StoredSecret>> {
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
    /// A static credential checked to be current, or what its exec plugin prints now.
    ///
    /// # Errors
    /// [`SourceError::NotFound`] when the store has no such Secret, else as
    /// `StoredSecret::stored`, or why the certificate or the exec plugin failed.
    async fn fetch(&self, key: &CredentialKey) -> Result<Credential, SourceError> {
        match self.stored(key)? {
            StoredCredential::Static(credential) => {
                if let Some(identity) = credential.identity() {
                    identity.check_current(SystemTime::now())?;
                }
                Ok(credential)
            }
            StoredCredential::Exec(plan) => {
                let output = exec::run(&plan.config, &plan.policy(&self.exec)).await?;
                let credential = Credential::from_exec(&output)?;
                Ok(match &plan.ca_bundle {
                    Some(ca) => credential.with_ca_bundle(ca.clone()),
                    None => credential,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
