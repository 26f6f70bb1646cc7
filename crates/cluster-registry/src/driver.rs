//! [`RegistryDriver`]: the future that runs the registry's watches and directory poll and
//! feeds what they see to the member table.

#[cfg(any(
    feature = "karmada",
    feature = "argocd",
    feature = "kubeconfig-secrets"
))]
use std::sync::Arc;
use std::{collections::BTreeSet, path::PathBuf};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher;
use member_client::{CredentialKey, watch_backoff::list_forbidden};

#[cfg(feature = "clusterprofile")]
mod clusterprofiles;
mod directory_poll;
#[cfg(feature = "karmada")]
mod karmada_clusters;

use directory_poll::next_tick;

#[cfg(any(
    feature = "karmada",
    feature = "argocd",
    feature = "kubeconfig-secrets"
))]
use crate::secret_reader::Parse;
#[cfg(feature = "argocd")]
use crate::{argocd, labels};
use crate::{
    member_table::{Closed, MemberTable, Origin},
    secret_reader::SecretReader,
    secret_store::StoredSecret,
    secret_watches::SecretWatches,
    source_configs::SourceConfigs,
    source_state::{Source, SourceState, SourceStates},
    watch::{Change, Relist},
};

fn secret_key(ns: &str, name: &str) -> CredentialKey {
    CredentialKey::new(ns, name)
}

/// Without Karmada there is no `Cluster` event.
#[cfg(not(feature = "karmada"))]
type ClusterEvent = std::convert::Infallible;

/// Without `ClusterProfile`s there is no profile watch: a stream that never yields.
#[cfg(not(feature = "clusterprofile"))]
type ProfileWatches = futures::stream::Pending<std::convert::Infallible>;

/// The future that keeps a [`Registry`](crate::Registry) current: it runs the watches and the
/// directory poll and sends the [`RegistryEvent`](crate::RegistryEvent)s.
///
/// Drive it with [`run`](Self::run) (in a task you own, or in your `select!`). It spawns
/// nothing: every watch is a stream it polls itself, so dropping the future stops them all.
///
/// # Recovery
/// Watch errors are logged (`warn`) and retried with member-client's
/// [`watch_backoff`](member_client::watch_backoff::watch_backoff) (0.5 s doubling to 10 s, reset only by
/// progress); a directory that cannot be listed is logged and read again at the next poll.
/// Members keep their last known state meanwhile, except members whose Secret namespace has
/// never been listed and whose list is refused (403): they are `SecretForbidden` until a retry
/// lists it.
#[derive(Debug)]
pub struct RegistryDriver {
    table: MemberTable,
    sources: SourceStates,
    configs: SourceConfigs,
    readers: SecretReaders,
}

/// How each source's Secrets are read again, and parsed as its watch parses them: one reader
/// per configured source that watches Secrets.
#[derive(Debug, Default)]
struct SecretReaders(Vec<(SecretSource, SecretReader)>);

impl SecretReaders {
    #[cfg_attr(
        not(any(
            feature = "karmada",
            feature = "argocd",
            feature = "kubeconfig-secrets"
        )),
        expect(
            unused_variables,
            reason = "a build without those sources reads no Secret"
        )
    )]
    fn new(configs: &SourceConfigs) -> Self {
        #[allow(unused_mut, reason = "a build without those sources adds none")]
        let mut readers = Vec::new();
        #[cfg(feature = "karmada")]
        if let Some((client, _)) = &configs.karmada {
            let parse: Parse = Arc::new(StoredSecret::from_secret);
            readers.push((
                SecretSource::Karmada,
                SecretReader::new(client.clone(), parse),
            ));
        }
        #[cfg(feature = "argocd")]
        if let Some((client, _)) = &configs.argocd {
            let parse: Parse = Arc::new(StoredSecret::from_secret);
            readers.push((
                SecretSource::ArgoCd,
                SecretReader::new(client.clone(), parse),
            ));
        }
        #[cfg(feature = "kubeconfig-secrets")]
        if let Some((client, config)) = &configs.kubeconfig {
            let config = config.clone();
            let parse: Parse =
                Arc::new(move |key, secret| StoredSecret::parsed(config.credential(key, secret)));
            readers.push((
                SecretSource::Kubeconfig,
                SecretReader::new(client.clone(), parse),
            ));
        }
        Self(readers)
    }

    /// What `source`'s watch stores for `secret`.
    fn stored(&self, source: SecretSource, key: &CredentialKey, secret: &Secret) -> StoredSecret {
        match self.0.iter().find(|(s, _)| *s == source) {
            Some((_, reader)) => reader.stored(key, secret),
            // A watch runs only for a configured source, which has a reader.
            None => StoredSecret::from_secret(key, secret),
        }
    }
}

/// Which source a Secret watch serves: what a Secret coming and going means differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SecretSource {
    /// The Secrets hold the credentials of Karmada Clusters, defined elsewhere.
    Karmada,
    /// Each Secret defines an Argo CD member and holds its credential.
    ArgoCd,
    /// Each Secret holds a kubeconfig that defines a member (Cluster API, Flux).
    Kubeconfig,
}

impl RegistryDriver {
    pub(crate) fn new(table: MemberTable, sources: SourceStates, configs: SourceConfigs) -> Self {
        Self {
            table,
            sources,
            readers: SecretReaders::new(&configs),
            configs,
        }
    }

    /// Runs until the event receiver is dropped.
    pub async fn run(mut self) {
        // A closed channel is the only way out, and it is not an error.
        let Err(Closed) = self.run_until_closed().await;
        tracing::debug!("event receiver dropped; registry stopped");
    }

    async fn run_until_closed(&mut self) -> Result<std::convert::Infallible, Closed> {
        let mut clusters = self.cluster_watch();
        let mut cluster_relist = Relist::<String>::default();
        let mut karmada_secrets = SecretWatches::default();
        #[cfg(feature = "argocd")]
        let mut argocd_secrets = (self.configs.argocd.as_ref()).map_or_else(
            SecretWatches::default,
            |(client, config)| {
                SecretWatches::labelled(client, &config.namespaces, labels::ARGOCD_CLUSTER_SELECTOR)
            },
        );
        #[cfg(not(feature = "argocd"))]
        let mut argocd_secrets = SecretWatches::default();
        #[cfg(feature = "kubeconfig-secrets")]
        let mut kubeconfig_secrets = (self.configs.kubeconfig.as_ref()).map_or_else(
            SecretWatches::default,
            |(client, config)| {
                SecretWatches::labelled(client, &config.namespaces, &config.label_selector)
            },
        );
        #[cfg(not(feature = "kubeconfig-secrets"))]
        let mut kubeconfig_secrets = SecretWatches::default();
        let mut profiles = self.profile_watches();
        let mut files = BTreeSet::<PathBuf>::new();
        #[cfg(feature = "directory")]
        let mut poll = self
            .configs
            .directory
            .as_ref()
            .map(|d| tokio::time::interval(d.poll_interval));
        #[cfg(not(feature = "directory"))]
        let mut poll: Option<tokio::time::Interval> = None;
        if let Some(poll) = &mut poll {
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }

        // A source left out of the build still has its branch, over a stream that never yields.
        loop {
            tokio::select! {
                () = self.table.closed() => return Err(Closed),
                Some(event) = clusters.next() => {
                    self.on_cluster_event(event, &mut cluster_relist, &mut karmada_secrets).await?;
                }
                Some((ns, event)) = karmada_secrets.next() => {
                    if let Some(change) = karmada_secrets.record(&ns, event, secret_key) {
                        self.on_secret(SecretSource::Karmada, &ns, change).await?;
                    }
                }
                Some((ns, event)) = argocd_secrets.next() => {
                    if let Some(change) = argocd_secrets.record(&ns, event, secret_key) {
                        self.on_secret(SecretSource::ArgoCd, &ns, change).await?;
                    }
                }
                Some((ns, event)) = kubeconfig_secrets.next() => {
                    if let Some(change) = kubeconfig_secrets.record(&ns, event, secret_key) {
                        self.on_secret(SecretSource::Kubeconfig, &ns, change).await?;
                    }
                }
                Some(item) = profiles.next() => self.on_profile_item(item, &mut profiles).await?,
                Some(_) = next_tick(&mut poll) => self.poll_directory(&mut files).await?,
            }
        }
    }

    async fn on_secret(
        &mut self,
        source: SecretSource,
        ns: &str,
        change: Change<Secret, CredentialKey>,
    ) -> Result<(), Closed> {
        match change {
            Change::Applied(secret, key) => {
                if source == SecretSource::Karmada
                    && !self.table.karmada_secret_refs().contains(&key)
                {
                    // A namespace's watch sees all its Secrets; one that no Cluster names is
                    // neither parsed nor kept, nor does its change invalidate anything. A
                    // Cluster that names it later restarts the watch (sync_karmada_watches).
                    return self.table.secret_unreferenced(key).await;
                }
                // The Secret first, so that a new Argo CD member is Ready at its first settle
                // and a token change is a rotation of the definition in use.
                let stored = self.readers.stored(source, &key, &secret);
                self.table.apply_secret(key.clone(), stored).await?;
                #[cfg(feature = "argocd")]
                if source == SecretSource::ArgoCd {
                    let definition = argocd::member_from_secret(&secret);
                    return (self.table)
                        .apply_definition(Origin::ArgoCd(key), definition)
                        .await;
                }
                #[cfg(feature = "kubeconfig-secrets")]
                if let Some((_, config)) = (self.configs.kubeconfig.as_ref())
                    .filter(|_| source == SecretSource::Kubeconfig)
                {
                    let definition = config.member_from_secret(&secret);
                    return (self.table)
                        .apply_definition(Origin::Kubeconfig(key), definition)
                        .await;
                }
                Ok(())
            }
            Change::Deleted(key) => self.secret_gone(source, &key).await,
            Change::Listed(gone) => {
                for key in gone {
                    self.secret_gone(source, &key).await?;
                }
                match source {
                    SecretSource::Karmada => self.table.namespace_listed(ns).await,
                    SecretSource::ArgoCd => {
                        let listed = Source::ArgoCdSecrets(ns.to_owned());
                        self.sources.set(&listed, SourceState::Listed);
                        Ok(())
                    }
                    SecretSource::Kubeconfig => {
                        let listed = Source::KubeconfigSecrets(ns.to_owned());
                        self.sources.set(&listed, SourceState::Listed);
                        Ok(())
                    }
                }
            }
            Change::Failed(err) => {
                match source {
                    SecretSource::Karmada => {
                        if let Some(message) = list_forbidden(&err) {
                            tracing::warn!(namespace = %ns, error = %err, "may not list Secrets here; its members are SecretForbidden until that changes");
                            return self.table.namespace_forbidden(ns, message.to_owned()).await;
                        }
                        tracing::warn!(namespace = %ns, error = %err, "watching Secrets failed; retrying");
                    }
                    SecretSource::ArgoCd => {
                        tracing::warn!(namespace = %ns, error = %err, "watching Argo CD cluster Secrets failed; retrying");
                        self.list_failed(&Source::ArgoCdSecrets(ns.to_owned()), &err);
                    }
                    SecretSource::Kubeconfig => {
                        tracing::warn!(namespace = %ns, error = %err, "watching kubeconfig Secrets failed; retrying");
                        self.list_failed(&Source::KubeconfigSecrets(ns.to_owned()), &err);
                    }
                }
                Ok(())
            }
        }
    }

    /// A Secret is gone. A definition it held goes first, so that its member is Removed
    /// rather than SecretNotFound.
    async fn secret_gone(
        &mut self,
        source: SecretSource,
        key: &CredentialKey,
    ) -> Result<(), Closed> {
        let origin = match source {
            SecretSource::Karmada => None,
            SecretSource::ArgoCd => Some(Origin::ArgoCd(key.clone())),
            SecretSource::Kubeconfig => Some(Origin::Kubeconfig(key.clone())),
        };
        if let Some(origin) = origin {
            self.table.remove_definition(&origin).await?;
        }
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
}

/// The branches of the sources left out of the build: their streams never yield.
#[cfg(not(all(feature = "karmada", feature = "clusterprofile")))]
impl RegistryDriver {
    #[cfg(not(feature = "karmada"))]
    fn cluster_watch(&self) -> futures::stream::BoxStream<'static, ClusterEvent> {
        futures::stream::pending().boxed()
    }

    #[cfg(not(feature = "karmada"))]
    async fn on_cluster_event(
        &mut self,
        event: ClusterEvent,
        _: &mut Relist<String>,
        _: &mut SecretWatches,
    ) -> Result<(), Closed> {
        match event {}
    }

    #[cfg(not(feature = "clusterprofile"))]
    fn profile_watches(&self) -> ProfileWatches {
        futures::stream::pending()
    }

    #[cfg(not(feature = "clusterprofile"))]
    async fn on_profile_item(
        &mut self,
        item: std::convert::Infallible,
        _: &mut ProfileWatches,
    ) -> Result<(), Closed> {
        match item {}
    }
}
