//! [`FoldedWatch`]: a watch on every object of one kind, each change folded into a state that
//! a test or bench reads whenever it likes.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt as _;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource};

/// A watch that hands every applied object to a fold over `S`. A watch delivers every
/// `resourceVersion`, so a change undone between two looks is still seen. Stops when dropped.
pub struct FoldedWatch<S> {
    state: Arc<Mutex<S>>,
    task: tokio::task::JoinHandle<()>,
}

impl<S: Default + Send + 'static> FoldedWatch<S> {
    /// Starts watching `api` (errors are retried with backoff); `fold` sees each object.
    pub fn start<K>(api: Api<K>, fold: impl Fn(&mut S, &K) + Send + 'static) -> Self
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let state = Arc::new(Mutex::new(S::default()));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            let mut objects = watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(next) = objects.next().await {
                if let Ok(object) = next {
                    fold(&mut lock(&shared), &object);
                }
            }
        });
        Self { state, task }
    }

    /// The state folded so far.
    pub fn state(&self) -> MutexGuard<'_, S> {
        lock(&self.state)
    }
}

impl<S> Drop for FoldedWatch<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<S>(state: &Mutex<S>) -> MutexGuard<'_, S> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}
