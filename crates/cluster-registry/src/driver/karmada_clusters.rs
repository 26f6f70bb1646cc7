//! What the driver does with Karmada `Cluster` watch events, and the Secret watches they
//! call for: one per namespace that some Cluster's `secretRef` points to.

use std::collections::BTreeSet;

use futures::{StreamExt as _, stream::BoxStream};
use kube::{Api, ResourceExt as _, runtime::watcher};

use super::RegistryDriver;
use crate::{
    karmada::{self, Cluster},
    member_table::{Closed, Origin},
    secret_watches::SecretWatches,
    source_state::{Source, SourceState},
    watch::{Change, Relist, watch},
};

/// One event of the watch of Karmada `Cluster`s.
pub(super) type ClusterEvent = Result<watcher::Event<Cluster>, watcher::Error>;

impl RegistryDriver {
    /// The watch of every Karmada `Cluster`; one that never yields when Karmada is not read.
    pub(super) fn cluster_watch(&self) -> BoxStream<'static, ClusterEvent> {
        match &self.configs.karmada {
            Some((client, _)) => watch(
                Api::<Cluster>::all(client.clone()),
                watcher::Config::default(),
            )
            .boxed(),
            None => futures::stream::pending().boxed(),
        }
    }

    pub(super) async fn on_cluster_event(
        &mut self,
        event: ClusterEvent,
        relist: &mut Relist<String>,
        secrets: &mut SecretWatches,
    ) -> Result<(), Closed> {
        if let Some(change) = relist.record(event, Cluster::name_any) {
            self.on_cluster(change).await?;
        }
        self.sync_karmada_watches(secrets).await
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
}
