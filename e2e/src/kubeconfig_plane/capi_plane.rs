//! [`CapiPlane`]: a control-plane namespace of Cluster API kubeconfig Secrets.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::Patch};
use serde_json::json;
use testkit::Cluster;

use super::kubeconfig::{Kubeconfig, base64};
use crate::{
    collector_run::{RunningCollector, start_probing},
    manifest_apply::force_apply,
};

/// The label Cluster API puts on a cluster's Secrets; its value names the member.
pub const CAPI_CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// A control-plane namespace of Cluster API kubeconfig Secrets, and collectors reading it.
pub struct CapiPlane {
    control_plane: Cluster,
    secrets: Api<Secret>,
    /// The namespace holding the Secrets (`--kubeconfig-namespace`).
    pub namespace: String,
}

impl CapiPlane {
    /// Creates a fresh namespace on `control_plane` for the Secrets.
    ///
    /// # Errors
    /// API errors.
    pub async fn create(control_plane: &Cluster) -> anyhow::Result<Self> {
        let namespace = control_plane.create_namespace("capi").await?;
        Ok(Self {
            control_plane: control_plane.clone(),
            secrets: Api::namespaced(control_plane.admin_client()?, &namespace),
            namespace,
        })
    }

    /// Writes (creates or rewrites) `<member>-kubeconfig`, labelled for `member`, holding
    /// `kubeconfig` under `value`; returns once the apiserver acknowledged the write.
    ///
    /// # Errors
    /// API errors.
    pub async fn write(&self, member: &str, kubeconfig: &Kubeconfig) -> anyhow::Result<()> {
        let name = format!("{member}-kubeconfig");
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": { CAPI_CLUSTER_NAME_LABEL: member },
            },
            "type": "cluster.x-k8s.io/secret",
            "data": { "value": base64(kubeconfig.to_yaml()?) },
        });
        self.secrets
            .patch(&name, &force_apply(), &Patch::Apply(&secret))
            .await
            .with_context(|| format!("writing Secret {}/{name}", self.namespace))?;
        Ok(())
    }

    /// Starts a collector reading this namespace's Secrets (`--members-from capi`), probing
    /// every `probe_period`, with `extra` flags; its API is read with the admin token.
    ///
    /// # Errors
    /// As [`RunningCollector::start`].
    pub async fn start_collector(
        &self,
        probe_period: Duration,
        extra: &[&str],
    ) -> anyhow::Result<RunningCollector> {
        let source = [
            "--members-from",
            "capi",
            "--kubeconfig-namespace",
            &self.namespace,
        ];
        start_probing(&self.control_plane, &source, probe_period, extra).await
    }
}
