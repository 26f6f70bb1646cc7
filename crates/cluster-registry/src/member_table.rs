//! The registry's state machine: definitions and Secrets in, [`RegistryEvent`]s out.
//!
//! Sources call it one change at a time; it compares what each member's client should now be
//! with what the consumer was last told, and sends the difference. It holds no I/O except the
//! event channel and [`CredentialCache::invalidate`], so it is tested without any apiserver.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, PoisonError, RwLock},
};

use bytes::Bytes;
use member_client::{CredentialCache, CredentialKey};
use tokio::sync::mpsc;

use crate::{
    InvalidReason, MemberDefinition, MemberSpec, MemberState, RegistryEvent,
    admission::Admission,
    secret_store::{SecretStore, StoredSecret},
};

pub use origin::Origin;

/// What the consumer was last told about a member (or, for `Pending`, that nothing was told).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Told {
    Pending,
    Ready { spec: MemberSpec, ca: Option<Bytes> },
    Invalid(InvalidReason),
}

/// One member as the read API shows it.
#[derive(Clone, Debug)]
pub(crate) struct MemberView {
    pub(crate) state: MemberState,
    pub(crate) spec: Option<MemberSpec>,
    pub(crate) origin: Option<Origin>,
}

/// Member states shared with [`Registry`](crate::Registry) handles. Written only by the
/// table, under a lock held for the insert alone.
pub(crate) type SharedViews = Arc<RwLock<BTreeMap<String, MemberView>>>;

/// The consumer dropped the event receiver: the registry has no one to serve.
#[derive(Debug)]
pub(crate) struct Closed;

#[derive(Debug)]
pub(crate) struct MemberTable {
    tokens: CredentialCache,
    store: SecretStore,
    events: mpsc::Sender<RegistryEvent>,
    views: SharedViews,
    admission: Admission,
    definitions: BTreeMap<Origin, MemberDefinition>,
    /// Which origins define each member name. A name defined by more than one is
    /// `DefinitionInvalid` until one is left, whichever came first: "the first one wins" would
    /// hand a member to whoever was listed first after a restart.
    claims: BTreeMap<String, BTreeSet<Origin>>,
    told: BTreeMap<String, Told>,
    /// Namespaces whose Secrets have been listed (Karmada members wait for theirs).
    listed: BTreeSet<String>,
    /// Namespaces not listed yet whose list was refused (403), with what the apiserver said:
    /// their members are told so instead of waiting silently.
    forbidden: BTreeMap<String, String>,
    /// Secrets a Karmada watch saw that no Cluster named then, by name only (see
    /// [`unreferenced`]).
    unreferenced: BTreeSet<CredentialKey>,
    /// Whether the registry's credential source mints federated credentials.
    federation: bool,
}

impl MemberTable {
    pub(crate) fn new(
        tokens: CredentialCache,
        store: SecretStore,
        events: mpsc::Sender<RegistryEvent>,
        views: SharedViews,
        admission: Admission,
    ) -> Self {
        Self {
            tokens,
            store,
            events,
            views,
            admission,
            definitions: BTreeMap::new(),
            claims: BTreeMap::new(),
            told: BTreeMap::new(),
            listed: BTreeSet::new(),
            forbidden: BTreeMap::new(),
            unreferenced: BTreeSet::new(),
            federation: false,
        }
    }

    /// The same table, whose federated members get a credential.
    pub(crate) fn with_federation(mut self) -> Self {
        self.federation = true;
        self
    }

    /// Resolves when the consumer dropped the receiver.
    pub(crate) async fn closed(&self) {
        self.events.closed().await;
    }

    /// The namespaces the Karmada definitions reference Secrets in.
    pub(crate) fn karmada_secret_namespaces(&self) -> BTreeSet<String> {
        let refs = self.karmada_secret_refs().into_iter();
        refs.map(|key| key.namespace).collect()
    }

    /// A definition was added or changed.
    pub(crate) async fn apply_definition(
        &mut self,
        origin: Origin,
        definition: MemberDefinition,
    ) -> Result<(), Closed> {
        let definition = self
            .admission
            .admit(matches!(origin, Origin::Karmada(_)), definition);
        let name = definition.name.clone();
        let previous = self.definitions.insert(origin.clone(), definition);
        if let Some(previous) = previous.filter(|p| p.name != name) {
            self.release(&origin, &previous.name).await?;
        }
        let claimants = self.claims.entry(name.clone()).or_default();
        if claimants.insert(origin.clone()) && claimants.len() > 1 {
            tracing::warn!(
                member = %name, ?origin, definitions = claimants.len(),
                "more than one definition claims this member name; none is used"
            );
        }
        self.settle(&name, false).await
    }

    /// A definition was deleted.
    pub(crate) async fn remove_definition(&mut self, origin: &Origin) -> Result<(), Closed> {
        match self.definitions.remove(origin) {
            Some(definition) => self.release(origin, &definition.name).await,
            None => Ok(()),
        }
    }

    /// A Secret was added or changed.
    pub(crate) async fn apply_secret(
        &mut self,
        key: CredentialKey,
        secret: StoredSecret,
    ) -> Result<(), Closed> {
        self.unreferenced.remove(&key);
        let old = self.store.insert(key.clone(), secret);
        self.secret_changed(&key, old).await
    }

    /// A Secret was deleted.
    pub(crate) async fn remove_secret(&mut self, key: &CredentialKey) -> Result<(), Closed> {
        self.unreferenced.remove(key);
        match self.store.remove(key) {
            Some(old) => self.secret_changed(key, Some(old)).await,
            None => Ok(()),
        }
    }

    /// The Secrets of `namespace` have been listed: members waiting for them can settle.
    pub(crate) async fn namespace_listed(&mut self, namespace: &str) -> Result<(), Closed> {
        self.forbidden.remove(namespace);
        if !self.listed.insert(namespace.to_owned()) {
            return Ok(());
        }
        self.settle_namespace(namespace).await
    }

    /// Listing the Secrets of `namespace` was refused (403). Members waiting for that namespace
    /// become [`SecretForbidden`](InvalidReason::SecretForbidden); a namespace listed before
    /// keeps the Secrets it had, as for any other watch error, and so do its members.
    pub(crate) async fn namespace_forbidden(
        &mut self,
        namespace: &str,
        detail: String,
    ) -> Result<(), Closed> {
        if self.listed.contains(namespace)
            || self.forbidden.get(namespace).is_some_and(|d| *d == detail)
        {
            return Ok(());
        }
        self.forbidden.insert(namespace.to_owned(), detail);
        self.settle_namespace(namespace).await
    }

    /// The Secrets of `namespace` are no longer watched.
    pub(crate) fn namespace_unlisted(&mut self, namespace: &str) {
        self.listed.remove(namespace);
        self.forbidden.remove(namespace);
        self.unreferenced.retain(|key| key.namespace != namespace);
    }

    async fn settle_namespace(&mut self, namespace: &str) -> Result<(), Closed> {
        let waiting: Vec<String> = self
            .owned_specs()
            .filter(|(_, spec)| spec.secret_ref.namespace == namespace)
            .map(|(name, _)| name.clone())
            .collect();
        for name in waiting {
            self.settle(&name, false).await?;
        }
        Ok(())
    }

    async fn secret_changed(
        &mut self,
        key: &CredentialKey,
        old: Option<Arc<StoredSecret>>,
    ) -> Result<(), Closed> {
        let new = self.store.get(key);
        let credential = credential_change(old.as_deref(), new.as_deref());
        // A new label or owner may bind the Secret to another member: its members are judged
        // again, and the cache need not forget a credential that did not change.
        let rebound =
            old.as_deref().map(StoredSecret::binding) != new.as_deref().map(StoredSecret::binding);
        let Some(token_rotated) = credential.or(rebound.then_some(false)) else {
            // a resync, a relist, or a change to an unrelated label or key
            tracing::trace!(secret = %key, "Secret unchanged, or not its credential");
            return Ok(());
        };
        if credential.is_some() {
            // Invalidate first: by the time the consumer hears of it, the cache has forgotten.
            self.tokens.invalidate(key).await;
        }
        let affected: Vec<String> = self
            .owned_specs()
            .filter(|(_, spec)| spec.secret_ref == *key)
            .map(|(name, _)| name.clone())
            .collect();
        tracing::debug!(secret = %key, token_rotated, rebound, members = ?affected, "credential or binding changed");
        for name in affected {
            self.settle(&name, token_rotated).await?;
        }
        Ok(())
    }

    /// Members with a usable definition, by name, as their only definitions define them.
    fn owned_specs(&self) -> impl Iterator<Item = (&String, &MemberSpec)> {
        self.claims.keys().filter_map(|name| {
            let spec = self
                .definitions
                .get(self.owner(name)?)?
                .spec
                .as_ref()
                .ok()?;
            Some((name, spec))
        })
    }

    /// The one definition of `name`, if exactly one claims it.
    fn owner(&self, name: &str) -> Option<&Origin> {
        let mut claimants = self.claims.get(name)?.iter();
        match (claimants.next(), claimants.next()) {
            (Some(origin), None) => Some(origin),
            _ => None,
        }
    }

    /// `origin` no longer defines `name`: the other definitions of it are judged again, or the
    /// member is removed if there are none.
    async fn release(&mut self, origin: &Origin, name: &str) -> Result<(), Closed> {
        let Some(claimants) = self.claims.get_mut(name) else {
            return Ok(());
        };
        if !claimants.remove(origin) {
            return Ok(());
        }
        if !claimants.is_empty() {
            return self.settle(name, false).await;
        }
        self.claims.remove(name);
        self.views
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
        match self.told.remove(name) {
            Some(Told::Ready { .. } | Told::Invalid(_)) => {
                self.send(RegistryEvent::Removed(name.to_owned())).await
            }
            Some(Told::Pending) | None => Ok(()),
        }
    }

    /// Tells the consumer what changed for `name`, if anything.
    async fn settle(&mut self, name: &str, token_rotated: bool) -> Result<(), Closed> {
        let Some(target) = self.target(name) else {
            return Ok(());
        };
        let event = match (self.told.get(name), &target) {
            (Some(Told::Ready { spec: a, ca: ca_a }), Told::Ready { spec: b, ca: ca_b })
                if a == b && ca_a == ca_b =>
            {
                token_rotated.then(|| RegistryEvent::CredentialsRotated {
                    name: name.to_owned(),
                    secret: b.secret_ref.clone(),
                })
            }
            (_, Told::Ready { spec, ca }) => Some(RegistryEvent::Upserted {
                spec: spec.clone(),
                ca_bundle: ca.clone(),
            }),
            (Some(Told::Invalid(a)), Told::Invalid(b)) if a == b => None,
            (_, Told::Invalid(reason)) => Some(RegistryEvent::Invalid {
                name: name.to_owned(),
                reason: reason.clone(),
            }),
            (_, Told::Pending) => None,
        };
        let (state, spec) = match &target {
            Told::Pending => (MemberState::Pending, self.spec_of(name)),
            Told::Ready { spec, .. } => (MemberState::Ready, Some(spec.clone())),
            Told::Invalid(reason) => {
                let reason = reason.clone();
                (MemberState::Invalid { reason }, self.spec_of(name))
            }
        };
        let origin = self.owner(name).cloned();
        let view = MemberView {
            state,
            spec,
            origin,
        };
        self.views
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), view);
        self.told.insert(name.to_owned(), target);
        match event {
            Some(event) => self.send(event).await,
            None => Ok(()),
        }
    }

    fn spec_of(&self, name: &str) -> Option<MemberSpec> {
        let origin = self.owner(name)?;
        self.definitions.get(origin)?.spec.clone().ok()
    }

    async fn send(&self, event: RegistryEvent) -> Result<(), Closed> {
        tracing::debug!(member = event.member(), ?event, "registry event");
        self.events.send(event).await.map_err(|_| Closed)
    }
}

/// Why a member waits in vain: the Secrets of its namespace may not be listed, and the
/// apiserver said `detail`.
fn list_forbidden(detail: &str) -> InvalidReason {
    InvalidReason::SecretForbidden(format!(
        "the collector may not read the member's Secret: {detail}; grant it get, list and watch \
         on Secrets in that namespace"
    ))
}

/// Whether a Secret change matters to clients: `None` if the credential is the same (only
/// unrelated fields changed), else `Some(token_rotated)` (see [`StoredSecret::change_to`]).
fn credential_change(before: Option<&StoredSecret>, after: Option<&StoredSecret>) -> Option<bool> {
    match (before, after) {
        (Some(a), Some(b)) => a.change_to(b),
        (None, None) => None,
        _ => Some(false),
    }
}

mod origin;
mod target;
#[cfg(test)]
mod tests;
mod unreferenced;
