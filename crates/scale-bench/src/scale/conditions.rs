//! What the collector wrote into the `Cluster`s' status, followed by a watch on the control
//! plane: when each member first became `Ready=True`, and every member seen with
//! `CredentialsValid=False` since a mark. A watch delivers every status write, so a member that
//! went False and back between two looks is still caught.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use cluster_registry::karmada::Cluster as KarmadaCluster;
use kube::{Api, Client, ResourceExt as _};
use testkit::FoldedWatch;

#[derive(Debug, Default)]
struct State {
    first_ready: HashMap<String, Instant>,
    ready_now: BTreeSet<String>,
    credentials_false_now: BTreeSet<String>,
    /// `Some` after [`ConditionWatch::mark`]: members seen `CredentialsValid=False` since.
    credentials_false_since_mark: Option<BTreeSet<String>>,
}

/// A watch on every `Cluster`'s conditions; stops when dropped.
pub struct ConditionWatch(FoldedWatch<State>);

impl ConditionWatch {
    /// Starts watching `Cluster`s through the control plane's admin `client`.
    pub fn start(client: Client) -> Self {
        Self(FoldedWatch::start(Api::all(client), observe))
    }

    /// Members whose `Ready` is `True` now.
    pub fn ready(&self) -> usize {
        self.0.state().ready_now.len()
    }

    /// When each member was first seen `Ready=True`.
    pub fn first_ready(&self) -> HashMap<String, Instant> {
        self.0.state().first_ready.clone()
    }

    /// From now on, remember every member seen with `CredentialsValid=False`.
    pub fn mark(&self) {
        let mut state = self.0.state();
        let now = state.credentials_false_now.clone();
        state.credentials_false_since_mark = Some(now);
    }

    /// Members seen with `CredentialsValid=False` since [`mark`](Self::mark) (including those
    /// False at the mark).
    pub fn credentials_false_since_mark(&self) -> BTreeSet<String> {
        self.0
            .state()
            .credentials_false_since_mark
            .clone()
            .unwrap_or_default()
    }
}

fn observe(state: &mut State, cluster: &KarmadaCluster) {
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
