//! Whether each source of member definitions has listed. A source that cannot list leaves the
//! consumer with no members (or stale ones) while nothing else looks wrong, so its state is
//! observable, not only logged.

use std::{collections::BTreeMap, fmt, path::PathBuf, sync::Arc};

use tokio::sync::watch;

use crate::SourceKind;

/// One source of member definitions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Karmada `Cluster`s.
    KarmadaClusters,
    /// Argo CD cluster Secrets in one namespace.
    ArgoCdSecrets(String),
    /// The member files of a directory.
    Directory(PathBuf),
    /// Kubeconfig Secrets (Cluster API, Flux) in one namespace.
    KubeconfigSecrets(String),
    /// `ClusterProfile`s in one namespace (inventory).
    ClusterProfiles(String),
}

impl Source {
    /// The kind of source it is.
    pub fn kind(&self) -> SourceKind {
        match self {
            Self::KarmadaClusters => SourceKind::Karmada,
            Self::ArgoCdSecrets(_) => SourceKind::ArgoCd,
            Self::Directory(_) => SourceKind::Directory,
            Self::KubeconfigSecrets(_) => SourceKind::Kubeconfig,
            Self::ClusterProfiles(_) => SourceKind::ClusterProfile,
        }
    }

    /// Where it reads: its namespace or directory; empty for Karmada `Cluster`s, which are
    /// cluster-scoped.
    pub fn location(&self) -> String {
        match self {
            Self::KarmadaClusters => String::new(),
            Self::ArgoCdSecrets(ns) | Self::KubeconfigSecrets(ns) | Self::ClusterProfiles(ns) => {
                ns.clone()
            }
            Self::Directory(path) => path.display().to_string(),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::KarmadaClusters => f.write_str("Karmada Clusters"),
            Self::ArgoCdSecrets(ns) => write!(f, "Argo CD cluster Secrets in namespace {ns}"),
            Self::Directory(path) => write!(f, "member files in {}", path.display()),
            Self::KubeconfigSecrets(ns) => write!(f, "kubeconfig Secrets in namespace {ns}"),
            Self::ClusterProfiles(ns) => write!(f, "ClusterProfiles in namespace {ns}"),
        }
    }
}

/// How a source's last list (or directory scan) went.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceState {
    /// Not listed yet.
    Listing,
    /// Listed; its watch (or poll) keeps it current.
    Listed,
    /// The last list failed, with this error; it is retried with backoff, and the members it
    /// defined before keep their last known state meanwhile.
    Failing(String),
}

/// Every source's [`SourceState`], observable.
///
/// The [`RegistryDriver`](crate::RegistryDriver) writes it; [`Registry::sources`](crate::Registry::sources)
/// hands it out.
///
/// ```
/// # use cluster_registry::{RegistryBuilder, Source, SourceState};
/// # async fn doc(client: kube::Client) {
/// let (registry, _events, _driver) = RegistryBuilder::new().karmada(client).build();
/// assert_eq!(
///     registry.sources().now().get(&Source::KarmadaClusters),
///     Some(&SourceState::Listing)
/// );
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct SourceStates {
    states: Arc<watch::Sender<BTreeMap<Source, SourceState>>>,
}

impl SourceStates {
    /// `sources`, each [`Listing`](SourceState::Listing).
    pub(crate) fn new(sources: impl IntoIterator<Item = Source>) -> Self {
        let states = sources
            .into_iter()
            .map(|source| (source, SourceState::Listing))
            .collect();
        Self {
            states: Arc::new(watch::Sender::new(states)),
        }
    }

    /// Sets `source`'s state; subscribers are woken only if it changed.
    pub(crate) fn set(&self, source: &Source, state: SourceState) {
        self.states.send_if_modified(|states| {
            states.insert(source.clone(), state.clone()).as_ref() != Some(&state)
        });
    }

    /// Every source's state now.
    pub fn now(&self) -> BTreeMap<Source, SourceState> {
        self.states.borrow().clone()
    }

    /// A receiver that sees every change from now on.
    pub fn subscribe(&self) -> watch::Receiver<BTreeMap<Source, SourceState>> {
        self.states.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_see_changes_only() {
        let states = SourceStates::new([Source::KarmadaClusters]);
        let mut rx = states.subscribe();
        states.set(&Source::KarmadaClusters, SourceState::Listing);
        assert!(!rx.has_changed().unwrap_or(true));
        states.set(
            &Source::KarmadaClusters,
            SourceState::Failing("forbidden".into()),
        );
        assert!(rx.has_changed().unwrap_or(false));
        assert_eq!(
            rx.borrow_and_update().get(&Source::KarmadaClusters),
            Some(&SourceState::Failing("forbidden".into()))
        );
    }

    #[test]
    fn sources_are_named_for_people() {
        assert_eq!(
            Source::ArgoCdSecrets("argocd".into()).to_string(),
            "Argo CD cluster Secrets in namespace argocd"
        );
    }
}
