//! The in-memory Secret store the registry's watches feed, and the credential source over it.
//!
//! Each Secret (or member file) is parsed once, when it arrives, by its source's parser
//! ([`karmada`](crate::karmada), [`argocd`](crate::argocd)); the store keeps what that parse
//! produced and hands it out as it is.

use std::{collections::BTreeMap, fmt, sync::Arc, time::SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use dashmap::{DashMap, DashSet};
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
use crate::{
    secret_binding::SecretBinding, secret_reader::SecretReader, stored_credential::StoredCredential,
};

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
    credential: Result<Kept, SourceError>,
    binding: SecretBinding,
    /// How to read the Secret again, with a digest of what it held; set for Secrets read from
    /// the API, the only ones a scoped store withholds.
    reread: Option<Reread>,
}

/// What a store keeps of a usable credential.
#[derive(Clone, Debug)]
enum Kept {
    /// The credential itself.
    Held(StoredCredential),
    /// Only what judging the member needs, for a member this replica does not serve: the
    /// material is read again when it comes to serve it.
    Withheld(Withheld),
}

/// A credential's public part, kept without the credential.
#[derive(Clone, Debug)]
struct Withheld {
    ca_bundle: Option<Bytes>,
    exec_command: Option<String>,
    /// The exec allow-list's verdict on the plugin, taken when the material was dropped.
    allowed: Result<(), SourceError>,
}

/// Where a Secret can be read again, and a digest of its content when it was stored.
#[derive(Clone, Debug)]
struct Reread {
    reader: SecretReader,
    digest: u64,
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
            credential: credential.map(|c| Kept::Held(c.into())),
            binding: SecretBinding::default(),
            reread: None,
        }
    }

    /// `self`, readable again through `reader`, from a Secret whose content had `digest`.
    pub(crate) fn rereadable(self, reader: SecretReader, digest: u64) -> Self {
        Self {
            reread: Some(Reread { reader, digest }),
            ..self
        }
    }

    /// `self` without its credential, if it holds one that can be read again: what a scoped
    /// store keeps for a member it does not serve. The exec allow-list (`exec`) is judged now,
    /// since the plugin's invocation goes with the material.
    fn withheld(&self, exec: &ExecPolicy) -> Option<Self> {
        let Ok(Kept::Held(stored)) = &self.credential else {
            return None;
        };
        self.reread.as_ref()?;
        let (exec_command, allowed) = match stored {
            StoredCredential::Exec(plan) => (
                Some(plan.config.command.clone()),
                (plan.policy(exec).check(&plan.config))
                    .map(drop)
                    .map_err(SourceError::from),
            ),
            StoredCredential::Static(_) => (None, Ok(())),
        };
        Some(Self {
            credential: Ok(Kept::Withheld(Withheld {
                ca_bundle: stored.ca_bundle().cloned(),
                exec_command,
                allowed,
            })),
            ..self.clone()
        })
    }

    /// Whether the credential itself is in memory (not withheld, and not a parse failure).
    pub fn holds_credential(&self) -> bool {
        matches!(self.credential, Ok(Kept::Held(_)))
    }

    /// Whether a Secret stored as `self` and then as `next` changed for clients: `None` if the
    /// credential is the same (only unrelated fields changed), else `Some(token_rotated)`,
    /// true when a usable credential (token, certificate, exec plugin) was replaced by another
    /// usable one. A withheld credential is compared by the digest of its Secret's content.
    pub(crate) fn change_to(&self, next: &Self) -> Option<bool> {
        match (&self.credential, &next.credential) {
            (Ok(Kept::Held(a)), Ok(Kept::Held(b))) => {
                let token_changed = !a.same_material(b);
                (token_changed || a.ca_bundle() != b.ca_bundle()).then_some(token_changed)
            }
            (Ok(_), Ok(_)) => {
                let digest = |s: &Self| s.reread.as_ref().map(|r| r.digest);
                let token_changed = digest(self).is_none() || digest(self) != digest(next);
                (token_changed || self.ca_bundle() != next.ca_bundle()).then_some(token_changed)
            }
            (Err(a), Err(b)) => (a.to_string() != b.to_string()).then_some(false),
            _ => Some(false),
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

    /// The credential or exec plugin, as parsed; panics if it is withheld (tests only).
    ///
    /// # Errors
    /// Why the Secret holds no usable credential: [`SourceError::MissingKey`] (no `token`, no
    /// `config`, no `config.bearerToken`), [`SourceError::EmptyToken`],
    /// [`SourceError::TokenNotUtf8`], [`SourceError::TokenNotHeaderSafe`],
    /// [`SourceError::Identity`] (a client certificate or key that does not parse or match), or
    /// [`SourceError::Invalid`] (a CA bundle that is not PEM, a `config` that is not JSON, a
    /// member file that cannot be read, a kubeconfig that names a file).
    #[cfg(test)]
    pub(crate) fn stored(&self) -> Result<&StoredCredential, &SourceError> {
        match &self.credential {
            Ok(Kept::Held(stored)) => Ok(stored),
            Ok(Kept::Withheld(_)) => panic!("withheld, not held"),
            Err(err) => Err(err),
        }
    }

    /// The PEM CA bundle that came with the credential, if it parsed and has one: the bundle an
    /// [`Upserted`](crate::RegistryEvent::Upserted) event carries for the member.
    pub fn ca_bundle(&self) -> Option<&Bytes> {
        match self.credential.as_ref().ok()? {
            Kept::Held(stored) => stored.ca_bundle(),
            Kept::Withheld(withheld) => withheld.ca_bundle.as_ref(),
        }
    }

    /// The command of the exec plugin the credential comes from, if it is one (never its
    /// environment, which may hold secrets).
    pub fn exec_command(&self) -> Option<&str> {
        match self.credential.as_ref().ok()? {
            Kept::Held(StoredCredential::Exec(plan)) => Some(plan.config.command.as_str()),
            Kept::Held(StoredCredential::Static(_)) => None,
            Kept::Withheld(withheld) => withheld.exec_command.as_deref(),
        }
    }

    /// The static credential, if the Secret holds one (not an exec plugin); for tests and
    /// properties.
    #[cfg(test)]
    pub(crate) fn credential(&self) -> Result<&Credential, &SourceError> {
        Ok(self.stored()?.static_credential())
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
/// # Scope
/// A store built [`scoped`](crate::RegistryBuilder::scoped_credentials) keeps a credential
/// only while its key is [held](Self::hold): of every other Secret read from the API it keeps
/// the CA bundle, the binding and a keyed digest of the content, enough to judge the member,
/// and drops the token, key or plugin invocation. The first fetch of a key held since reads
/// that one Secret again (a GET, bounded by a deadline). Sharded replicas hold the credentials
/// of the members they serve, and no others.
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
    /// `None`: every credential is kept. Else the keys whose credentials are.
    scope: Option<Arc<DashSet<CredentialKey>>>,
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
            scope: None,
        }
    }

    /// `self`, keeping only the credentials whose keys are [held](Self::hold).
    pub(crate) fn scoped(self) -> Self {
        Self {
            scope: Some(Arc::default()),
            ..self
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

    /// How many credentials are in memory: every usable one, or in a scoped store the held
    /// ones that were fetched since.
    pub fn credentials_held(&self) -> usize {
        (self.entries.iter())
            .filter(|e| e.value().holds_credential())
            .count()
    }

    /// Keeps the credential stored under `key` from now on (in a scoped store; every store
    /// keeps every credential otherwise). The next fetch reads it again if it was withheld.
    pub fn hold(&self, key: &CredentialKey) {
        if let Some(scope) = &self.scope {
            scope.insert(key.clone());
        }
    }

    /// Stops keeping the credential stored under `key` (in a scoped store): it is dropped now,
    /// and what judging its member needs stays.
    pub fn release(&self, key: &CredentialKey) {
        let Some(scope) = &self.scope else { return };
        scope.remove(key);
        if let Some(mut entry) = self.entries.get_mut(key)
            && let Some(withheld) = entry.withheld(&self.exec)
        {
            *entry = Arc::new(withheld);
        }
    }

    /// Whether the credential stored under `key` is kept.
    fn holds(&self, key: &CredentialKey) -> bool {
        self.scope.as_ref().is_none_or(|scope| scope.contains(key))
    }

    /// The CA bundle of the member whose credential is stored under `key`, if that credential
    /// is usable as far as can be told without fetching: parsed, and an exec plugin on the
    /// allow-list.
    pub(crate) fn usable(&self, key: &CredentialKey) -> Result<Option<Bytes>, SourceError> {
        let secret = self.found(key)?;
        match &secret.credential {
            Err(err) => Err(err.clone()),
            Ok(Kept::Withheld(withheld)) => {
                withheld.allowed.clone()?;
                Ok(withheld.ca_bundle.clone())
            }
            Ok(Kept::Held(stored)) => {
                if let StoredCredential::Exec(plan) = stored {
                    plan.policy(&self.exec).check(&plan.config)?;
                }
                Ok(stored.ca_bundle().cloned())
            }
        }
    }

    fn found(&self, key: &CredentialKey) -> Result<Arc<StoredSecret>, SourceError> {
        self.get(key)
            .ok_or_else(|| SourceError::NotFound { key: key.clone() })
    }

    /// What was parsed from the Secret stored under `key`, read again if it was withheld, or
    /// why it holds no credential.
    async fn stored(&self, key: &CredentialKey) -> Result<StoredCredential, SourceError> {
        let secret = self.found(key)?;
        match &secret.credential {
            Err(err) => Err(err.clone()),
            Ok(Kept::Held(stored)) => Ok(stored.clone()),
            Ok(Kept::Withheld(_)) => self.reread(key, &secret).await,
        }
    }

    /// Reads the withheld Secret `seen` again; keeps what it holds if `key` is held now and
    /// no watch event replaced `seen` meanwhile.
    async fn reread(
        &self,
        key: &CredentialKey,
        seen: &Arc<StoredSecret>,
    ) -> Result<StoredCredential, SourceError> {
        let reread = seen
            .reread
            .as_ref()
            .ok_or_else(|| SourceError::NotFound { key: key.clone() })?;
        let fresh = reread.reader.read(key, reread.digest).await?;
        if fresh.binding != seen.binding {
            // Bound to another member since the watch told: that member's definition may not
            // have this credential; the watch event on its way judges it again.
            return Err(SourceError::Read {
                key: key.clone(),
                source: Arc::new(std::io::Error::other(
                    "the Secret's binding changed while it was read",
                )),
            });
        }
        let stored = match &fresh.credential {
            Ok(Kept::Held(stored)) => stored.clone(),
            // Parsed just now, so never withheld.
            Ok(Kept::Withheld(_)) => return Err(SourceError::NotFound { key: key.clone() }),
            Err(err) => return Err(err.clone()),
        };
        if self.holds(key)
            && let Some(mut entry) = self.entries.get_mut(key)
            && Arc::ptr_eq(&entry, seen)
        {
            *entry = Arc::new(fresh);
        }
        Ok(stored)
    }

    /// Stores `secret` under `key`, without its credential unless `key` is held, and returns
    /// what was there.
    pub(crate) fn insert(
        &self,
        key: CredentialKey,
        secret: StoredSecret,
    ) -> Option<Arc<StoredSecret>> {
        let secret = match self.holds(&key) {
            true => secret,
            false => secret.withheld(&self.exec).unwrap_or(secret),
        };
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
        match self.stored(key).await? {
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
