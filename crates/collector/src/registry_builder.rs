//! The registry the flags ask for: the one builder both the collector and `collector check`
//! use, so that the check reads members exactly as the collector does.

use std::sync::Arc;

use anyhow::Context as _;
use cluster_registry::{
    ArgoCdConfig, ClusterProfileConfig, DirectoryConfig, KarmadaConfig, KubeconfigSecretsConfig,
    RegistryBuilder, clusterprofile::ProviderFile,
};
use member_client::{CredentialCacheConfig, federated::FederatedIdentity};

use crate::{
    cli::{Args, MembersFrom},
    control_plane::ControlPlane,
    shard::ShardMode,
};

/// The [`RegistryBuilder`] for `--members-from` and the flags that go with it, reading
/// definitions through `control_plane` where the source lives there.
///
/// # Errors
/// A flag the source needs is missing, the provider file is unusable, or the source needs a
/// control plane and there is none.
pub(crate) fn registry_builder(
    args: &Args,
    control_plane: Option<&ControlPlane>,
) -> anyhow::Result<RegistryBuilder> {
    let builder = RegistryBuilder::new()
        .endpoint_policy(args.endpoint_policy())
        .secret_namespaces(args.secret_namespace.clone())
        .exec_policy(args.exec_policy()?)
        .credential_cache(CredentialCacheConfig {
            refresh_fraction: args.credential_refresh_fraction,
            ..CredentialCacheConfig::default()
        });
    // A replica of a shard group keeps only the credentials of the members it serves.
    let builder = match args.shard.shards {
        ShardMode::Auto => builder.scoped_credentials(),
        ShardMode::Off => builder,
    };
    let builder = match (args.federation.config(), control_plane) {
        (None, _) => builder,
        (Some(config), Some(cp)) => {
            builder.federated_identity(FederatedIdentity::new(cp.client.clone(), config))
        }
        (Some(_), None) => {
            anyhow::bail!("--federated-service-account needs the control plane's client")
        }
    };
    Ok(match (args.sources.members_from, control_plane) {
        (MembersFrom::Directory, _) => {
            let dir = args
                .sources
                .members_dir
                .clone()
                .context("--members-dir is required with --members-from directory")?;
            builder.directory(DirectoryConfig::new(dir))
        }
        (MembersFrom::Karmada, Some(cp)) => builder.karmada_with(
            cp.client.clone(),
            KarmadaConfig {
                secret_label_selector: args.secret_label_selector.clone(),
            },
        ),
        (MembersFrom::Argocd, Some(cp)) => builder.argocd(
            cp.client.clone(),
            ArgoCdConfig {
                namespaces: args.sources.argocd_namespace.clone(),
            },
        ),
        (MembersFrom::Capi, Some(cp)) => builder.kubeconfig_secrets(
            cp.client.clone(),
            KubeconfigSecretsConfig::cluster_api(args.sources.kubeconfig_namespace.clone()),
        ),
        (MembersFrom::Kubeconfig, Some(cp)) => builder.kubeconfig_secrets(
            cp.client.clone(),
            KubeconfigSecretsConfig::flux(
                args.sources.kubeconfig_namespace.clone(),
                args.sources
                    .kubeconfig_selector
                    .clone()
                    .context("--kubeconfig-selector is required with --members-from kubeconfig")?,
            ),
        ),
        (MembersFrom::Clusterprofile, Some(cp)) => {
            builder.clusterprofiles(cp.client.clone(), clusterprofile_config(args)?)
        }
        (_, None) => anyhow::bail!("reading members from the control plane needs its client"),
    })
}

/// The profiles' namespaces and the provider file, read now: a collector with an unusable
/// provider file does not start.
///
/// # Errors
/// No provider file given, or one that cannot be read or used.
fn clusterprofile_config(args: &Args) -> anyhow::Result<ClusterProfileConfig> {
    let path = (args.sources.clusterprofile_provider_file.as_ref())
        .context("--clusterprofile-provider-file is required with --members-from clusterprofile")?;
    let providers = ProviderFile::read(path).with_context(|| format!("{}", path.display()))?;
    tracing::info!(providers = ?providers.names().collect::<Vec<_>>(), "ClusterProfile access providers served");
    Ok(ClusterProfileConfig {
        namespaces: args.sources.clusterprofile_namespace.clone(),
        providers: Arc::new(providers),
    })
}
