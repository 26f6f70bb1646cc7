//! Secrets that hold a kubeconfig, one member each (see [`KubeconfigSecretsConfig`]).

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Secret;
use member_client::{CredentialKey, SourceError};

use crate::{
    InvalidReason, MemberDefinition, kubeconfig, secret_store::secret_data,
    stored_credential::StoredCredential,
};

/// The label Cluster API puts on a cluster's Secrets; its value is the cluster's name.
pub const CAPI_CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// Which Secrets hold member kubeconfigs, and how to read them.
///
/// Secrets that hold a kubeconfig, one member each: Cluster API's `<cluster>-kubeconfig`
/// Secrets and Flux-style `value` / `value.yaml` Secrets.
///
/// Cluster API writes, for every workload cluster, a Secret named `<cluster>-kubeconfig`
/// labelled `cluster.x-k8s.io/cluster-name=<cluster>`, whose key `value` is a kubeconfig (the
/// kubeadm control plane provider rewrites it as it renews the client certificate). Flux reads
/// kubeconfigs from the keys `value` or `value.yaml` of any Secret. Either way the Secret
/// defines the member and holds its credential; a rewritten Secret is a rotation. What the
/// kubeconfig may say is listed in the book (`docs/src/reference/secret-formats.md`).
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
        let key = CredentialKey::new(
            secret.metadata.namespace.clone().unwrap_or_default(),
            secret_name,
        );
        let spec = self
            .parsed(&key, &secret_data(secret))
            .map_err(|err| InvalidReason::SecretInvalid(err.to_string()))
            .and_then(|member| member.spec(name.clone(), key.clone()));
        MemberDefinition { name, spec }
    }

    /// The credential in a kubeconfig Secret.
    pub(crate) fn credential(
        &self,
        key: &CredentialKey,
        secret: &Secret,
    ) -> Result<StoredCredential, SourceError> {
        self.parsed(key, &secret_data(secret))?.credential
    }

    fn parsed(
        &self,
        key: &CredentialKey,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubeconfig::fixtures::{SERVER, kubeconfig};
    use member_client::validation::MemberEndpoint;
    use secrecy::ExposeSecret as _;
    use serde_json::json;

    fn secret(name: &str, labels: serde_json::Value, string_data: serde_json::Value) -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "fleet", "labels": labels},
            "stringData": string_data,
        }))
        .unwrap()
    }

    fn capi() -> KubeconfigSecretsConfig {
        KubeconfigSecretsConfig::cluster_api(vec!["fleet".into()])
    }

    fn flux() -> KubeconfigSecretsConfig {
        KubeconfigSecretsConfig::flux(vec!["fleet".into()], "tether.io/member")
    }

    /// Cluster API's Secret for cluster `wl1`, holding `data`.
    fn wl1(data: serde_json::Value) -> Secret {
        secret(
            "wl1-kubeconfig",
            json!({CAPI_CLUSTER_NAME_LABEL: "wl1"}),
            data,
        )
    }

    fn token_of(config: &KubeconfigSecretsConfig, secret: &Secret) -> String {
        let key = CredentialKey::new("fleet", secret.metadata.name.clone().unwrap());
        let stored = config.credential(&key, secret).unwrap();
        stored
            .static_credential()
            .token()
            .unwrap()
            .expose_secret()
            .to_owned()
    }

    #[test]
    fn a_cluster_api_secret_is_named_after_its_cluster_and_read_from_value() {
        let secret = wl1(json!({"value": kubeconfig(
            &["tls-server-name: api.wl1.internal", "proxy-url: http://p:3128"],
            &["token: capi-tok"],
        )}));
        let def = capi().member_from_secret(&secret);
        assert_eq!(def.name, "wl1");
        let spec = def.spec.unwrap();
        assert_eq!(spec.name, "wl1");
        let endpoint = MemberEndpoint {
            tls_server_name: Some("api.wl1.internal".into()),
            proxy_url: Some("http://p:3128".into()),
            ..MemberEndpoint::new(SERVER)
        };
        assert_eq!(spec.endpoint, endpoint);
        assert_eq!(spec.client_config(None).endpoint, endpoint);
        assert_eq!(
            spec.secret_ref,
            CredentialKey::new("fleet", "wl1-kubeconfig")
        );
        assert_eq!(token_of(&capi(), &secret), "capi-tok");
    }

    #[test]
    fn a_cluster_api_secret_without_the_label_is_named_after_the_secret() {
        let secret = secret(
            "wl1-kubeconfig",
            json!({}),
            json!({"value": kubeconfig(&[], &["token: t"])}),
        );
        assert_eq!(capi().member_from_secret(&secret).name, "wl1-kubeconfig");
    }

    #[test]
    fn a_flux_secret_is_named_after_itself_and_read_from_value_yaml() {
        let secret = secret(
            "prod-eu",
            json!({CAPI_CLUSTER_NAME_LABEL: "ignored", "tether.io/member": ""}),
            json!({"value.yaml": kubeconfig(&[], &["token: flux-tok"])}),
        );
        let def = flux().member_from_secret(&secret);
        assert_eq!(def.name, "prod-eu");
        assert_eq!(def.spec.unwrap().endpoint.url, SERVER);
        assert_eq!(token_of(&flux(), &secret), "flux-tok");
    }

    #[test]
    fn a_secret_without_the_key_is_missing_key() {
        // Cluster API reads only `value`.
        let only_yaml = wl1(json!({"value.yaml": kubeconfig(&[], &["token: t"])}));
        let key = CredentialKey::new("fleet", "wl1-kubeconfig");
        let missing = |got: Result<StoredCredential, SourceError>| match got {
            Err(SourceError::MissingKey { field, .. }) => field,
            other => panic!("not MissingKey: {other:?}"),
        };
        assert_eq!(missing(capi().credential(&key, &only_yaml)), "value");
        let def = capi().member_from_secret(&only_yaml);
        assert_eq!(def.name, "wl1", "an unusable member keeps its name");
        assert_eq!(def.spec.unwrap_err().condition_reason(), "SecretInvalid");
        let other = secret("s", json!({}), json!({"other": "x"}));
        assert_eq!(
            missing(flux().credential(&key, &other)),
            "value or value.yaml"
        );
    }
}
