//! [`Registry`]: the handle; [`RegistryBuilder`]: how to make one; [`RegistryDriver`]: the
//! future that keeps it current.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::PoisonError,
};

use futures::{
    StreamExt as _,
    stream::{self, AbortHandle, BoxStream, SelectAll},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, ResourceExt as _,
    runtime::watcher::{self, Event},
};
use member_client::{SecretRef, TokenCache, TokenCacheConfig, list_forbidden};
use tokio::sync::mpsc;

use crate::{
    MemberSpec, MemberState, RegistryEvent, argocd,
    directory::{self, DirectoryConfig},
    karmada::{self, Cluster},
    labels,
    member_table::{Closed, MemberTable, Origin, SharedViews},
    secret_store::{SecretStore, StoredSecret},
    source_state::{Source, SourceState, SourceStates},
    watch::{Relist, watch},
};

/// How many events may wait in the channel before the registry waits for the consumer.
const DEFAULT_EVENT_CAPACITY: usize = 256;

/// Where Karmada member Secrets are watched.
#[derive(Clone, Debug, Default)]
pub struct KarmadaConfig {
    /// Only Secrets with these labels are watched in the referenced namespaces (`None`: all
    /// Secrets of those namespaces). Set it when a referenced namespace holds many unrelated
    /// Secrets; Secrets without the labels are then [`SecretNotFound`](crate::InvalidReason::SecretNotFound).
    pub secret_label_selector: Option<String>,
}

/// Where Argo CD cluster Secrets are watched.
#[derive(Clone, Debug)]
pub struct ArgoCdConfig {
    /// The namespaces to watch (Argo CD's own). Default: `["argocd"]`.
    pub namespaces: Vec<String>,
}

impl Default for ArgoCdConfig {
    fn default() -> Self {
        Self {
            namespaces: vec!["argocd".to_owned()],
        }
    }
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
#[derive(Clone, Default)]
pub struct RegistryBuilder {
    token_cache: TokenCacheConfig,
    event_capacity: Option<usize>,
    karmada: Option<(Client, KarmadaConfig)>,
    argocd: Option<(Client, ArgoCdConfig)>,
    directory: Option<DirectoryConfig>,
}

impl std::fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("token_cache", &self.token_cache)
            .field("event_capacity", &self.event_capacity)
            .field("karmada", &self.karmada.as_ref().map(|(_, c)| c))
            .field("argocd", &self.argocd.as_ref().map(|(_, c)| c))
            .field("directory", &self.directory)
            .finish()
    }
}

impl RegistryBuilder {
    /// A builder with no sources, the default [`TokenCacheConfig`] and room for 256 events.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read Karmada `Cluster`s (and the Secrets they reference) through `client`.
    #[must_use]
    pub fn karmada(self, client: Client) -> Self {
        self.karmada_with(client, KarmadaConfig::default())
    }

    /// Read Karmada `Cluster`s through `client`, watching Secrets as `config` says.
    #[must_use]
    pub fn karmada_with(mut self, client: Client, config: KarmadaConfig) -> Self {
        self.karmada = Some((client, config));
        self
    }

    /// Read Argo CD cluster Secrets through `client`.
    #[must_use]
    pub fn argocd(mut self, client: Client, config: ArgoCdConfig) -> Self {
        self.argocd = Some((client, config));
        self
    }

    /// Read member files from a directory.
    #[must_use]
    pub fn directory(mut self, config: DirectoryConfig) -> Self {
        self.directory = Some(config);
        self
    }

    /// Configure the [`TokenCache`] the registry creates.
    #[must_use]
    pub fn token_cache(mut self, config: TokenCacheConfig) -> Self {
        self.token_cache = config;
        self
    }

    /// How many events may wait in the channel (default 256). When it is full the registry
    /// waits for the consumer, and so does its processing of watch events.
    #[must_use]
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = Some(capacity.max(1));
        self
    }

    /// Creates the Secret store and the [`TokenCache`] over it, and returns the handle, the
    /// event receiver and the driver. Nothing happens until the driver runs.
    pub fn build(self) -> (Registry, mpsc::Receiver<RegistryEvent>, RegistryDriver) {
        let store = SecretStore::new();
        let tokens = TokenCache::new(store.clone(), self.token_cache);
        let (tx, rx) = mpsc::channel(self.event_capacity.unwrap_or(DEFAULT_EVENT_CAPACITY));
        let views = SharedViews::default();
        let table = MemberTable::new(tokens.clone(), store.clone(), tx, views.clone());
        let sources = SourceStates::new(
            self.karmada
                .iter()
                .map(|_| Source::KarmadaClusters)
                .chain(self.argocd.iter().flat_map(|(_, config)| {
                    config.namespaces.iter().cloned().map(Source::ArgoCdSecrets)
                }))
                .chain(
                    self.directory
                        .iter()
                        .map(|config| Source::Directory(config.path.clone())),
                ),
        );
        let registry = Registry {
            tokens,
            store,
            views,
            sources: sources.clone(),
        };
        let driver = RegistryDriver {
            table,
            sources,
            karmada: self.karmada,
            argocd: self.argocd,
            directory: self.directory,
        };
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
    tokens: TokenCache,
    store: SecretStore,
    views: SharedViews,
    sources: SourceStates,
}

impl Registry {
    /// The token cache over the registry's Secret store. Build member clients with it
    /// ([`ClientFactory::new`](member_client::ClientFactory::new)).
    pub fn tokens(&self) -> &TokenCache {
        &self.tokens
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

    /// Every defined member's state, by name.
    pub fn states(&self) -> BTreeMap<String, MemberState> {
        self.read(|views| {
            views
                .iter()
                .map(|(name, view)| (name.clone(), view.state.clone()))
                .collect()
        })
    }

    fn read<T>(
        &self,
        f: impl FnOnce(&BTreeMap<String, crate::member_table::MemberView>) -> T,
    ) -> T {
        f(&self.views.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The future that keeps a [`Registry`] current: it runs the watches and the directory poll
/// and sends the [`RegistryEvent`]s.
///
/// Drive it with [`run`](Self::run) (in a task you own, or in your `select!`). It spawns
/// nothing: every watch is a stream it polls itself, so dropping the future stops them all.
///
/// # Recovery
/// Watch errors are logged (`warn`) and retried with member-client's
/// [`watch_backoff`](member_client::watch_backoff) (0.5 s doubling to 10 s, reset only by
/// progress); a directory that cannot be listed is logged and read again at the next poll. Members keep
/// their last known state meanwhile, except members whose Secret namespace has never been
/// listed and whose list is refused (403): they are `SecretForbidden` until a retry lists it.
pub struct RegistryDriver {
    table: MemberTable,
    sources: SourceStates,
    karmada: Option<(Client, KarmadaConfig)>,
    argocd: Option<(Client, ArgoCdConfig)>,
    directory: Option<DirectoryConfig>,
}

impl std::fmt::Debug for RegistryDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryDriver")
            .field("karmada", &self.karmada.is_some())
            .field("argocd", &self.argocd.as_ref().map(|(_, c)| c))
            .field("directory", &self.directory)
            .finish_non_exhaustive()
    }
}

type SecretWatchItem = (String, Result<Event<Secret>, watcher::Error>);

/// The Secret watches of one source: one stream per namespace, and what each has applied.
#[derive(Default)]
struct SecretWatches {
    streams: SelectAll<BoxStream<'static, SecretWatchItem>>,
    namespaces: BTreeMap<String, (AbortHandle, Relist<SecretRef>)>,
}

impl SecretWatches {
    fn start(&mut self, client: &Client, namespace: &str, config: watcher::Config) {
        let ns = namespace.to_owned();
        let (stream, abort) = stream::abortable(
            watch(Api::<Secret>::namespaced(client.clone(), namespace), config)
                .map(move |event| (ns.clone(), event)),
        );
        self.streams.push(stream.boxed());
        self.namespaces
            .insert(namespace.to_owned(), (abort, Relist::default()));
    }

    /// Stops the watch of `namespace` and returns the keys it had applied.
    fn stop(&mut self, namespace: &str) -> BTreeSet<SecretRef> {
        match self.namespaces.remove(namespace) {
            Some((abort, relist)) => {
                abort.abort();
                relist.into_known()
            }
            None => BTreeSet::new(),
        }
    }

    async fn next(&mut self) -> Option<SecretWatchItem> {
        if self.streams.is_empty() {
            std::future::pending::<()>().await;
        }
        self.streams.next().await
    }
}

impl RegistryDriver {
    /// Runs until the event receiver is dropped.
    pub async fn run(mut self) {
        // A closed channel is the only way out, and it is not an error.
        let Err(Closed) = self.run_until_closed().await;
        tracing::debug!("event receiver dropped; registry stopped");
    }

    async fn run_until_closed(&mut self) -> Result<std::convert::Infallible, Closed> {
        let mut clusters = match &self.karmada {
            Some((client, _)) => watch(
                Api::<Cluster>::all(client.clone()),
                watcher::Config::default(),
            )
            .boxed(),
            None => stream::pending().boxed(),
        };
        let mut cluster_relist = Relist::<String>::default();
        let mut karmada_secrets = SecretWatches::default();
        let mut argocd_secrets = SecretWatches::default();
        if let Some((client, config)) = &self.argocd {
            for ns in &config.namespaces {
                let cfg = watcher::Config::default().labels(labels::ARGOCD_CLUSTER_SELECTOR);
                argocd_secrets.start(client, ns, cfg);
            }
        }
        let mut files = BTreeSet::<PathBuf>::new();
        let mut poll = self
            .directory
            .as_ref()
            .map(|d| tokio::time::interval(d.poll_interval));
        if let Some(poll) = &mut poll {
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }

        loop {
            tokio::select! {
                () = self.table.closed() => return Err(Closed),
                Some(event) = clusters.next() => {
                    self.on_cluster(event, &mut cluster_relist).await?;
                    self.sync_karmada_watches(&mut karmada_secrets).await?;
                }
                Some((ns, event)) = karmada_secrets.next() => {
                    if let Some((_, relist)) = karmada_secrets.namespaces.get_mut(&ns) {
                        self.on_karmada_secret(&ns, event, relist).await?;
                    }
                }
                Some((ns, event)) = argocd_secrets.next() => {
                    if let Some((_, relist)) = argocd_secrets.namespaces.get_mut(&ns) {
                        self.on_argocd_secret(&ns, event, relist).await?;
                    }
                }
                Some(_) = next_tick(&mut poll) => self.poll_directory(&mut files).await?,
            }
        }
    }

    async fn on_cluster(
        &mut self,
        event: Result<Event<Cluster>, watcher::Error>,
        relist: &mut Relist<String>,
    ) -> Result<(), Closed> {
        match event {
            Ok(Event::Apply(cluster)) => self.apply_cluster(&cluster, relist, false).await,
            Ok(Event::InitApply(cluster)) => self.apply_cluster(&cluster, relist, true).await,
            Ok(Event::Delete(cluster)) => {
                let name = cluster.name_any();
                relist.deleted(&name);
                self.table.remove_definition(&Origin::Karmada(name)).await
            }
            Ok(Event::Init) => Ok(()),
            Ok(Event::InitDone) => {
                for name in relist.done() {
                    self.table.remove_definition(&Origin::Karmada(name)).await?;
                }
                self.sources
                    .set(&Source::KarmadaClusters, SourceState::Listed);
                Ok(())
            }
            Err(err) => {
                relist.failed();
                tracing::warn!(error = %err, "watching Karmada Clusters failed; retrying");
                self.list_failed(&Source::KarmadaClusters, &err);
                Ok(())
            }
        }
    }

    async fn apply_cluster(
        &mut self,
        cluster: &Cluster,
        relist: &mut Relist<String>,
        listed: bool,
    ) -> Result<(), Closed> {
        let name = cluster.name_any();
        relist.applied(&name, listed);
        let definition = karmada::member_from_cluster(cluster);
        self.table
            .apply_definition(Origin::Karmada(name), definition)
            .await
    }

    /// Watches the Secrets of exactly the namespaces Karmada members reference.
    async fn sync_karmada_watches(&mut self, watches: &mut SecretWatches) -> Result<(), Closed> {
        let Some((client, config)) = &self.karmada else {
            return Ok(());
        };
        let wanted = self.table.karmada_secret_namespaces();
        let stale: Vec<String> = watches
            .namespaces
            .keys()
            .filter(|ns| !wanted.contains(*ns))
            .cloned()
            .collect();
        let new: Vec<&String> = wanted
            .iter()
            .filter(|ns| !watches.namespaces.contains_key(*ns))
            .collect();
        for ns in new {
            let mut cfg = watcher::Config::default();
            if let Some(selector) = &config.secret_label_selector {
                cfg = cfg.labels(selector);
            }
            tracing::debug!(namespace = %ns, "watching Secrets");
            watches.start(client, ns, cfg);
        }
        for ns in stale {
            tracing::debug!(namespace = %ns, "no member references it any more; unwatching Secrets");
            self.table.namespace_unlisted(&ns);
            for key in watches.stop(&ns) {
                self.table.remove_secret(&key).await?;
            }
        }
        Ok(())
    }

    async fn on_karmada_secret(
        &mut self,
        ns: &str,
        event: Result<Event<Secret>, watcher::Error>,
        relist: &mut Relist<SecretRef>,
    ) -> Result<(), Closed> {
        let listed = matches!(event, Ok(Event::InitApply(_)));
        match event {
            Ok(Event::Apply(secret) | Event::InitApply(secret)) => {
                let key = SecretRef::new(ns, secret.name_any());
                relist.applied(&key, listed);
                let stored = StoredSecret::from_secret(&key, &secret);
                self.table.apply_secret(key, stored).await
            }
            Ok(Event::Delete(secret)) => {
                let key = SecretRef::new(ns, secret.name_any());
                relist.deleted(&key);
                self.table.remove_secret(&key).await
            }
            Ok(Event::Init) => Ok(()),
            Ok(Event::InitDone) => {
                for key in relist.done() {
                    self.table.remove_secret(&key).await?;
                }
                self.table.namespace_listed(ns).await
            }
            Err(err) => {
                relist.failed();
                if let Some(message) = list_forbidden(&err) {
                    tracing::warn!(namespace = %ns, error = %err, "may not list Secrets here; its members are SecretForbidden until that changes");
                    return self.table.namespace_forbidden(ns, message.to_owned()).await;
                }
                tracing::warn!(namespace = %ns, error = %err, "watching Secrets failed; retrying");
                Ok(())
            }
        }
    }

    async fn on_argocd_secret(
        &mut self,
        ns: &str,
        event: Result<Event<Secret>, watcher::Error>,
        relist: &mut Relist<SecretRef>,
    ) -> Result<(), Closed> {
        let listed = matches!(event, Ok(Event::InitApply(_)));
        match event {
            Ok(Event::Apply(secret) | Event::InitApply(secret)) => {
                let key = SecretRef::new(ns, secret.name_any());
                relist.applied(&key, listed);
                // The Secret first, so that a new member is Ready at its first settle and a
                // token change is a rotation of the definition in use.
                let definition = argocd::member_from_secret(&secret);
                let stored = StoredSecret::from_secret(&key, &secret);
                self.table.apply_secret(key.clone(), stored).await?;
                self.table
                    .apply_definition(Origin::ArgoCd(key), definition)
                    .await
            }
            Ok(Event::Delete(secret)) => {
                let key = SecretRef::new(ns, secret.name_any());
                relist.deleted(&key);
                self.remove_argocd(&key).await
            }
            Ok(Event::Init) => Ok(()),
            Ok(Event::InitDone) => {
                for key in relist.done() {
                    self.remove_argocd(&key).await?;
                }
                self.sources
                    .set(&Source::ArgoCdSecrets(ns.to_owned()), SourceState::Listed);
                Ok(())
            }
            Err(err) => {
                relist.failed();
                tracing::warn!(namespace = %ns, error = %err, "watching Argo CD cluster Secrets failed; retrying");
                self.list_failed(&Source::ArgoCdSecrets(ns.to_owned()), &err);
                Ok(())
            }
        }
    }

    /// The definition first, so that the member is Removed rather than SecretNotFound.
    async fn remove_argocd(&mut self, key: &SecretRef) -> Result<(), Closed> {
        self.table
            .remove_definition(&Origin::ArgoCd(key.clone()))
            .await?;
        self.table.remove_secret(key).await
    }

    /// A definitions watch failed. A failed list makes its source `Failing` until a list
    /// succeeds; other errors (a dropped watch connection, say) leave the state alone, since
    /// the watch lists again and that list decides.
    fn list_failed(&self, source: &Source, err: &watcher::Error) {
        if matches!(err, watcher::Error::InitialListFailed(_)) {
            self.sources
                .set(source, SourceState::Failing(err.to_string()));
        }
    }

    async fn poll_directory(&mut self, known: &mut BTreeSet<PathBuf>) -> Result<(), Closed> {
        let Some(config) = &self.directory else {
            return Ok(());
        };
        let source = Source::Directory(config.path.clone());
        let scanned = match directory::scan(&config.path).await {
            Ok(scanned) => scanned,
            Err(err) => {
                tracing::warn!(error = %err, "reading member files failed; keeping the members read before");
                self.sources
                    .set(&source, SourceState::Failing(err.to_string()));
                return Ok(());
            }
        };
        self.sources.set(&source, SourceState::Listed);
        let mut seen = BTreeSet::new();
        for member in scanned {
            let key = directory::secret_ref_for(&member.path);
            match member.secret {
                Some(secret) => self.table.apply_secret(key, secret).await?,
                None => self.table.remove_secret(&key).await?,
            }
            seen.insert(member.path.clone());
            self.table
                .apply_definition(Origin::File(member.path), member.definition)
                .await?;
        }
        for gone in known.difference(&seen) {
            self.table
                .remove_definition(&Origin::File(gone.clone()))
                .await?;
            self.table
                .remove_secret(&directory::secret_ref_for(gone))
                .await?;
        }
        *known = seen;
        Ok(())
    }
}

/// The next tick of the directory poll; never resolves when there is no directory.
async fn next_tick(poll: &mut Option<tokio::time::Interval>) -> Option<()> {
    match poll {
        Some(poll) => {
            poll.tick().await;
            Some(())
        }
        None => std::future::pending().await,
    }
}
