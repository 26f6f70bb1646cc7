//! The member cluster as client-go hands it to a plugin: `spec.cluster` of
//! `KUBERNETES_EXEC_INFO`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The member cluster as the plugin sees it in `KUBERNETES_EXEC_INFO` (client-go's
/// `clientauthentication.Cluster`).
///
/// Its JSON is client-go's: kebab-case names, every field but `server` left out when unset
/// (Go's `omitempty`), the CA bundle as base64, and fields this type does not know ignored.
///
/// `Debug` shows the CA bundle's length, and neither a proxy URL that holds user info nor the
/// extension `config`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExecCluster {
    /// The apiserver URL.
    #[serde(default)]
    pub server: String,
    /// The name to verify the serving certificate against, if not the host of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// Whether the client skips verifying the serving certificate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
    /// PEM CA bundle that verifies the apiserver.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "base64_bytes"
    )]
    pub certificate_authority_data: Option<Vec<u8>>,
    /// The proxy the client reaches `server` through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// The cluster's `client.authentication.k8s.io/exec` extension: plugin-specific settings.
    /// client-go writes `null` for a cluster without one, read here as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
}

impl ExecCluster {
    /// The cluster at `server`, verified against the system roots, with no proxy and no
    /// extension.
    pub fn new(server: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            ..Self::default()
        }
    }
}

impl fmt::Debug for ExecCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `user:password@` in a proxy URL is a credential; the extension is the plugin's to read.
        let proxy_url = self
            .proxy_url
            .as_deref()
            .map(|url| if url.contains('@') { "[REDACTED]" } else { url });
        f.debug_struct("ExecCluster")
            .field("server", &self.server)
            .field(
                "certificate_authority_data",
                &self.certificate_authority_data.as_ref().map(Vec::len),
            )
            .field("tls_server_name", &self.tls_server_name)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("proxy_url", &proxy_url)
            .field("config", &self.config.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// Go's `[]byte` in JSON: padded standard base64.
mod base64_bytes {
    use base64::{Engine as _, engine::general_purpose::STANDARD};
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    #[expect(
        clippy::ref_option,
        reason = "serde's `with` hands over a reference to the field"
    )]
    pub(super) fn serialize<S: Serializer>(
        bytes: &Option<Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => serializer.serialize_str(&STANDARD.encode(bytes)),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|text| STANDARD.decode(text))
            .transpose()
            // The decoder's error names the offending byte; the field name is enough.
            .map_err(|_| D::Error::custom("certificate-authority-data is not base64"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> ExecCluster {
        ExecCluster::new("https://10.0.0.1:6443")
    }

    #[test]
    fn every_field_round_trips_under_client_gos_names() {
        let cluster = ExecCluster {
            tls_server_name: Some("api.internal".to_owned()),
            insecure_skip_tls_verify: true,
            certificate_authority_data: Some(b"-----BEGIN CERTIFICATE-----\nAB\n".to_vec()),
            proxy_url: Some("http://127.0.0.1:3128".to_owned()),
            config: Some(json!({"member": "m1"})),
            ..minimal()
        };
        let json = serde_json::to_value(&cluster).unwrap();
        assert_eq!(
            json,
            json!({
                "server": "https://10.0.0.1:6443",
                "tls-server-name": "api.internal",
                "insecure-skip-tls-verify": true,
                "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFCCg==",
                "proxy-url": "http://127.0.0.1:3128",
                "config": {"member": "m1"},
            })
        );
        let read: ExecCluster = serde_json::from_value(json).unwrap();
        assert_eq!(read, cluster);
    }

    #[test]
    fn go_zero_values_and_unknown_fields_read_as_unset() {
        let read: ExecCluster = serde_json::from_value(json!({
            "server": "https://10.0.0.1:6443",
            "config": null,
            "certificate-authority-data": null,
            "disable-compression": true,
        }))
        .unwrap();
        assert_eq!(read, minimal());
        let written = serde_json::to_value(minimal()).unwrap();
        assert_eq!(written, json!({"server": "https://10.0.0.1:6443"}));
    }

    #[test]
    fn a_ca_that_is_not_base64_is_refused_without_being_quoted() {
        let err = serde_json::from_value::<ExecCluster>(
            json!({"server": "https://x", "certificate-authority-data": "not-base64-s3cr3t!"}),
        )
        .unwrap_err()
        .to_string();
        let says = "certificate-authority-data is not base64";
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("s3cr3t"), "{err}");
    }
}
