//! The sources a registry was built to read, with the clients it reads them through.

use std::fmt;

use kube::Client;

use crate::{
    argocd::ArgoCdConfig, clusterprofile::ClusterProfileConfig, directory::DirectoryConfig,
    karmada::KarmadaConfig, kubeconfig_secrets::KubeconfigSecretsConfig, source_state::Source,
};

/// What [`RegistryBuilder`](crate::RegistryBuilder) collects and
/// [`RegistryDriver`](crate::RegistryDriver) runs. `Debug` shows the configs, not the clients.
#[derive(Clone, Default)]
pub(crate) struct SourceConfigs {
    pub(crate) karmada: Option<(Client, KarmadaConfig)>,
    pub(crate) argocd: Option<(Client, ArgoCdConfig)>,
    pub(crate) directory: Option<DirectoryConfig>,
    pub(crate) kubeconfig: Option<(Client, KubeconfigSecretsConfig)>,
    pub(crate) clusterprofile: Option<(Client, ClusterProfileConfig)>,
}

impl SourceConfigs {
    /// Every source of definitions these configure: one per Argo CD namespace.
    pub(crate) fn sources(&self) -> impl Iterator<Item = Source> + '_ {
        let karmada = self.karmada.iter().map(|_| Source::KarmadaClusters);
        let argocd = self
            .argocd
            .iter()
            .flat_map(|(_, config)| config.namespaces.iter().cloned().map(Source::ArgoCdSecrets));
        let directory = self
            .directory
            .iter()
            .map(|config| Source::Directory(config.path.clone()));
        let kubeconfig = self.kubeconfig.iter().flat_map(|(_, config)| {
            (config.namespaces.iter().cloned()).map(Source::KubeconfigSecrets)
        });
        let profiles = self.clusterprofile.iter().flat_map(|(_, config)| {
            (config.namespaces.iter().cloned()).map(Source::ClusterProfiles)
        });
        (karmada.chain(argocd).chain(directory))
            .chain(kubeconfig)
            .chain(profiles)
    }
}

impl fmt::Debug for SourceConfigs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceConfigs")
            .field("karmada", &self.karmada.as_ref().map(|(_, c)| c))
            .field("argocd", &self.argocd.as_ref().map(|(_, c)| c))
            .field("kubeconfig", &self.kubeconfig.as_ref().map(|(_, c)| c))
            .field(
                "clusterprofile",
                &self.clusterprofile.as_ref().map(|(_, c)| c),
            )
            .field("directory", &self.directory)
            .finish()
    }
}
