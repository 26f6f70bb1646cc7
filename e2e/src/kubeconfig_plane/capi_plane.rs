//! [`CapiPlane`]: a control-plane namespace of Cluster API kubeconfig Secrets.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;
use testkit::Cluster;

use super::kubeconfig::{Kubeconfig, base64};
use crate::{collector_run::MemberSource, manifest_apply::force_apply};

/// The label Cluster API puts on a cluster's Secrets; its value names the member.
pub const CAPI_CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// A control-plane namespace of Cluster API kubeconfig Secrets, and collectors reading it.
pub struct CapiPlane {
    /// The Secrets as a collector's source (`--members-from capi`).
    pub source: MemberSource,
    secrets: Api<Secret>,
    /// The namespace holding the Secrets (`--kubeconfig-namespace`).
    pub namespace: String,
}

impl CapiPlane {
    /// Creates a fresh namespace on `control_plane` for the Secrets.
    pub async fn create(control_plane: &Cluster) -> anyhow::Result<Self> {
        let namespace = control_plane.create_namespace("capi").await?;
        let from = ["--members-from", "capi"];
        let namespace_flag = ["--kubeconfig-namespace", &namespace];
        Ok(Self {
            source: MemberSource::new(control_plane, &[&from[..], &namespace_flag].concat()),
            secrets: Api::namespaced(control_plane.admin_client()?, &namespace),
            namespace,
        })
    }

    /// Writes (creates or rewrites) `<member>-kubeconfig`, labelled for `member`, holding
    /// `kubeconfig` under `value`; returns once the apiserver acknowledged the write.
    pub async fn write(&self, member: &str, kubeconfig: &Kubeconfig) -> anyhow::Result<()> {
        let name = format!("{member}-kubeconfig");
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": { CAPI_CLUSTER_NAME_LABEL: member },
            },
            "type": "cluster.x-k8s.io/secret",
            "data": { "value": base64(kubeconfig.to_yaml()?) },
        });
        force_apply(&self.secrets, &name, &secret).await
    }
}
