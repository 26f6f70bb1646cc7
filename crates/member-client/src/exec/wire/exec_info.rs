//! `KUBERNETES_EXEC_INFO`: the ExecCredential a plugin is handed, as client-go writes it
//! (<https://github.com/kubernetes/enhancements/tree/master/keps/sig-auth/541-external-credential-providers>).

use serde::{Deserialize, Serialize};

use crate::Text;

use super::{ExecApiVersion, ExecCluster, KIND, UnsupportedApiVersion};
use crate::exec::ExecConfig;

/// The variable client-go hands a plugin its [`ExecInfo`] in.
pub const EXEC_INFO_ENV: &str = "KUBERNETES_EXEC_INFO";

/// What `KUBERNETES_EXEC_INFO` holds: an ExecCredential with only a `spec`.
///
/// ```
/// use member_client::exec::wire::ExecInfo;
/// let info = ExecInfo::from_json(
///     r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
///         "spec":{"interactive":false,"cluster":{"server":"https://10.0.0.1:6443","config":null}}}"#,
/// )?;
/// assert_eq!(info.cluster.unwrap().server, "https://10.0.0.1:6443");
/// # Ok::<(), member_client::exec::wire::ExecInfoError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecInfo {
    /// The version the plugin must answer in.
    pub api_version: ExecApiVersion,
    /// Whether the plugin may prompt on the terminal.
    pub interactive: bool,
    /// The cluster; client-go sends it only with kubeconfig's `provideClusterInfo: true`.
    pub cluster: Option<ExecCluster>,
}

/// Why `KUBERNETES_EXEC_INFO` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ExecInfoError {
    /// Not JSON, or not an ExecCredential's shape. (serde's message names a field's expected
    /// type; the value holds no credential.)
    #[error("KUBERNETES_EXEC_INFO is not an ExecCredential")]
    Invalid(#[source] serde_json::Error),
    /// Some other kind.
    #[error("KUBERNETES_EXEC_INFO is not an ExecCredential (kind \"{kind}\")")]
    NotExecCredential {
        /// What it says it is (sanitized).
        kind: Text,
    },
    /// Neither `client.authentication.k8s.io/v1` nor `/v1beta1`.
    #[error("KUBERNETES_EXEC_INFO")]
    ApiVersion(#[source] UnsupportedApiVersion),
}

impl ExecInfo {
    /// What client-go hands the plugin `config` describes: never interactive (Tether has no
    /// terminal; stdin is null, as with kubeconfig's `interactiveMode: Never`), and with the
    /// cluster only when `provide_cluster_info` is set.
    pub fn for_plugin(config: &ExecConfig) -> Self {
        Self {
            api_version: config.api_version,
            interactive: false,
            cluster: config
                .cluster
                .clone()
                .filter(|_| config.provide_cluster_info),
        }
    }

    /// The JSON client-go puts in [`EXEC_INFO_ENV`].
    pub fn to_json(&self) -> String {
        let doc = Document {
            api_version: self.api_version.as_str().to_owned(),
            kind: KIND.to_owned(),
            spec: Spec {
                cluster: self.cluster.clone(),
                interactive: self.interactive,
            },
        };
        // Plain structs, strings and a `serde_json::Value` always serialize; the fallback is
        // unreachable.
        serde_json::to_string(&doc).unwrap_or_default()
    }

    /// Reads the value of [`EXEC_INFO_ENV`]. Fields this type does not know are ignored, as
    /// client-go adds them.
    ///
    /// # Errors
    /// [`ExecInfoError`].
    pub fn from_json(raw: &str) -> Result<Self, ExecInfoError> {
        let doc: Document = serde_json::from_str(raw).map_err(ExecInfoError::Invalid)?;
        if doc.kind != KIND {
            return Err(ExecInfoError::NotExecCredential {
                kind: Text::new(&doc.kind),
            });
        }
        let api_version = doc.api_version.parse().map_err(ExecInfoError::ApiVersion)?;
        Ok(Self {
            api_version,
            interactive: doc.spec.interactive,
            cluster: doc.spec.cluster,
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    spec: Spec,
}

#[derive(Default, Serialize, Deserialize)]
struct Spec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster: Option<ExecCluster>,
    #[serde(default)]
    interactive: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn minimal() -> ExecCluster {
        ExecCluster::new("https://10.0.0.1:6443")
    }

    /// What a v1beta1 plugin of [`minimal`]'s cluster is handed, parsed.
    fn sent(provide_cluster_info: bool) -> Value {
        let config = ExecConfig {
            api_version: ExecApiVersion::V1Beta1,
            provide_cluster_info,
            cluster: Some(minimal()),
            ..ExecConfig::new("/bin/plugin")
        };
        serde_json::from_str(&ExecInfo::for_plugin(&config).to_json()).unwrap()
    }

    #[rstest]
    // Unset cluster fields are omitted, as Go omits them.
    #[case::asked_for(true, json!({"interactive": false, "cluster": {"server": "https://10.0.0.1:6443"}}))]
    #[case::left_out_unless_asked_for(false, json!({"interactive": false}))]
    fn the_cluster_is_sent_only_when_asked_for(#[case] provide: bool, #[case] spec: Value) {
        assert_eq!(
            sent(provide),
            json!({
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "kind": "ExecCredential",
                "spec": spec,
            })
        );
    }

    #[rstest]
    #[case::v1(ExecApiVersion::V1)]
    #[case::v1beta1(ExecApiVersion::V1Beta1)]
    fn what_is_written_reads_back(#[case] api_version: ExecApiVersion) {
        let info = ExecInfo {
            api_version,
            interactive: false,
            cluster: Some(ExecCluster {
                certificate_authority_data: Some(b"CA".to_vec()),
                config: Some(json!({"member": "m1"})),
                ..minimal()
            }),
        };
        assert_eq!(ExecInfo::from_json(&info.to_json()).unwrap(), info);
    }

    #[test]
    fn client_gos_null_config_and_extra_fields_are_read() {
        let raw = json!({
            "apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
            "spec": {"interactive": true, "response": {"code": 401},
                     "cluster": {"server": "https://127.0.0.1:6443", "config": null}},
        });
        let info = ExecInfo::from_json(&raw.to_string()).unwrap();
        assert!(info.interactive);
        assert_eq!(
            info.cluster,
            Some(ExecCluster {
                server: "https://127.0.0.1:6443".to_owned(),
                ..minimal()
            })
        );
    }

    #[rstest]
    #[case::not_json("{", "is not an ExecCredential")]
    #[case::not_an_object("[]", "is not an ExecCredential")]
    #[case::other_kind(r#"{"kind": "Pod"}"#, "kind \"Pod\"")]
    #[case::kind_with_a_newline(r#"{"kind": "Pod\nforged"}"#, "kind \"Pod forged\"")]
    #[case::v1alpha1(
        r#"{"apiVersion": "client.authentication.k8s.io/v1alpha1", "kind": "ExecCredential"}"#,
        "KUBERNETES_EXEC_INFO"
    )]
    #[case::ca_not_base64(
        r#"{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
            "spec": {"cluster": {"server": "s", "certificate-authority-data": "%%"}}}"#,
        "is not an ExecCredential"
    )]
    fn unusable_input_says_what_is_wrong(#[case] raw: &str, #[case] says: &str) {
        let err = ExecInfo::from_json(raw).unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
    }

    #[test]
    fn another_version_is_named_back_sanitized() {
        let raw =
            r#"{"apiVersion": "client.authentication.k8s.io/v1alpha1", "kind": "ExecCredential"}"#;
        let err = ExecInfo::from_json(raw).unwrap_err();
        let ExecInfoError::ApiVersion(source) = &err else {
            panic!("{err:?}")
        };
        assert!(source.to_string().contains("v1alpha1"), "{source}");
    }
}
