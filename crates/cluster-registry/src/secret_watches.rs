//! The Secret watches of one source: one stream per namespace, and what each has applied.

use std::collections::{BTreeMap, BTreeSet};

use futures::{
    StreamExt as _,
    stream::{self, AbortHandle, BoxStream, SelectAll},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    runtime::watcher::{self, Event},
};
use member_client::SecretRef;

use crate::watch::{Relist, watch};

pub(crate) type SecretWatchItem = (String, Result<Event<Secret>, watcher::Error>);

/// The Secret watches of one source: one stream per namespace, and what each has applied.
#[derive(Default)]
pub(crate) struct SecretWatches {
    streams: SelectAll<BoxStream<'static, SecretWatchItem>>,
    pub(crate) namespaces: BTreeMap<String, (AbortHandle, Relist<SecretRef>)>,
}

impl SecretWatches {
    /// One watch per namespace of `namespaces`, of the Secrets matching `selector`.
    pub(crate) fn labelled(client: &Client, namespaces: &[String], selector: &str) -> Self {
        let mut watches = Self::default();
        for ns in namespaces {
            watches.start(client, ns, watcher::Config::default().labels(selector));
        }
        watches
    }

    pub(crate) fn start(&mut self, client: &Client, namespace: &str, config: watcher::Config) {
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
    pub(crate) fn stop(&mut self, namespace: &str) -> BTreeSet<SecretRef> {
        match self.namespaces.remove(namespace) {
            Some((abort, relist)) => {
                abort.abort();
                relist.into_known()
            }
            None => BTreeSet::new(),
        }
    }

    pub(crate) async fn next(&mut self) -> Option<SecretWatchItem> {
        if self.streams.is_empty() {
            std::future::pending::<()>().await;
        }
        self.streams.next().await
    }
}
