//! SIG-Multicluster `ClusterProfile`s (`multicluster.x-k8s.io/v1alpha1`, KEP-4322): the
//! inventory multi-cluster tools read, as a source of members and as what the collector
//! publishes.
//!
//! A profile holds no credential. Its `status.accessProviders[]` name the ways in; a consumer
//! maps a provider's name to an exec plugin (KEP-541) through a [`ProviderFile`], and hands the
//! provider's `client.authentication.k8s.io/exec` extension to the plugin as
//! `spec.cluster.config`.
//!
//! [`ClusterProfile`] declares the upstream fields under upstream's names, so Tether reads and
//! writes the objects other tools do. [`crd_yaml`] is the matching CRD for control planes that lack
//! one; `deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml` is generated from it.

mod definition;
mod provider_file;
mod provider_pins;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use definition::ClusterProfileConfig;
pub use provider_file::{
    CliArgsPolicy, EnvVarsPolicy, MAX_PROVIDER_FILE_BYTES, Provider, ProviderFile,
    ProviderFileError,
};
pub use provider_pins::{
    AnchoredPattern, ConfigPin, PROFILE_NAME_VAR, PROFILE_NAMESPACE_VAR, ProfilePins,
};

/// The label that says who manages a profile; Tether's published profiles carry
/// [`TETHER_CLUSTER_MANAGER`].
pub const CLUSTER_MANAGER_LABEL: &str = "x-k8s.io/cluster-manager";
/// The cluster manager name of the profiles Tether publishes, and of its access provider.
pub const TETHER_CLUSTER_MANAGER: &str = "tether";
/// The label that marks a control-plane Secret as the credential of one member, its value the
/// member's name: the binding label of [`MEMBER_LABEL`](crate::MEMBER_LABEL), so the member
/// a Secret serves and the member `tether-credential` hands it out for are one. The publisher
/// writes it on the Secret of each member it publishes, where no other value is set.
pub const CREDENTIAL_MEMBER_LABEL: &str = crate::secret_binding::MEMBER_LABEL;
/// The annotation on a member's credential Secret recording the server that credential is for,
/// as the member's published profile states it. `tether-credential` serves the Secret only to
/// a client connecting to that server.
pub const CREDENTIAL_SERVER_ANNOTATION: &str = "tether.io/server";
/// The Secret type the apiserver fills with a ServiceAccount's token: never a member's
/// credential for `tether-credential`, whatever its labels say.
pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
/// The one standardised condition type: whether the member's control plane is healthy.
pub const CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";
pub use crate::crd::LocalSecretReference;
pub use crate::kubeconfig::EXEC_EXTENSION;
/// The extension holding extra plugin arguments (a JSON array of strings).
pub const ADDITIONAL_ARGS_EXTENSION: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-args";
/// The extension holding extra plugin environment variables (a JSON map of name to value).
pub const ADDITIONAL_ENVS_EXTENSION: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs";

/// The spec of a `ClusterProfile`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    namespaced,
    status = "ClusterProfileStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A SIG-Multicluster ClusterProfile (`multicluster.x-k8s.io/v1alpha1`): one cluster of an inventory and the ways to reach it."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Who manages this profile.
    pub cluster_manager: ClusterManager,
}

/// Who manages a profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterManager {
    /// The manager's name, also in the [`CLUSTER_MANAGER_LABEL`] label.
    pub name: String,
}

/// The status of a `ClusterProfile`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterProfileStatus {
    /// [`CONTROL_PLANE_HEALTHY`], and whatever else the manager reports.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The cluster's versions.
    pub version: Option<ProfileVersion>,
    /// Named properties of the cluster.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
    /// The ways to reach the cluster, by provider name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access_providers: Vec<AccessProvider>,
    /// The same shape as `accessProviders`, deprecated in its favour; read when that is empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub credential_providers: Vec<AccessProvider>,
}

/// The versions of a cluster.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileVersion {
    /// The Kubernetes version (`gitVersion` of `/version`).
    pub kubernetes: Option<String>,
}

/// One named property of a cluster.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Property {
    /// The property's name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// When it was last observed.
    pub last_observed_time: Option<Time>,
}

/// One way to reach a cluster: a provider name and the kubeconfig `Cluster` to use with it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AccessProvider {
    /// The provider's name, matched against a [`ProviderFile`]'s providers.
    pub name: String,
    /// Where the cluster is and how to verify it.
    #[serde(default)]
    pub cluster: ProfileCluster,
}

/// A kubeconfig `Cluster` (clientcmd v1), under kubeconfig's field names.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", default)]
pub struct ProfileCluster {
    /// The apiserver's URL.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server: String,
    /// The name the serving certificate is verified against.
    pub tls_server_name: Option<String>,
    /// Skip verifying the serving certificate.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
    /// A file path; refused, since a profile must not make Tether read its files.
    pub certificate_authority: Option<String>,
    /// Base64 of the PEM CA bundle.
    pub certificate_authority_data: Option<String>,
    /// An `http://` or `https://` proxy.
    pub proxy_url: Option<String>,
    /// Whether responses may be served uncompressed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_compression: bool,
    /// Named extensions, such as [`EXEC_EXTENSION`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<NamedExtension>,
}

impl ProfileCluster {
    /// The extension named `name`, if present.
    pub fn extension(&self, name: &str) -> Option<&serde_json::Value> {
        self.extensions
            .iter()
            .find(|e| e.name == name)
            .map(|e| &e.extension)
    }
}

/// One named extension of a kubeconfig `Cluster`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamedExtension {
    /// The extension's name.
    pub name: String,
    /// Its value: any JSON object.
    #[schemars(schema_with = "any_object")]
    pub extension: serde_json::Value,
}

/// What the `tether` access provider of a published profile hands to `tether-credential` as
/// `spec.cluster.config`: which member, and the control-plane Secret that holds its
/// credential.
///
/// The Secret is absent for a member whose credential does not live in a Secret (a member
/// file, a plugin the collector runs); `tether-credential` then says so and fails.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TetherExecExtension {
    /// The member's name in Tether.
    pub member: String,
    /// The Secret holding the member's credential.
    pub secret_ref: Option<LocalSecretReference>,
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The CRD for [`ClusterProfile`] as YAML, the content of
/// `deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml`.
///
/// NOTE: it declares only the fields Tether reads and writes. Where another tool installed
/// upstream's CRD (a superset), keep that one.
///
/// # Errors
/// [`Error::CrdYaml`](crate::Error::CrdYaml) if serialization fails (it does not in practice).
pub fn crd_yaml() -> crate::Result<String> {
    crate::crd::yaml::<ClusterProfile>(
        "cluster_registry::clusterprofile::ClusterProfile",
        " -- clusterprofile",
        "deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_profile_as_ocm_publishes_it() {
        let profile: ClusterProfile = serde_json::from_value(json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "cluster1", "namespace": "open-cluster-management-addon",
                         "labels": {CLUSTER_MANAGER_LABEL: "open-cluster-management"}},
            "spec": {"displayName": "cluster1", "clusterManager": {"name": "open-cluster-management"}},
            "status": {
                "version": {"kubernetes": "v1.36.5"},
                "accessProviders": [{"name": "open-cluster-management", "cluster": {
                    "server": "https://cluster1.example:6443",
                    "certificate-authority-data": "Y2E=",
                    "tls-server-name": "api.cluster1",
                    "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": "cluster1"}}],
                }}],
            },
        }))
        .unwrap();
        let status = profile.status.unwrap();
        let cluster = &status.access_providers[0].cluster;
        let exec_extension = json!({"clusterName": "cluster1"});
        assert_eq!(cluster.extension(EXEC_EXTENSION), Some(&exec_extension));
        let want = ProfileCluster {
            server: "https://cluster1.example:6443".to_owned(),
            tls_server_name: Some("api.cluster1".to_owned()),
            certificate_authority_data: Some("Y2E=".to_owned()),
            extensions: vec![NamedExtension {
                name: EXEC_EXTENSION.to_owned(),
                extension: exec_extension,
            }],
            ..ProfileCluster::default()
        };
        assert_eq!(*cluster, want);
        let kubernetes = status.version.and_then(|version| version.kubernetes);
        assert_eq!(kubernetes.as_deref(), Some("v1.36.5"));
    }

    #[test]
    fn crd_is_namespaced_with_a_status_subresource_and_open_extensions() {
        let yaml = crd_yaml().unwrap();
        crate::crd::assert_committed::<ClusterProfile>(
            "Namespaced",
            "clusterprofiles.multicluster.x-k8s.io",
            &yaml,
            include_str!("../../../deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml"),
        );
        for open_or_kebab in [
            "x-kubernetes-preserve-unknown-fields: true",
            "certificate-authority-data",
        ] {
            assert!(yaml.contains(open_or_kebab), "{yaml}");
        }
    }
}
