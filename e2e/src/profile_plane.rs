//! [`ProfilePlane`]: a control-plane inventory of ClusterProfiles shaped the way OCM publishes
//! them, the credential Secrets `e2e/plugins/secretreader-plugin.py` reads, its provider file,
//! and collectors reading the inventory (`--members-from clusterprofile`).

use std::path::PathBuf;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api,
    api::{DeleteParams, DynamicObject},
};
use serde_json::{Value, json};
use testkit::{Cluster, crd};

use crate::{
    collector_run::MemberSource,
    kubeconfig_plane::{PluginFiles, kubeconfig::base64, plugin_path},
    manifest_apply::force_apply,
};

/// The manager and access provider name OCM's profiles carry.
pub const OCM_MANAGER: &str = "open-cluster-management";

/// An inventory namespace of ClusterProfiles, a namespace of per-cluster token Secrets, and
/// the provider file that maps OCM's provider to the secretreader plugin.
pub struct ProfilePlane {
    /// The inventory as a collector's source (`--members-from clusterprofile`).
    pub source: MemberSource,
    profiles: Api<DynamicObject>,
    secrets: Api<Secret>,
    /// The inventory (`--clusterprofile-namespace`).
    pub namespace: String,
    /// The plugin's files, and the provider file beside them.
    files: PluginFiles,
    /// Where the plugin reads each cluster's token Secret.
    secrets_namespace: String,
}

impl ProfilePlane {
    /// Installs the ClusterProfile CRD on `control_plane` and creates the two namespaces and
    /// the provider file.
    pub async fn create(control_plane: &Cluster) -> anyhow::Result<Self> {
        let admin = control_plane.admin_client()?;
        crd::install_cluster_profile_crd(&admin).await?;
        let namespace = control_plane.create_namespace("inventory").await?;
        let secrets_ns = control_plane.create_namespace("creds").await?;
        let files = PluginFiles::for_cluster(control_plane, "profile-plane")?;
        let provider_file = files.path("providers.json").display().to_string();
        let from = ["--members-from", "clusterprofile"];
        let namespace_flag = ["--clusterprofile-namespace", &namespace];
        let provider_flag = ["--clusterprofile-provider-file", &provider_file];
        let flags = [&from[..], &namespace_flag, &provider_flag].concat();
        let source = MemberSource::new(control_plane, &flags);
        let plane = Self {
            source,
            profiles: Api::namespaced_with(
                admin.clone(),
                &namespace,
                &crd::cluster_profile_resource(),
            ),
            secrets: Api::namespaced(admin, &secrets_ns),
            namespace,
            files,
            secrets_namespace: secrets_ns,
        };
        plane.pin_provider(&json!({}))?;
        Ok(plane)
    }

    /// Rewrites the provider file with Tether's pins (`profileConfigPins`, `serverPatterns`,
    /// `proxyPatterns`) on the provider entry; a collector reads it when it starts.
    pub fn pin_provider(&self, pins: &Value) -> anyhow::Result<()> {
        let secrets_ns = ("PLUGIN_SECRET_NAMESPACE", self.secrets_namespace.clone());
        let env = self.files.env(&[secrets_ns]);
        let mut provider = json!({
            "name": OCM_MANAGER,
            "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": plugin_path("secretreader-plugin.py")?,
                "env": env.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
                "provideClusterInfo": true,
            },
            "profileSourcedCLIArgsPolicy": "Ignore",
            "profileSourcedEnvVarsPolicy": "Ignore",
        });
        for (key, value) in pins.as_object().into_iter().flatten() {
            provider[key] = value.clone();
        }
        let providers = json!({ "providers": [provider] });
        std::fs::write(self.provider_file(), serde_json::to_vec_pretty(&providers)?)?;
        Ok(())
    }

    /// The provider file (`--clusterprofile-provider-file`).
    pub fn provider_file(&self) -> PathBuf {
        self.files.path("providers.json")
    }

    /// How many times the plugin has run.
    pub fn plugin_runs(&self) -> usize {
        self.files.runs().len()
    }

    /// Writes (creates or rewrites) the Secret the plugin reads for `cluster_name`: `token`.
    pub async fn write_token(&self, cluster_name: &str, token: &str) -> anyhow::Result<()> {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": cluster_name},
            "stringData": {"token": token},
        });
        force_apply(&self.secrets, cluster_name, &secret).await
    }

    /// Publishes profile `name` as OCM does for `member`: its access provider
    /// [`OCM_MANAGER`] has the member's server and CA and `{"clusterName": name}` for the
    /// plugin. `providers` replaces `status.accessProviders` when given.
    pub async fn publish(
        &self,
        name: &str,
        member: &Cluster,
        providers: Option<Value>,
    ) -> anyhow::Result<()> {
        let providers = providers.unwrap_or_else(|| json!([ocm_access_provider(name, member)]));
        let profile = json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": name, "labels": {"x-k8s.io/cluster-manager": OCM_MANAGER}},
            "spec": {"displayName": name, "clusterManager": {"name": OCM_MANAGER}},
        });
        force_apply(&self.profiles, name, &profile).await?;
        let status = json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": name},
            "status": {"accessProviders": providers},
        });
        force_apply(&self.profiles, name, &status).await
    }

    /// Deletes profile `name`.
    pub async fn delete(&self, name: &str) -> anyhow::Result<()> {
        self.profiles
            .delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting ClusterProfile {name}"))?;
        Ok(())
    }
}

/// The access provider OCM writes for `member`, named [`OCM_MANAGER`].
pub fn ocm_access_provider(cluster_name: &str, member: &Cluster) -> Value {
    access_provider(member.endpoint(), member.ca_pem(), cluster_name)
}

/// An access provider named [`OCM_MANAGER`] with whatever server, CA and plugin
/// `clusterName` a profile's writer chooses.
pub fn access_provider(server: &str, ca_pem: &str, cluster_name: &str) -> Value {
    json!({"name": OCM_MANAGER, "cluster": {
        "server": server,
        "certificate-authority-data": base64(ca_pem),
        "extensions": [{"name": "client.authentication.k8s.io/exec",
                        "extension": {"clusterName": cluster_name}}],
    }})
}
