//! A `ClusterProfile` read as a member: the first access provider the provider file serves
//! gives the endpoint, and its plugin (run as the provider file says) the credential.

use std::{collections::BTreeMap, sync::Arc};

use kube::ResourceExt as _;
use member_client::{
    CredentialKey,
    exec::{ExecCluster, ExecEnvVar},
    text::Text,
};
use serde::Deserialize;

use super::{
    ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, AccessProvider, CliArgsPolicy,
    ClusterProfile, EXEC_EXTENSION, EnvVarsPolicy, Provider, ProviderFile,
    provider_pins::PinnedProfile,
};
use crate::{
    InvalidReason, MemberDefinition, kubeconfig,
    member::checked_spec,
    secret_store::StoredSecret,
    stored_credential::{ExecPlan, StoredCredential},
};

/// Which `ClusterProfile`s define members, and the provider file that says how to reach them.
#[derive(Clone, Debug)]
pub struct ClusterProfileConfig {
    /// The namespaces (inventories) to watch. No profile is listed cluster-wide.
    pub namespaces: Vec<String>,
    /// The exec plugins that serve access providers.
    pub providers: Arc<ProviderFile>,
}

/// What one profile makes: the member, and its credential (the plugin plan) under `key`.
#[derive(Debug)]
pub(crate) struct ProfileMember {
    /// Where the plan is stored: not a Secret, so its namespace is not a namespace name.
    pub(crate) key: CredentialKey,
    pub(crate) definition: MemberDefinition,
    /// `None` when the profile is unusable.
    pub(crate) secret: Option<StoredSecret>,
}

impl ClusterProfileConfig {
    /// The key under which the plan of profile `namespace/name` is stored. `:` is in no
    /// namespace name, so it never names a real Secret.
    pub(crate) fn key(namespace: &str, name: &str) -> CredentialKey {
        CredentialKey::new(format!("clusterprofile:{namespace}"), name)
    }

    /// Reads the member `profile` defines, named after the profile.
    pub(crate) fn member_from_profile(&self, profile: &ClusterProfile) -> ProfileMember {
        let name = profile.name_any();
        let key = Self::key(&profile.namespace().unwrap_or_default(), &name);
        let built = self.built(&name, &key, profile);
        let (spec, secret) = match built {
            Ok((spec, plan)) => (
                Ok(spec),
                Some(StoredSecret::parsed(Ok::<_, member_client::SourceError>(
                    StoredCredential::Exec(Arc::new(plan)),
                ))),
            ),
            Err(reason) => (Err(reason), None),
        };
        ProfileMember {
            key,
            definition: MemberDefinition { name, spec },
            secret,
        }
    }

    fn built(
        &self,
        name: &str,
        key: &CredentialKey,
        profile: &ClusterProfile,
    ) -> Result<(crate::MemberSpec, ExecPlan), InvalidReason> {
        let invalid = |why: &str| InvalidReason::DefinitionInvalid(Text::new(why).into());
        let (access, provider) = self.chosen(profile)?;
        let cluster = &access.cluster;
        // Before anything else is read of the profile: what breaks a pin never becomes a plan.
        let pinned = PinnedProfile {
            name,
            namespace: profile.metadata.namespace.as_deref().unwrap_or_default(),
        };
        provider.pins.check(&provider.name, pinned, cluster)?;
        if cluster.certificate_authority.is_some() {
            return Err(invalid(&format!(
                "access provider {:?} names a certificate-authority file; only \
                 certificate-authority-data is read",
                access.name
            )));
        }
        if cluster.server.trim().is_empty() {
            return Err(invalid(&format!(
                "access provider {:?} has no server",
                access.name
            )));
        }
        let ca_bundle = kubeconfig::ca_data(cluster.certificate_authority_data.as_deref())
            .map_err(|why| invalid(&why))?;
        let tls_server_name = (cluster.tls_server_name.clone()).filter(|n| !n.trim().is_empty());
        let mut spec = checked_spec(
            name.to_owned(),
            cluster.server.clone(),
            key.clone(),
            cluster.insecure_skip_tls_verify,
            cluster.proxy_url.clone(),
        )?;
        spec.endpoint.tls_server_name = tls_server_name.clone();
        let exec_cluster = ExecCluster {
            server: cluster.server.clone(),
            certificate_authority_data: ca_bundle.as_ref().map(|ca| ca.to_vec()),
            tls_server_name,
            insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
            proxy_url: spec.endpoint.proxy_url.clone(),
            config: cluster.extension(EXEC_EXTENSION).cloned(),
        };
        let mut config =
            kubeconfig::exec_config(key, "execConfig", &provider.exec_config, exec_cluster)
                .map_err(|err| invalid(&format!("provider {:?}: {err}", provider.name)))?;
        // The provider's own args and env come from its declaration when it runs; the plan
        // holds only what the profile adds, which the declaration's patterns then check.
        config.args = match provider.cli_args_policy {
            CliArgsPolicy::Append => additional_args(access).map_err(|why| invalid(&why))?,
            CliArgsPolicy::Ignore => Vec::new(),
        };
        let fixed = std::mem::take(&mut config.env);
        config.env = match provider.env_vars_policy {
            EnvVarsPolicy::Ignore => Vec::new(),
            EnvVarsPolicy::Replace => additional_envs(access).map_err(|why| invalid(&why))?,
            EnvVarsPolicy::AppendIfNotExists => (additional_envs(access))
                .map_err(|why| invalid(&why))?
                .into_iter()
                .filter(|var| !fixed.iter().any(|f| f.name == var.name))
                .collect(),
        };
        let declaration = provider.declaration().cloned();
        Ok((
            spec,
            ExecPlan {
                config,
                ca_bundle,
                declaration,
            },
        ))
    }

    /// The first access provider the provider file serves, as upstream's consumer picks it.
    fn chosen<'p>(
        &'p self,
        profile: &'p ClusterProfile,
    ) -> Result<(&'p AccessProvider, &'p Provider), InvalidReason> {
        let status = profile.status.as_ref();
        let offered = status
            .map(|s| match s.access_providers.is_empty() {
                true => &s.credential_providers,
                false => &s.access_providers,
            })
            .map(Vec::as_slice)
            .unwrap_or_default();
        offered
            .iter()
            .find_map(|access| Some((access, self.providers.provider(&access.name)?)))
            .ok_or_else(|| {
                let offered: Vec<&str> = offered.iter().map(|a| a.name.as_str()).collect();
                let served: Vec<&str> = self.providers.names().collect();
                InvalidReason::ProviderNotFound(
                    Text::new(&format!(
                        "the profile offers access providers {offered:?}; the provider file serves {served:?}"
                    ))
                    .into(),
                )
            })
    }
}

fn additional_args(access: &AccessProvider) -> Result<Vec<String>, String> {
    match access.cluster.extension(ADDITIONAL_ARGS_EXTENSION) {
        None => Ok(Vec::new()),
        Some(value) => Vec::<String>::deserialize(value)
            .map_err(|_| format!("{ADDITIONAL_ARGS_EXTENSION} is not a list of strings")),
    }
}

fn additional_envs(access: &AccessProvider) -> Result<Vec<ExecEnvVar>, String> {
    // Upstream encodes them as a map of name to value; a BTreeMap gives them a stable order.
    match access.cluster.extension(ADDITIONAL_ENVS_EXTENSION) {
        None => Ok(Vec::new()),
        Some(value) => BTreeMap::<String, String>::deserialize(value)
            .map(|vars| {
                (vars.into_iter())
                    .map(|(name, value)| ExecEnvVar { name, value })
                    .collect()
            })
            .map_err(|_| format!("{ADDITIONAL_ENVS_EXTENSION} is not a map of names to values")),
    }
}

#[cfg(test)]
mod tests;
