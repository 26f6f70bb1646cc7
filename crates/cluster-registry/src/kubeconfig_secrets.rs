//! Secrets that hold a kubeconfig, one member each: Cluster API's `<cluster>-kubeconfig`
//! Secrets and Flux-style `value` / `value.yaml` Secrets.
//!
//! Cluster API writes, for every workload cluster, a Secret named `<cluster>-kubeconfig`
//! labelled `cluster.x-k8s.io/cluster-name=<cluster>`, whose key `value` is a kubeconfig (the
//! kubeadm control plane provider rewrites it as it renews the client certificate). Flux reads
//! kubeconfigs from the keys `value` or `value.yaml` of any Secret. Either way the Secret
//! defines the member and holds its credential; a rewritten Secret is a rotation. What the
//! kubeconfig may say is [`kubeconfig`](crate::kubeconfig)'s business.

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Secret;
use member_client::{SecretRef, SourceError};

use crate::{
    InvalidReason, MemberDefinition, kubeconfig, member::checked_spec, secret_store::secret_data,
    stored_credential::StoredCredential,
};

/// The label Cluster API puts on a cluster's Secrets; its value is the cluster's name.
pub const CAPI_CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// Which Secrets hold member kubeconfigs, and how to read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeconfigSecretsConfig {
    /// The namespaces to watch. No Secret is listed cluster-wide.
    pub namespaces: Vec<String>,
    /// The label selector that finds the Secrets.
    pub label_selector: String,
    /// The data keys that may hold the kubeconfig, tried in order.
    pub keys: Vec<String>,
    /// The label whose value names the member; the Secret's name when `None` or absent.
    pub name_label: Option<String>,
}

impl KubeconfigSecretsConfig {
    /// Cluster API's kubeconfig Secrets in `namespaces`: label
    /// `cluster.x-k8s.io/cluster-name`, key `value`, the member named after the cluster.
    pub fn cluster_api(namespaces: Vec<String>) -> Self {
        Self {
            namespaces,
            label_selector: CAPI_CLUSTER_NAME_LABEL.to_owned(),
            keys: vec!["value".to_owned()],
            name_label: Some(CAPI_CLUSTER_NAME_LABEL.to_owned()),
        }
    }

    /// Flux-style kubeconfig Secrets in `namespaces` selected by `label_selector`: key `value`
    /// or `value.yaml`, the member named after the Secret.
    pub fn flux(namespaces: Vec<String>, label_selector: impl Into<String>) -> Self {
        Self {
            namespaces,
            label_selector: label_selector.into(),
            keys: vec!["value".to_owned(), "value.yaml".to_owned()],
            name_label: None,
        }
    }

    /// Reads the member a kubeconfig Secret defines. Its
    /// [`secret_ref`](crate::MemberSpec::secret_ref) is the Secret itself.
    pub(crate) fn member_from_secret(&self, secret: &Secret) -> MemberDefinition {
        let secret_name = secret.metadata.name.clone().unwrap_or_default();
        let name = self
            .name_label
            .as_ref()
            .and_then(|label| secret.metadata.labels.as_ref()?.get(label))
            .filter(|n| !n.is_empty())
            .cloned()
            .unwrap_or_else(|| secret_name.clone());
        let key = SecretRef::new(
            secret.metadata.namespace.clone().unwrap_or_default(),
            secret_name,
        );
        let spec = self
            .parsed(&key, &secret_data(secret))
            .map_err(|err| InvalidReason::SecretInvalid(err.to_string()))
            .and_then(|member| {
                let mut spec = checked_spec(
                    name.clone(),
                    member.server,
                    key.clone(),
                    member.insecure_skip_tls_verify,
                    member.proxy_url,
                )?;
                spec.tls_server_name = member.tls_server_name;
                Ok(spec)
            });
        MemberDefinition { name, spec }
    }

    /// The credential in a kubeconfig Secret.
    pub(crate) fn credential(
        &self,
        key: &SecretRef,
        secret: &Secret,
    ) -> Result<StoredCredential, SourceError> {
        self.parsed(key, &secret_data(secret))?.credential
    }

    fn parsed(
        &self,
        key: &SecretRef,
        data: &BTreeMap<String, Bytes>,
    ) -> Result<kubeconfig::KubeconfigMember, SourceError> {
        let raw =
            self.keys
                .iter()
                .find_map(|k| data.get(k))
                .ok_or_else(|| SourceError::MissingKey {
                    key: key.clone(),
                    field: self.keys.join(" or "),
                })?;
        kubeconfig::parse(key, raw)
    }
}
