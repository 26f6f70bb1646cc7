//! What the collector wrote into the `Cluster`s' status, followed by a watch on the control
//! plane: when each member first became `Ready=True`, and every member seen with
//! `CredentialsValid=False` since a mark. A watch delivers every status write, so a member that
//! went False and back between two looks is still caught.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Instant,
};

use cluster_registry::karmada::Cluster as KarmadaCluster;
use futures::StreamExt as _;
use kube::{
    Api, Client, ResourceExt as _,
    runtime::{WatchStreamExt as _, watcher},
};

#[derive(Debug, Default)]
struct State {
    first_ready: HashMap<String, Instant>,
    ready_now: BTreeSet<String>,
    credentials_false_now: BTreeSet<String>,
    /// `Some` after [`ConditionWatch::mark`]: members seen `CredentialsValid=False` since.
    credentials_false_since_mark: Option<BTreeSet<String>>,
}

/// A watch on every `Cluster`'s conditions; stops when dropped.
pub struct ConditionWatch {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ConditionWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ConditionWatch {
    /// Starts watching `Cluster`s through the control plane's admin `client`.
    pub fn start(client: Client) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        let stream = watcher(
            Api::<KarmadaCluster>::all(client),
            watcher::Config::default(),
        )
        .default_backoff()
        .applied_objects()
        .for_each(move |cluster| {
            if let Ok(cluster) = cluster {
                observe(&shared, &cluster);
            }
            std::future::ready(())
        });
        Self {
            state,
            task: tokio::spawn(stream),
        }
    }

    /// Members whose `Ready` is `True` now.
    pub fn ready(&self) -> usize {
        self.lock().ready_now.len()
    }

    /// When each member was first seen `Ready=True`.
    pub fn first_ready(&self) -> HashMap<String, Instant> {
        self.lock().first_ready.clone()
    }

    /// Members whose `CredentialsValid` is `False` now.
    pub fn credentials_false_now(&self) -> BTreeSet<String> {
        self.lock().credentials_false_now.clone()
    }

    /// From now on, remember every member seen with `CredentialsValid=False`.
    pub fn mark(&self) {
        let mut state = self.lock();
        let now = state.credentials_false_now.clone();
        state.credentials_false_since_mark = Some(now);
    }

    /// Members seen with `CredentialsValid=False` since [`mark`](Self::mark) (including those
    /// False at the mark).
    pub fn credentials_false_since_mark(&self) -> BTreeSet<String> {
        self.lock()
            .credentials_false_since_mark
            .clone()
            .unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn observe(state: &Mutex<State>, cluster: &KarmadaCluster) {
    let name = cluster.name_any();
    let status = |type_: &str| {
        cluster
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
            .map(|c| c.status.clone())
    };
    let ready = status("Ready").as_deref() == Some("True");
    let credentials_false = status("CredentialsValid").as_deref() == Some("False");
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    if ready {
        state.ready_now.insert(name.clone());
        state
            .first_ready
            .entry(name.clone())
            .or_insert_with(Instant::now);
    } else {
        state.ready_now.remove(&name);
    }
    if credentials_false {
        state.credentials_false_now.insert(name.clone());
        if let Some(seen) = state.credentials_false_since_mark.as_mut() {
            seen.insert(name);
        }
    } else {
        state.credentials_false_now.remove(&name);
    }
}
