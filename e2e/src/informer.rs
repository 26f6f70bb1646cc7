//! [`Informer`]: a reflector driven until dropped, as a controller runs one.

use std::{fmt::Debug, hash::Hash, sync::Arc, time::Duration};

use futures::StreamExt as _;
use kube::{
    Api, Resource, ResourceExt as _,
    runtime::{WatchStreamExt as _, reflector, watcher},
};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

/// A reflector over one [`Api`], driven in a task until dropped: an informer that keeps
/// whatever credential its client was built with.
pub struct Informer<K: Resource + 'static>
where
    K::DynamicType: Hash + Eq,
{
    store: reflector::Store<K>,
    task: JoinHandle<()>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Hash + Eq + Clone,
{
    /// Starts listing and watching `api`.
    pub fn start(api: Api<K>) -> Self {
        let (store, writer) = reflector::store();
        let stream = reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
        let task = tokio::spawn(stream.for_each(|_| std::future::ready(())));
        Self { store, task }
    }

    /// The object named `name`, as the informer holds it now.
    pub fn find(&self, name: &str) -> Option<Arc<K>> {
        self.store
            .state()
            .into_iter()
            .find(|o| o.name_any() == name)
    }

    /// Polls up to `limit` until the informer holds `name`; whether it does.
    pub async fn wait_for(&self, name: &str, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline && self.find(name).is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.find(name).is_some()
    }
}

impl<K: Resource + 'static> Drop for Informer<K>
where
    K::DynamicType: Hash + Eq,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}
