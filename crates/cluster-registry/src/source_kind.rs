//! [`SourceKind`]: which kind of source defines a member, by one name everywhere.

/// The kind of source a member's definition comes from. Its [`as_str`](Self::as_str) is the
/// `source` label of every metric, the read API's and `collector check`'s `source`.
///
/// ```
/// use cluster_registry::{Origin, SourceKind};
/// assert_eq!(Origin::Karmada("member1".into()).kind(), SourceKind::Karmada);
/// assert_eq!(SourceKind::Kubeconfig.to_string(), "kubeconfig");
/// assert_eq!(SourceKind::ArgoCd.as_str(), "argocd");
/// assert_eq!(SourceKind::ClusterProfile.to_string(), "clusterprofile");
/// ```
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, strum::IntoStaticStr, strum::Display,
)]
#[strum(serialize_all = "lowercase")]
#[non_exhaustive]
pub enum SourceKind {
    /// Karmada `Cluster`s.
    Karmada,
    /// Argo CD cluster Secrets.
    ArgoCd,
    /// Member files in a directory.
    Directory,
    /// Secrets holding a kubeconfig: Cluster API's and Flux's alike, which the registry
    /// cannot tell apart.
    Kubeconfig,
    /// SIG-Multicluster `ClusterProfile`s.
    ClusterProfile,
}

impl SourceKind {
    /// Its label: `karmada`, `argocd`, `directory`, `kubeconfig` or `clusterprofile`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
