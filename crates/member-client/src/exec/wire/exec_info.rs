//! `KUBERNETES_EXEC_INFO`: the ExecCredential a plugin is handed, as client-go writes it
//! (<https://github.com/kubernetes/enhancements/tree/master/keps/sig-auth/541-external-credential-providers>).

use base64::Engine as _;
use serde::Serialize;

use super::{ExecCluster, ExecConfig};

/// The JSON client-go puts in `KUBERNETES_EXEC_INFO` for `config`: always non-interactive,
/// and with the cluster only when `provide_cluster_info` is set.
pub(crate) fn exec_info(config: &ExecConfig) -> String {
    let info = ExecInfo {
        api_version: config.api_version.as_str(),
        kind: "ExecCredential",
        spec: Spec {
            // Tether has no terminal; stdin is null (kubeconfig's `interactiveMode: Never`).
            interactive: false,
            cluster: config
                .cluster
                .as_ref()
                .filter(|_| config.provide_cluster_info)
                .map(Cluster::from),
        },
    };
    // Serializing plain structs and a `serde_json::Value` cannot fail; the fallback is unreachable.
    serde_json::to_string(&info).unwrap_or_default()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExecInfo<'a> {
    api_version: &'static str,
    kind: &'static str,
    spec: Spec<'a>,
}

#[derive(Serialize)]
struct Spec<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<Cluster<'a>>,
    interactive: bool,
}

/// client-go's `clientauthentication.Cluster`: kebab-case names, `omitempty` on all but `server`.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster<'a> {
    server: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_server_name: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    insecure_skip_tls_verify: bool,
    /// Go encodes `[]byte` as padded standard base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_authority_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxy_url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<&'a serde_json::Value>,
}

impl<'a> From<&'a ExecCluster> for Cluster<'a> {
    fn from(cluster: &'a ExecCluster) -> Self {
        Self {
            server: &cluster.server,
            tls_server_name: cluster.tls_server_name.as_deref(),
            insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
            certificate_authority_data: cluster
                .certificate_authority_data
                .as_ref()
                .map(|pem| base64::engine::general_purpose::STANDARD.encode(pem)),
            proxy_url: cluster.proxy_url.as_deref(),
            config: cluster.config.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::ExecApiVersion;
    use serde_json::{Value, json};

    fn config(provide_cluster_info: bool, cluster: ExecCluster) -> ExecConfig {
        ExecConfig {
            command: "/bin/plugin".to_owned(),
            args: vec![],
            env: vec![],
            api_version: ExecApiVersion::V1Beta1,
            provide_cluster_info,
            cluster: Some(cluster),
        }
    }

    fn minimal() -> ExecCluster {
        ExecCluster {
            server: "https://10.0.0.1:6443".to_owned(),
            certificate_authority_data: None,
            tls_server_name: None,
            insecure_skip_tls_verify: false,
            proxy_url: None,
            config: None,
        }
    }

    fn parsed(config: &ExecConfig) -> Value {
        serde_json::from_str(&exec_info(config)).unwrap()
    }

    #[test]
    fn unset_cluster_fields_are_omitted_as_go_omits_them() {
        assert_eq!(
            parsed(&config(true, minimal())),
            json!({
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "kind": "ExecCredential",
                "spec": {"interactive": false, "cluster": {"server": "https://10.0.0.1:6443"}},
            })
        );
    }

    #[test]
    fn the_cluster_is_left_out_unless_asked_for() {
        assert_eq!(
            parsed(&config(false, minimal())),
            json!({
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "kind": "ExecCredential",
                "spec": {"interactive": false},
            })
        );
    }

    #[test]
    fn ca_data_is_base64_of_the_pem_bytes() {
        let cluster = ExecCluster {
            certificate_authority_data: Some(b"-----BEGIN CERTIFICATE-----\nAB\n".to_vec()),
            insecure_skip_tls_verify: true,
            ..minimal()
        };
        let info = parsed(&config(true, cluster));
        assert_eq!(
            info["spec"]["cluster"]["certificate-authority-data"],
            "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFCCg=="
        );
        assert_eq!(info["spec"]["cluster"]["insecure-skip-tls-verify"], true);
    }
}
