//! The watches of one source: one stream per namespace, and what each has applied.

use std::collections::{BTreeMap, BTreeSet};

use futures::{
    StreamExt as _,
    stream::{self, AbortHandle, BoxStream, SelectAll},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, Resource, ResourceExt as _,
    runtime::watcher::{self, Event},
};
use member_client::CredentialKey;
use serde::de::DeserializeOwned;

use crate::watch::{Change, Relist, watch};

/// One event of the watch of a namespace, with the namespace.
pub(crate) type WatchItem<K> = (String, Result<Event<K>, watcher::Error>);

/// The watches of one source: one stream per namespace, and which objects each has applied,
/// by the key their credential is stored under.
pub(crate) struct NamespacedWatches<K> {
    streams: SelectAll<BoxStream<'static, WatchItem<K>>>,
    pub(crate) namespaces: BTreeMap<String, (AbortHandle, Relist<CredentialKey>)>,
}

/// The Secret watches of one source.
pub(crate) type SecretWatches = NamespacedWatches<Secret>;

impl<K> Default for NamespacedWatches<K> {
    fn default() -> Self {
        Self {
            streams: SelectAll::new(),
            namespaces: BTreeMap::new(),
        }
    }
}

impl<K> NamespacedWatches<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    K::DynamicType: Default,
{
    /// One watch per namespace of `namespaces`, of the objects matching `selector`.
    pub(crate) fn labelled(client: &Client, namespaces: &[String], selector: &str) -> Self {
        Self::configured(
            client,
            namespaces,
            &watcher::Config::default().labels(selector),
        )
    }

    /// One watch per namespace of `namespaces`, configured by `config`.
    pub(crate) fn configured(
        client: &Client,
        namespaces: &[String],
        config: &watcher::Config,
    ) -> Self {
        let mut watches = Self::default();
        for ns in namespaces {
            watches.start(client, ns, config.clone());
        }
        watches
    }

    pub(crate) fn start(&mut self, client: &Client, namespace: &str, config: watcher::Config) {
        let ns = namespace.to_owned();
        let (stream, abort) = stream::abortable(
            watch(Api::<K>::namespaced(client.clone(), namespace), config)
                .map(move |event| (ns.clone(), event)),
        );
        self.streams.push(stream.boxed());
        self.namespaces
            .insert(namespace.to_owned(), (abort, Relist::default()));
    }

    /// Stops the watch of `namespace` and returns the keys it had applied.
    pub(crate) fn stop(&mut self, namespace: &str) -> BTreeSet<CredentialKey> {
        match self.namespaces.remove(namespace) {
            Some((abort, relist)) => {
                abort.abort();
                relist.into_known()
            }
            None => BTreeSet::new(),
        }
    }

    /// Records `event` of namespace `ns` in its [`Relist`], the keys being `key(ns, name)`.
    pub(crate) fn record(
        &mut self,
        ns: &str,
        event: Result<watcher::Event<K>, watcher::Error>,
        key: impl Fn(&str, &str) -> CredentialKey,
    ) -> Option<Change<K, CredentialKey>> {
        let (_, relist) = self.namespaces.get_mut(ns)?;
        relist.record(event, |object| key(ns, &object.name_any()))
    }

    pub(crate) async fn next(&mut self) -> Option<WatchItem<K>> {
        if self.streams.is_empty() {
            std::future::pending::<()>().await;
        }
        self.streams.next().await
    }
}
