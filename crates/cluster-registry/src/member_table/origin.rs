//! Where a member's definition came from.

use std::path::{Path, PathBuf};

use member_client::CredentialKey;

use crate::SourceKind;

/// Where a member's definition came from. One origin defines at most one member.
///
/// ```
/// use cluster_registry::Origin;
/// let origin = Origin::Karmada("member1".into());
/// assert_eq!(origin.kind().as_str(), "karmada");
/// assert_eq!(origin.to_string(), "Karmada Cluster member1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Origin {
    /// A Karmada `Cluster`, by name.
    Karmada(String),
    /// An Argo CD cluster Secret.
    ArgoCd(CredentialKey),
    /// A member file.
    File(PathBuf),
    /// A Secret holding a kubeconfig (Cluster API, Flux).
    Kubeconfig(CredentialKey),
    /// A `ClusterProfile`, by the key its plugin plan is stored under.
    ClusterProfile(CredentialKey),
}

impl Origin {
    /// The kind of source it is.
    pub fn kind(&self) -> SourceKind {
        match self {
            Self::Karmada(_) => SourceKind::Karmada,
            Self::ArgoCd(_) => SourceKind::ArgoCd,
            Self::File(_) => SourceKind::Directory,
            Self::Kubeconfig(_) => SourceKind::Kubeconfig,
            Self::ClusterProfile(_) => SourceKind::ClusterProfile,
        }
    }

    /// The [`CredentialKey`] of the member defined by the file at `path`: no namespace, the
    /// path as the name.
    pub(crate) fn file_key(path: &Path) -> CredentialKey {
        CredentialKey::new("", path.display().to_string())
    }

    /// The key the credential of a definition from this origin must be stored under: its own
    /// Secret, member file or profile. `None` for a Karmada `Cluster`, which names a Secret
    /// that [`SecretBinding`](crate::secret_binding) must bind to it.
    pub(super) fn own_credential(&self) -> Option<CredentialKey> {
        match self {
            Self::Karmada(_) => None,
            Self::ArgoCd(key) | Self::Kubeconfig(key) | Self::ClusterProfile(key) => {
                Some(key.clone())
            }
            Self::File(path) => Some(Self::file_key(path)),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Karmada(name) => write!(f, "Karmada Cluster {name}"),
            Self::ArgoCd(key) => write!(f, "Argo CD cluster Secret {key}"),
            Self::File(path) => write!(f, "member file {}", path.display()),
            Self::Kubeconfig(key) => write!(f, "kubeconfig Secret {key}"),
            Self::ClusterProfile(key) => write!(
                f,
                "ClusterProfile {}/{}",
                key.namespace.trim_start_matches("clusterprofile:"),
                key.name
            ),
        }
    }
}
