//! [`Registry`]: the handle; [`RegistryBuilder`]: how to make one (and its
//! [`RegistryDriver`](crate::RegistryDriver)).

use std::{
    collections::BTreeMap,
    sync::{Arc, PoisonError},
};

#[cfg(any(
    feature = "karmada",
    feature = "argocd",
    feature = "kubeconfig-secrets",
    feature = "clusterprofile"
))]
use kube::Client;
use member_client::{
    CredentialCache, CredentialCacheConfig, CredentialKey, exec::ExecPolicy,
    federated::FederatedIdentity, validation::EndpointPolicy,
};
use tokio::sync::mpsc;

#[cfg(feature = "argocd")]
use crate::argocd::ArgoCdConfig;
#[cfg(feature = "clusterprofile")]
use crate::clusterprofile::ClusterProfileConfig;
#[cfg(feature = "directory")]
use crate::directory::DirectoryConfig;
#[cfg(feature = "karmada")]
use crate::karmada::KarmadaConfig;
#[cfg(feature = "kubeconfig-secrets")]
use crate::kubeconfig_secrets::KubeconfigSecretsConfig;
use crate::{
    MemberSpec, MemberState, Origin, RegistryEvent,
    admission::Admission,
    driver::RegistryDriver,
    member_credentials::MemberCredentials,
    member_table::{MemberTable, MemberView, SharedViews},
    secret_store::SecretStore,
    source_configs::SourceConfigs,
    source_state::SourceStates,
};

/// How many events may wait in the channel before the registry waits for the consumer.
const DEFAULT_EVENT_CAPACITY: usize = 256;

/// The builder methods that read one more source, through a client, as its config says.
macro_rules! client_sources {
    ($($(#[$doc:meta])* $feature:literal $method:ident => $field:ident: $config:ty;)*) => {$(
        $(#[$doc])*
        #[cfg(feature = $feature)]
        #[must_use]
        pub fn $method(mut self, client: Client, config: $config) -> Self {
            self.sources.$field = Some((client, config));
            self
        }
    )*};
}

/// Builds a [`Registry`] from the sources it should read.
///
/// ```no_run
/// # async fn doc(client: kube::Client) {
/// use cluster_registry::{RegistryBuilder, RegistryEvent};
///
/// let (registry, mut events, driver) = RegistryBuilder::new().karmada(client).build();
/// tokio::select! {
///     () = driver.run() => {}
///     () = async {
///         while let Some(event) = events.recv().await {
///             if let RegistryEvent::Upserted { spec, ca_bundle } = event {
///                 let config = spec.client_config(ca_bundle);
///                 // build the member's client from `config` with a ClientFactory over
///                 // `registry.tokens()` ...
///             }
///         }
///     } => {}
/// }
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct RegistryBuilder {
    credential_cache: CredentialCacheConfig,
    exec: ExecPolicy,
    event_capacity: Option<usize>,
    sources: SourceConfigs,
    admission: Admission,
    scoped: bool,
    federation: Option<Arc<FederatedIdentity>>,
}

impl RegistryBuilder {
    /// A builder with no sources, the default [`CredentialCacheConfig`] and room for 256 events.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read Karmada `Cluster`s (and the Secrets they reference) through `client`.
    #[cfg(feature = "karmada")]
    #[must_use]
    pub fn karmada(self, client: Client) -> Self {
        self.karmada_with(client, KarmadaConfig::default())
    }

    client_sources! {
        /// Read Karmada `Cluster`s through `client`, watching Secrets as `config` says.
        "karmada" karmada_with => karmada: KarmadaConfig;
        /// Read Argo CD cluster Secrets through `client`.
        "argocd" argocd => argocd: ArgoCdConfig;
        /// Read kubeconfig Secrets (Cluster API's, Flux-style) through `client`.
        "kubeconfig-secrets" kubeconfig_secrets => kubeconfig: KubeconfigSecretsConfig;
        /// Read `ClusterProfile`s through `client`, reaching each member through the first of
        /// its access providers that `config`'s provider file serves.
        ///
        /// The provider file's commands are added to the exec allow-list: a profile chooses a
        /// provider, never the program.
        "clusterprofile" clusterprofiles => clusterprofile: ClusterProfileConfig;
    }

    /// Run exec credential plugins under `policy` (default: [`ExecPolicy::none`], which runs
    /// none). A definition whose plugin is off its allow-list is
    /// [`ExecNotAllowed`](crate::InvalidReason::ExecNotAllowed) and never runs.
    #[must_use]
    pub fn exec_policy(mut self, policy: ExecPolicy) -> Self {
        self.exec = policy;
        self
    }

    /// Read member files from a directory.
    #[cfg(feature = "directory")]
    #[must_use]
    pub fn directory(mut self, config: DirectoryConfig) -> Self {
        self.sources.directory = Some(config);
        self
    }

    /// Judge every definition's endpoint, proxy and TLS setting by `policy` (default: the
    /// strict [`EndpointPolicy::default`]); a definition that breaks it is
    /// [`EndpointForbidden`](crate::InvalidReason::EndpointForbidden).
    #[must_use]
    pub fn endpoint_policy(mut self, policy: EndpointPolicy) -> Self {
        self.admission.policy = policy;
        self
    }

    /// The namespaces a Karmada `Cluster`'s `secretRef` may name (default:
    /// [`DEFAULT_SECRET_NAMESPACE`](crate::DEFAULT_SECRET_NAMESPACE)). Any other is
    /// [`SecretForbidden`](crate::InvalidReason::SecretForbidden), and no watch is started on
    /// it: whoever may write a `Cluster` could otherwise have Tether read, and send, a token from
    /// any namespace its RBAC covers.
    #[must_use]
    pub fn secret_namespaces(mut self, namespaces: impl IntoIterator<Item = String>) -> Self {
        self.admission.secret_namespaces = namespaces.into_iter().collect();
        self
    }

    /// Configure the [`CredentialCache`] the registry creates.
    #[must_use]
    pub fn credential_cache(mut self, config: CredentialCacheConfig) -> Self {
        self.credential_cache = config;
        self
    }

    /// How many events may wait in the channel (default 256). When it is full the registry
    /// waits for the consumer, and so does its processing of watch events.
    #[must_use]
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = Some(capacity.max(1));
        self
    }

    /// Keep a member's credential in memory only while the consumer holds it
    /// ([`Registry::hold_credential`]), as a replica that serves a share of the members does.
    /// Of every other Secret the store keeps the CA bundle, the binding and a keyed digest of
    /// the content: its member is judged as before, and nothing is sent for it that would not
    /// be sent otherwise. The first fetch of a credential held since reads its Secret again
    /// (from the apiserver's watch cache when that is not behind the watch; 32 reads of a
    /// source at a time).
    #[must_use]
    pub fn scoped_credentials(mut self) -> Self {
        self.scoped = true;
        self
    }

    /// Mint the credential of every member whose definition asks for a federated one
    /// ([`federation`](crate::federation)) with `identity`, on the control plane. Without it,
    /// such members are [`DefinitionInvalid`](crate::InvalidReason::DefinitionInvalid).
    #[must_use]
    pub fn federated_identity(mut self, identity: FederatedIdentity) -> Self {
        self.federation = Some(Arc::new(identity));
        self
    }

    /// Creates the Secret store and the [`CredentialCache`] over it, and returns the handle, the
    /// event receiver and the driver. Nothing happens until the driver runs.
    pub fn build(self) -> (Registry, mpsc::Receiver<RegistryEvent>, RegistryDriver) {
        #[cfg(feature = "clusterprofile")]
        let exec = match &self.sources.clusterprofile {
            Some((_, config)) => {
                (self.exec).also_allowing(config.providers.commands().map(Into::into))
            }
            None => self.exec,
        };
        #[cfg(not(feature = "clusterprofile"))]
        let exec = self.exec;
        let store = SecretStore::with_exec_policy(exec);
        let store = if self.scoped { store.scoped() } else { store };
        let federated = self.federation.is_some();
        let source = MemberCredentials {
            store: store.clone(),
            federation: self.federation,
        };
        let tokens = CredentialCache::new(source, self.credential_cache);
        let (tx, rx) = mpsc::channel(self.event_capacity.unwrap_or(DEFAULT_EVENT_CAPACITY));
        let views = SharedViews::default();
        let table = MemberTable::new(
            tokens.clone(),
            store.clone(),
            tx,
            views.clone(),
            self.admission,
        );
        let table = if federated {
            table.with_federation()
        } else {
            table
        };
        let sources = SourceStates::new(self.sources.sources());
        let registry = Registry {
            tokens,
            store,
            views,
            sources: sources.clone(),
        };
        let driver = RegistryDriver::new(table, sources, self.sources);
        (registry, rx, driver)
    }
}

/// The registry's handle: the token cache its members' clients read, and each member's state.
///
/// # Concurrent calls
/// Cloning is cheap (four `Arc`s). Reads take a lock held only to copy a value out; they see
/// the registry as of the last change the [`RegistryDriver`] processed.
#[derive(Clone, Debug)]
pub struct Registry {
    tokens: CredentialCache,
    store: SecretStore,
    views: SharedViews,
    sources: SourceStates,
}

impl Registry {
    /// The token cache over the registry's Secret store. Build member clients with it
    /// ([`ClientFactory::new`](member_client::ClientFactory::new)).
    pub fn tokens(&self) -> &CredentialCache {
        &self.tokens
    }

    /// Keeps `key`'s credential in memory from now on, in a registry built with
    /// [`scoped_credentials`](RegistryBuilder::scoped_credentials); call it before the member's
    /// client first fetches. Every registry keeps every credential otherwise.
    pub fn hold_credential(&self, key: &CredentialKey) {
        self.store.hold(key);
    }

    /// Drops `key`'s credential from memory: from the cache always, and from the store too in
    /// a registry built with [`scoped_credentials`](RegistryBuilder::scoped_credentials). For a
    /// consumer that no longer serves the member.
    pub async fn release_credential(&self, key: &CredentialKey) {
        self.store.release(key);
        self.tokens.invalidate(key).await;
    }

    /// The in-memory Secret store the cache reads.
    pub fn secrets(&self) -> &SecretStore {
        &self.store
    }

    /// Whether each source of member definitions has listed, or why its list fails.
    pub fn sources(&self) -> &SourceStates {
        &self.sources
    }

    /// The state of member `name`, if it is defined.
    pub fn state(&self, name: &str) -> Option<MemberState> {
        self.read(|views| views.get(name).map(|v| v.state.clone()))
    }

    /// The spec of member `name`, if its definition is usable.
    pub fn spec(&self, name: &str) -> Option<MemberSpec> {
        self.read(|views| views.get(name).and_then(|v| v.spec.clone()))
    }

    /// Where member `name`'s definition came from, if it is defined.
    pub fn origin(&self, name: &str) -> Option<Origin> {
        self.read(|views| views.get(name).and_then(|v| v.origin.clone()))
    }

    /// How many usable members skip verifying their apiserver's certificate (admitted by an
    /// [`EndpointPolicy`] that allows it).
    pub fn insecure_members(&self) -> usize {
        self.read(|views| {
            views
                .values()
                .filter(|v| {
                    v.spec
                        .as_ref()
                        .is_some_and(|s| s.endpoint.insecure_skip_tls_verify)
                })
                .count()
        })
    }

    /// Every defined member's state, by name.
    pub fn states(&self) -> BTreeMap<String, MemberState> {
        self.read(|views| {
            views
                .iter()
                .map(|(name, view)| (name.clone(), view.state.clone()))
                .collect()
        })
    }

    fn read<T>(&self, f: impl FnOnce(&BTreeMap<String, MemberView>) -> T) -> T {
        f(&self.views.read().unwrap_or_else(PoisonError::into_inner))
    }
}
