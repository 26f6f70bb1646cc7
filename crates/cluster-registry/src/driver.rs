//! [`RegistryDriver`]: the future that runs the registry's watches and directory poll and
//! feeds what they see to the member table.

use std::{collections::BTreeSet, path::PathBuf};

use futures::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt as _, runtime::watcher};
use member_client::{CredentialKey, list_forbidden};

mod clusterprofiles;
mod directory_poll;

use directory_poll::next_tick;

use crate::{
    argocd,
    clusterprofile::ClusterProfileConfig,
    karmada::{self, Cluster},
    labels,
    member_table::{Closed, MemberTable, Origin},
    secret_store::StoredSecret,
    secret_watches::{NamespacedWatches, SecretWatches},
    source_configs::SourceConfigs,
    source_state::{Source, SourceState, SourceStates},
    watch::{Change, Relist, watch},
};

fn secret_key(ns: &str, name: &str) -> CredentialKey {
    CredentialKey::new(ns, name)
}

/// The future that keeps a [`Registry`](crate::Registry) current: it runs the watches and the
/// directory poll and sends the [`RegistryEvent`](crate::RegistryEvent)s.
///
/// Drive it with [`run`](Self::run) (in a task you own, or in your `select!`). It spawns
/// nothing: every watch is a stream it polls itself, so dropping the future stops them all.
///
/// # Recovery
/// Watch errors are logged (`warn`) and retried with member-client's
/// [`watch_backoff`](member_client::watch_backoff) (0.5 s doubling to 10 s, reset only by
/// progress); a directory that cannot be listed is logged and read again at the next poll.
/// Members keep their last known state meanwhile, except members whose Secret namespace has
/// never been listed and whose list is refused (403): they are `SecretForbidden` until a retry
/// lists it.
#[derive(Debug)]
pub struct RegistryDriver {
    table: MemberTable,
    sources: SourceStates,
    configs: SourceConfigs,
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
        let mut clusters = match &self.configs.karmada {
            Some((client, _)) => watch(
                Api::<Cluster>::all(client.clone()),
                watcher::Config::default(),
            )
            .boxed(),
            None => stream::pending().boxed(),
        };
        let mut cluster_relist = Relist::<String>::default();
        let mut karmada_secrets = SecretWatches::default();
        let mut argocd_secrets = (self.configs.argocd.as_ref()).map_or_else(
            SecretWatches::default,
            |(client, config)| {
                SecretWatches::labelled(client, &config.namespaces, labels::ARGOCD_CLUSTER_SELECTOR)
            },
        );
        let mut kubeconfig_secrets = (self.configs.kubeconfig.as_ref()).map_or_else(
            SecretWatches::default,
            |(client, config)| {
                SecretWatches::labelled(client, &config.namespaces, &config.label_selector)
            },
        );
        let mut profiles = (self.configs.clusterprofile.as_ref()).map_or_else(
            NamespacedWatches::default,
            |(client, config)| {
                NamespacedWatches::configured(
                    client,
                    &config.namespaces,
                    &watcher::Config::default(),
                )
            },
        );
        let mut files = BTreeSet::<PathBuf>::new();
        let mut poll = self
            .configs
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
                    if let Some(change) = cluster_relist.record(event, Cluster::name_any) {
                        self.on_cluster(change).await?;
                    }
                    self.sync_karmada_watches(&mut karmada_secrets).await?;
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
                Some((ns, event)) = profiles.next() => {
                    if let Some(change) = profiles.record(&ns, event, ClusterProfileConfig::key) {
                        self.on_profile(&ns, change).await?;
                    }
                }
                Some(_) = next_tick(&mut poll) => self.poll_directory(&mut files).await?,
            }
        }
    }

    async fn on_cluster(&mut self, change: Change<Cluster, String>) -> Result<(), Closed> {
        match change {
            Change::Applied(cluster, name) => {
                let definition = karmada::member_from_cluster(&cluster);
                self.table
                    .apply_definition(Origin::Karmada(name), definition)
                    .await
            }
            Change::Deleted(name) => self.table.remove_definition(&Origin::Karmada(name)).await,
            Change::Listed(gone) => {
                for name in gone {
                    self.table.remove_definition(&Origin::Karmada(name)).await?;
                }
                self.sources
                    .set(&Source::KarmadaClusters, SourceState::Listed);
                Ok(())
            }
            Change::Failed(err) => {
                tracing::warn!(error = %err, "watching Karmada Clusters failed; retrying");
                self.list_failed(&Source::KarmadaClusters, &err);
                Ok(())
            }
        }
    }

    /// Watches the Secrets of exactly the namespaces Karmada members reference.
    async fn sync_karmada_watches(&mut self, watches: &mut SecretWatches) -> Result<(), Closed> {
        let Some((client, config)) = &self.configs.karmada else {
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
        let secret_watch = || {
            let cfg = watcher::Config::default();
            match &config.secret_label_selector {
                Some(selector) => cfg.labels(selector),
                None => cfg,
            }
        };
        for ns in new {
            tracing::debug!(namespace = %ns, "watching Secrets");
            watches.start(client, ns, secret_watch());
        }
        // A newly named Secret that its namespace's watch saw and dropped: watch again, so that
        // the list brings it; the keys the old watch knew stay known, so that the relist still
        // removes what is gone.
        let dropped: BTreeSet<String> = (self.table.dropped_but_named().into_iter())
            .map(|key| key.namespace)
            .filter(|ns| watches.namespaces.contains_key(ns))
            .collect();
        for ns in dropped {
            tracing::debug!(namespace = %ns, "a Cluster names a Secret not kept; listing Secrets again");
            let known = watches.stop(&ns);
            watches.start(client, &ns, secret_watch());
            if let Some((_, relist)) = watches.namespaces.get_mut(&ns) {
                for key in &known {
                    relist.applied(key, false);
                }
            }
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
                let kubeconfig = self.configs.kubeconfig.as_ref().map(|(_, c)| c);
                let stored = match (source, kubeconfig) {
                    (SecretSource::Kubeconfig, Some(config)) => {
                        StoredSecret::parsed(config.credential(&key, &secret))
                    }
                    _ => StoredSecret::from_secret(&key, &secret),
                };
                self.table.apply_secret(key.clone(), stored).await?;
                match (source, kubeconfig) {
                    (SecretSource::ArgoCd, _) => {
                        let definition = argocd::member_from_secret(&secret);
                        self.table
                            .apply_definition(Origin::ArgoCd(key), definition)
                            .await
                    }
                    (SecretSource::Kubeconfig, Some(config)) => {
                        let definition = config.member_from_secret(&secret);
                        self.table
                            .apply_definition(Origin::Kubeconfig(key), definition)
                            .await
                    }
                    _ => Ok(()),
                }
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
