//! Karmada `Cluster` objects (`cluster.karmada.io/v1alpha1`): member definitions whose
//! credential lives in a Secret with the keys [`TOKEN_KEY`] and [`CA_BUNDLE_KEY`].
//!
//! [`Cluster`] declares only the fields Tether reads, plus the `status` fields the collector
//! writes, under Karmada's own names, so Tether reads and writes the objects of a real Karmada
//! control plane. [`crd_yaml`] is the matching (smaller) CRD for control planes without Karmada;
//! `deploy/crds/cluster.karmada.io_clusters.yaml` is generated from it.

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, ResourceExt as _};
use member_client::{Credential, CredentialKey, SourceError, validation};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[cfg(feature = "minting")]
use crate::minting::{MintRequest, TokenHome};
use crate::{
    InvalidReason, MemberDefinition, MemberSpec, Result,
    federation::{self, Federation},
    member::checked_spec,
};

pub use crate::crd::LocalSecretReference;

/// Secret data key holding the bearer token.
pub const TOKEN_KEY: &str = "token";
/// Secret data key holding the PEM CA bundle.
pub const CA_BUNDLE_KEY: &str = "caBundle";

/// Where Karmada member Secrets are watched.
#[derive(Clone, Debug, Default)]
pub struct KarmadaConfig {
    /// Only Secrets with these labels are watched in the referenced namespaces (`None`: all
    /// Secrets of those namespaces). Set it when a referenced namespace holds many unrelated
    /// Secrets; Secrets without the labels are then [`SecretNotFound`](crate::InvalidReason::SecretNotFound).
    pub secret_label_selector: Option<String>,
}

/// How Karmada reaches a member: `Push` (the control plane calls the member's apiserver, which
/// is what Tether does) or `Pull` (an agent in the member calls the control plane).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SyncMode {
    /// The control plane reaches the member with the credential in `secretRef`.
    Push,
    /// An agent in the member reaches the control plane; Tether ignores such members.
    Pull,
}

/// The spec of a Karmada `Cluster`, limited to what Tether reads.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(group = "cluster.karmada.io", version = "v1alpha1", kind = "Cluster")]
#[kube(
    status = "ClusterStatus",
    derive = "PartialEq",
    doc = "A Karmada member cluster (`cluster.karmada.io/v1alpha1`), limited to what Tether reads and writes."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// `Push` or `Pull`.
    pub sync_mode: SyncMode,
    /// The member apiserver's URL.
    pub api_endpoint: Option<String>,
    /// The Secret holding `token` and `caBundle`.
    pub secret_ref: Option<LocalSecretReference>,
    /// Skip verifying the member's serving certificate.
    #[serde(
        rename = "insecureSkipTLSVerification",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verification: bool,
    /// An `http://`, `https://` or `socks5://` proxy (Tether supports the first two).
    #[serde(rename = "proxyURL")]
    pub proxy_url: Option<String>,
}

/// The status of a Karmada `Cluster`, limited to what the collector writes.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterStatus {
    /// The member's Kubernetes version (`git_version` of `/version`).
    pub kubernetes_version: Option<String>,
    /// `Ready` and `CredentialsValid` (and Karmada's own, when it runs too).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Node counts.
    pub node_summary: Option<NodeSummary>,
}

/// How many nodes a member has, and how many are ready.
#[serde_with::skip_serializing_none]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    /// All nodes.
    pub total_num: Option<i32>,
    /// Nodes whose `Ready` condition is `True`.
    pub ready_num: Option<i32>,
}

/// Reads the member definition from a `Cluster`.
///
/// A `Pull`-mode Cluster is [`InvalidReason::PullMode`]; a missing `apiEndpoint` or
/// `secretRef`, or a bad endpoint or proxy, is invalid with its reason. Whether the Secret
/// exists, is bound to this Cluster ([`MEMBER_LABEL`](crate::MEMBER_LABEL): a Secret serves one
/// member only) and holds a usable credential is decided against the
/// [`SecretStore`](crate::SecretStore).
pub(crate) fn member_from_cluster(cluster: &Cluster) -> MemberDefinition {
    let name = cluster.name_any();
    let spec = &cluster.spec;
    let result = (|| {
        if spec.sync_mode == SyncMode::Pull {
            return Err(InvalidReason::PullMode);
        }
        if let Some(federation) = federation::from_annotations(cluster.annotations())? {
            return federated_member(cluster, federation);
        }
        let secret_ref = spec
            .secret_ref
            .as_ref()
            .ok_or_else(|| InvalidReason::DefinitionInvalid("spec.secretRef is not set".into()))?;
        let secret_ref = CredentialKey::new(&secret_ref.namespace, &secret_ref.name);
        let member = checked_spec(
            name.clone(),
            spec.api_endpoint.clone().unwrap_or_default(),
            secret_ref.clone(),
            spec.insecure_skip_tls_verification,
            spec.proxy_url.clone(),
        )?;
        #[cfg(feature = "minting")]
        let member = MemberSpec {
            mint_request: MintRequest::from_annotations(
                cluster.annotations(),
                TokenHome::KarmadaSecret(secret_ref),
            )?
            .map(Box::new),
            ..member
        };
        Ok(member)
    })();
    MemberDefinition { name, spec: result }
}

/// A federated member: its `spec.secretRef`, if any, is not read (Karmada's own controllers
/// may still use it); asking Tether to mint its tokens is refused, since the control plane
/// already mints them.
fn federated_member(
    cluster: &Cluster,
    federation: Federation,
) -> Result<MemberSpec, InvalidReason> {
    let name = cluster.name_any();
    #[cfg(feature = "minting")]
    if (crate::minting::FORMER_ANNOTATIONS.iter())
        .filter(|(now, _)| *now == crate::minting::SERVICE_ACCOUNT_ANNOTATION)
        .any(|(now, former)| {
            let annotations = cluster.annotations();
            annotations.contains_key(*now) || annotations.contains_key(*former)
        })
    {
        return Err(InvalidReason::DefinitionInvalid(format!(
            "a {} member's tokens are minted by the control plane; remove \
             tether.io/mint-service-account",
            federation::FEDERATED
        )));
    }
    let spec = &cluster.spec;
    let member = checked_spec(
        name.clone(),
        spec.api_endpoint.clone().unwrap_or_default(),
        CredentialKey::federated(&name),
        spec.insecure_skip_tls_verification,
        spec.proxy_url.clone(),
    )?;
    Ok(MemberSpec {
        federation: Some(federation),
        ..member
    })
}

/// The credential in a Karmada-format Secret's data (member files use the same keys).
pub(crate) fn credential(
    key: &CredentialKey,
    data: &BTreeMap<String, Bytes>,
) -> Result<Credential, SourceError> {
    let token = data.get(TOKEN_KEY).ok_or_else(|| SourceError::MissingKey {
        key: key.clone(),
        field: TOKEN_KEY.to_owned(),
    })?;
    let credential = Credential::from_token_bytes(token)?;
    // An empty caBundle is what `kubectl karmada join` writes for insecure members: no bundle.
    match data.get(CA_BUNDLE_KEY).filter(|ca| !ca.is_empty()) {
        None => Ok(credential),
        Some(ca) => {
            validation::ca_bundle(ca).map_err(|err| SourceError::Invalid {
                key: key.clone(),
                reason: format!("{CA_BUNDLE_KEY}: {}", err.detail()),
            })?;
            Ok(credential.with_ca_bundle(ca.clone()))
        }
    }
}

/// The CRD for [`Cluster`] as YAML, the content of `deploy/crds/cluster.karmada.io_clusters.yaml`.
///
/// NOTE: it declares only Tether's fields. Where Karmada runs, use Karmada's own CRD (a
/// superset); do not apply this one over it.
///
/// # Errors
/// [`Error::CrdYaml`](crate::Error::CrdYaml) if serialization fails (it does not in practice).
pub fn crd_yaml() -> Result<String> {
    crate::crd::yaml::<Cluster>(
        "cluster_registry::karmada::Cluster",
        "",
        "deploy/crds/cluster.karmada.io_clusters.yaml",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_ca::ca_pem;
    use member_client::validation::MemberEndpoint;
    use rstest::rstest;
    use secrecy::ExposeSecret as _;
    use serde_json::json;

    fn cluster(spec: serde_json::Value) -> Cluster {
        serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster",
            "metadata": { "name": "member1" },
            "spec": spec,
        }))
        .unwrap()
    }

    fn push(extra: serde_json::Value) -> serde_json::Value {
        let mut spec = json!({
            "syncMode": "Push",
            "apiEndpoint": "https://10.0.0.1:6443",
            "secretRef": { "namespace": "karmada-cluster", "name": "member1" },
        });
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        spec
    }

    #[rstest]
    #[case::plain(push(json!({})), false, None)]
    #[case::insecure(push(json!({"insecureSkipTLSVerification": true})), true, None)]
    #[case::proxy(push(json!({"proxyURL": "http://proxy:3128"})), false, Some("http://proxy:3128"))]
    #[case::empty_proxy(push(json!({"proxyURL": ""})), false, None)]
    // fields Tether does not read are ignored
    #[case::unknown_fields(push(json!({"provider": "kind", "region": "eu"})), false, None)]
    fn push_clusters_become_members(
        #[case] spec: serde_json::Value,
        #[case] insecure: bool,
        #[case] proxy: Option<&str>,
    ) {
        let def = member_from_cluster(&cluster(spec));
        assert_eq!(def.name, "member1");
        let want = crate::MemberSpec {
            name: "member1".into(),
            endpoint: MemberEndpoint {
                url: "https://10.0.0.1:6443".into(),
                insecure_skip_tls_verify: insecure,
                proxy_url: proxy.map(str::to_owned),
                tls_server_name: None,
            },
            secret_ref: CredentialKey::new("karmada-cluster", "member1"),
            federation: None,
            mint_request: None,
        };
        assert_eq!(def.spec, Ok(want));
    }

    #[rstest]
    #[case::pull_mode(push(json!({"syncMode": "Pull"})), "PullMode")]
    #[case::no_endpoint(json!({"syncMode": "Push", "secretRef": {"namespace": "n", "name": "s"}}), "EndpointInvalid")]
    #[case::ftp_endpoint(push(json!({"apiEndpoint": "ftp://10.0.0.1"})), "EndpointInvalid")]
    #[case::endpoint_not_a_url(push(json!({"apiEndpoint": "10.0.0.1:6443"})), "EndpointInvalid")]
    #[case::no_secret_ref(json!({"syncMode": "Push", "apiEndpoint": "https://h"}), "DefinitionInvalid")]
    #[case::socks_proxy(push(json!({"proxyURL": "socks5://p:1080"})), "ProxyInvalid")]
    fn bad_clusters_are_invalid(#[case] spec: serde_json::Value, #[case] want: &str) {
        let def = member_from_cluster(&cluster(spec));
        assert_eq!(def.name, "member1");
        assert_eq!(def.spec.unwrap_err().condition_reason(), want);
    }

    fn data(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Bytes> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Bytes::copy_from_slice(v)))
            .collect()
    }

    fn key() -> CredentialKey {
        CredentialKey::new("karmada-cluster", "member1")
    }

    #[rstest]
    // whitespace around the token is trimmed
    #[case::plain(&[("token", &b"abc"[..])], "abc")]
    #[case::trailing_newline(&[("token", &b"abc\n"[..])], "abc")]
    #[case::surrounding_whitespace(&[("token", &b" \tabc \r\n"[..])], "abc")]
    // an empty caBundle means no bundle
    #[case::empty_ca(&[("token", &b"abc"[..]), ("caBundle", &b""[..])], "abc")]
    // unrelated keys are ignored
    #[case::extra_keys(&[("token", &b"abc"[..]), ("ca.crt", &b"x"[..])], "abc")]
    fn secrets_become_credentials(#[case] pairs: &[(&str, &[u8])], #[case] want_token: &str) {
        let cred = credential(&key(), &data(pairs)).unwrap();
        assert_eq!(cred.token().unwrap().expose_secret(), want_token);
        assert!(cred.ca_bundle().is_none());
    }

    #[test]
    fn a_pem_ca_bundle_is_kept() {
        let ca = ca_pem();
        let cred = credential(
            &key(),
            &data(&[("token", b"t"), ("caBundle", ca.as_bytes())]),
        );
        assert_eq!(cred.unwrap().ca_bundle().unwrap().as_ref(), ca.as_bytes());
    }

    #[rstest]
    #[case::missing_token(&[("caBundle", &b""[..])], "MissingKey")]
    #[case::empty_token(&[("token", &b""[..])], "EmptyToken")]
    #[case::whitespace_token(&[("token", &b" \n "[..])], "EmptyToken")]
    #[case::non_utf8_token(&[("token", &[0x61, 0xff][..])], "TokenNotUtf8")]
    #[case::inner_newline(&[("token", &b"a\nb"[..])], "TokenNotHeaderSafe")]
    #[case::ca_not_pem(&[("token", &b"t"[..]), ("caBundle", &b"garbage"[..])], "Invalid")]
    fn bad_secrets_are_typed_errors(#[case] pairs: &[(&str, &[u8])], #[case] want: &str) {
        let err = credential(&key(), &data(pairs)).unwrap_err();
        assert!(format!("{err:?}").starts_with(want), "{err:?}");
    }

    #[test]
    fn rotation_annotations_are_read_with_the_secret_as_the_home() {
        let mut c = cluster(push(json!({})));
        c.metadata.annotations = Some(BTreeMap::from([(
            crate::minting::SERVICE_ACCOUNT_ANNOTATION.to_owned(),
            "tether/collector".to_owned(),
        )]));
        let rotation = member_from_cluster(&c).spec.unwrap().mint_request.unwrap();
        assert_eq!(
            rotation.home,
            TokenHome::KarmadaSecret(CredentialKey::new("karmada-cluster", "member1"))
        );
        c.metadata.annotations = Some(BTreeMap::from([(
            crate::minting::MINT_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]));
        let refused = member_from_cluster(&c).spec.unwrap_err();
        assert_eq!(refused.condition_reason(), "DefinitionInvalid");
    }

    #[test]
    fn status_uses_karmada_field_names() {
        let status = ClusterStatus {
            kubernetes_version: Some("v1.36.5".into()),
            conditions: vec![],
            node_summary: Some(NodeSummary {
                total_num: Some(3),
                ready_num: Some(2),
            }),
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"kubernetesVersion": "v1.36.5", "nodeSummary": {"totalNum": 3, "readyNum": 2}})
        );
    }

    #[test]
    fn crd_is_cluster_scoped_with_a_status_subresource() {
        crate::crd::assert_committed::<Cluster>(
            "Cluster",
            "clusters.cluster.karmada.io",
            &crd_yaml().unwrap(),
            include_str!("../../../deploy/crds/cluster.karmada.io_clusters.yaml"),
        );
    }
}
