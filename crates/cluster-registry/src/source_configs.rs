//! The sources a registry was built to read, with the clients it reads them through.

use std::fmt;

#[cfg(any(
    feature = "karmada",
    feature = "argocd",
    feature = "kubeconfig-secrets",
    feature = "clusterprofile"
))]
use kube::Client;

#[cfg(feature = "argocd")]
use crate::argocd::ArgoCdConfig;
#[cfg(feature = "clusterprofile")]
use crate::clusterprofile::ClusterProfileConfig;
#[cfg(feature = "directory")]
use crate::directory::DirectoryConfig;
#[cfg(feature = "karmada")]
use crate::karmada::KarmadaConfig;
#[cfg(feature = "kubeconfig-secrets")]
use crate::kubeconfig_secrets::KubeconfigSecretsConfig;
use crate::source_state::Source;

/// What [`RegistryBuilder`](crate::RegistryBuilder) collects and
/// [`RegistryDriver`](crate::RegistryDriver) runs. `Debug` shows the configs, not the clients.
#[derive(Clone, Default)]
/// A build has the fields of its sources' features only.
pub(crate) struct SourceConfigs {
    #[cfg(feature = "karmada")]
    pub(crate) karmada: Option<(Client, KarmadaConfig)>,
    #[cfg(feature = "argocd")]
    pub(crate) argocd: Option<(Client, ArgoCdConfig)>,
    #[cfg(feature = "directory")]
    pub(crate) directory: Option<DirectoryConfig>,
    #[cfg(feature = "kubeconfig-secrets")]
    pub(crate) kubeconfig: Option<(Client, KubeconfigSecretsConfig)>,
    #[cfg(feature = "clusterprofile")]
    pub(crate) clusterprofile: Option<(Client, ClusterProfileConfig)>,
}

impl SourceConfigs {
    /// Every source of definitions these configure: one per Argo CD namespace.
    pub(crate) fn sources(&self) -> Vec<Source> {
        let sources = std::iter::empty::<Source>();
        #[cfg(feature = "karmada")]
        let sources = sources.chain(self.karmada.iter().map(|_| Source::KarmadaClusters));
        #[cfg(feature = "argocd")]
        let sources =
            sources.chain((self.argocd.iter()).flat_map(|(_, config)| {
                config.namespaces.iter().cloned().map(Source::ArgoCdSecrets)
            }));
        #[cfg(feature = "directory")]
        let sources = sources
            .chain((self.directory.iter()).map(|config| Source::Directory(config.path.clone())));
        #[cfg(feature = "kubeconfig-secrets")]
        let sources = sources.chain(self.kubeconfig.iter().flat_map(|(_, config)| {
            (config.namespaces.iter().cloned()).map(Source::KubeconfigSecrets)
        }));
        #[cfg(feature = "clusterprofile")]
        let sources = sources.chain(self.clusterprofile.iter().flat_map(|(_, config)| {
            (config.namespaces.iter().cloned()).map(Source::ClusterProfiles)
        }));
        sources.collect()
    }
}

impl fmt::Debug for SourceConfigs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("SourceConfigs");
        #[cfg(feature = "karmada")]
        out.field("karmada", &self.karmada.as_ref().map(|(_, c)| c));
        #[cfg(feature = "argocd")]
        out.field("argocd", &self.argocd.as_ref().map(|(_, c)| c));
        #[cfg(feature = "kubeconfig-secrets")]
        out.field("kubeconfig", &self.kubeconfig.as_ref().map(|(_, c)| c));
        #[cfg(feature = "clusterprofile")]
        out.field(
            "clusterprofile",
            &self.clusterprofile.as_ref().map(|(_, c)| c),
        );
        #[cfg(feature = "directory")]
        out.field("directory", &self.directory);
        out.finish()
    }
}
