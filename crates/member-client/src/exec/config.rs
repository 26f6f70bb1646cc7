//! What a member definition says about its exec plugin: kubeconfig's `users[].user.exec`.

use std::{fmt, str::FromStr};

use crate::Text;

/// How to run one member's exec credential plugin, as kubeconfig's `exec` stanza says it.
///
/// Every field comes from the member definition, so none of it is trusted:
/// [`ExecPolicy`](super::ExecPolicy) decides whether `command` may run at all.
///
/// `Debug` prints the command, how many arguments there are and the names of `env`, never an
/// argument or a value: either may hold a secret (`--token=…`, `AWS_SECRET_ACCESS_KEY`).
///
/// ```
/// use member_client::{ExecApiVersion, ExecConfig, ExecEnvVar};
/// let config = ExecConfig {
///     command: "/usr/local/bin/cloud-auth".to_owned(),
///     args: vec!["--key=arg-s3cr3t".to_owned()],
///     env: vec![ExecEnvVar { name: "CLOUD_KEY".to_owned(), value: "s3cr3t".to_owned() }],
///     api_version: ExecApiVersion::V1,
///     provide_cluster_info: false,
///     cluster: None,
/// };
/// assert!(!format!("{config:?}").contains("s3cr3t"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ExecConfig {
    /// An absolute path, or a bare name looked up on the collector's `PATH`.
    pub command: String,
    /// Arguments, passed after the declaration's fixed ones if it accepts them.
    pub args: Vec<String>,
    /// Variables for the plugin, set if its declaration accepts them.
    pub env: Vec<ExecEnvVar>,
    /// The `client.authentication.k8s.io` version the plugin speaks.
    pub api_version: ExecApiVersion,
    /// Whether `KUBERNETES_EXEC_INFO` carries [`cluster`](Self::cluster)
    /// (kubeconfig's `provideClusterInfo`).
    pub provide_cluster_info: bool,
    /// The member cluster, sent to the plugin only when `provide_cluster_info` is set.
    pub cluster: Option<ExecCluster>,
}

impl fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecConfig")
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env)
            .field("api_version", &self.api_version)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .field("cluster", &self.cluster)
            .finish()
    }
}

/// One environment variable for the plugin. `Debug` shows only its name.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecEnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value; may be a secret.
    pub value: String,
}

impl fmt::Debug for ExecEnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}=[REDACTED]", self.name)
    }
}

/// The `client.authentication.k8s.io` version of the ExecCredential exchanged with a plugin.
///
/// `v1alpha1` is gone from client-go, so it is refused here too.
///
/// ```
/// use member_client::ExecApiVersion;
/// let v: ExecApiVersion = "client.authentication.k8s.io/v1beta1".parse().unwrap();
/// assert_eq!(v, ExecApiVersion::V1Beta1);
/// assert!("client.authentication.k8s.io/v1alpha1".parse::<ExecApiVersion>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExecApiVersion {
    /// `client.authentication.k8s.io/v1`.
    V1,
    /// `client.authentication.k8s.io/v1beta1`.
    V1Beta1,
}

impl ExecApiVersion {
    /// The `apiVersion` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "client.authentication.k8s.io/v1",
            Self::V1Beta1 => "client.authentication.k8s.io/v1beta1",
        }
    }
}

impl fmt::Display for ExecApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExecApiVersion {
    type Err = UnsupportedApiVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::V1, Self::V1Beta1]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnsupportedApiVersion {
                given: Text::new(s),
            })
    }
}

/// An exec `apiVersion` other than `client.authentication.k8s.io/v1` or `/v1beta1`.
/// Permanent until the member definition changes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "exec apiVersion \"{given}\" is not supported; use client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1"
)]
pub struct UnsupportedApiVersion {
    /// What the definition says.
    pub given: Text,
}

/// The member cluster as the plugin sees it in `KUBERNETES_EXEC_INFO` (client-go's
/// `clientauthentication.Cluster`).
///
/// `Debug` shows the CA bundle's length, and neither a proxy URL that holds user info nor the
/// extension `config`.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecCluster {
    /// The apiserver URL.
    pub server: String,
    /// PEM CA bundle that verifies the apiserver.
    pub certificate_authority_data: Option<Vec<u8>>,
    /// The name to verify the serving certificate against, if not the host of `server`.
    pub tls_server_name: Option<String>,
    /// Whether the client skips verifying the serving certificate.
    pub insecure_skip_tls_verify: bool,
    /// The proxy the client reaches `server` through.
    pub proxy_url: Option<String>,
    /// The cluster's `client.authentication.k8s.io/exec` extension: plugin-specific settings.
    pub config: Option<serde_json::Value>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::v1("client.authentication.k8s.io/v1", Some(ExecApiVersion::V1))]
    #[case::v1beta1("client.authentication.k8s.io/v1beta1", Some(ExecApiVersion::V1Beta1))]
    #[case::v1alpha1_is_gone("client.authentication.k8s.io/v1alpha1", None)]
    #[case::bare_version("v1", None)]
    #[case::other_group("authentication.k8s.io/v1", None)]
    #[case::padded(" client.authentication.k8s.io/v1", None)]
    #[case::empty("", None)]
    fn api_version_parses_only_v1_and_v1beta1(
        #[case] raw: &str,
        #[case] want: Option<ExecApiVersion>,
    ) {
        assert_eq!(raw.parse::<ExecApiVersion>().ok(), want);
        if let Some(version) = want {
            assert_eq!(version.as_str(), raw);
        }
    }

    #[test]
    fn unsupported_api_version_is_one_sanitized_line() {
        let err = "x/v9\nforged".parse::<ExecApiVersion>().unwrap_err();
        let text = err.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("x/v9 forged"), "{text}");
    }

    #[test]
    fn debug_hides_args_env_values_proxy_user_info_and_the_extension() {
        let config = ExecConfig {
            command: "/bin/plugin".to_owned(),
            args: vec!["--flag=arg-s3cr3t".to_owned(), "/var/run/token".to_owned()],
            env: vec![ExecEnvVar {
                name: "API_KEY".to_owned(),
                value: "env-s3cr3t".to_owned(),
            }],
            api_version: ExecApiVersion::V1,
            provide_cluster_info: true,
            cluster: Some(ExecCluster {
                server: "https://10.0.0.1:6443".to_owned(),
                certificate_authority_data: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
                tls_server_name: None,
                insecure_skip_tls_verify: false,
                proxy_url: Some("http://user:proxy-s3cr3t@proxy:3128".to_owned()),
                config: Some(serde_json::json!({"audience": "ext-s3cr3t"})),
            }),
        };
        let printed = format!("{config:?} {config:#?}");
        assert!(!printed.contains("s3cr3t"), "{printed}");
        assert!(printed.contains("API_KEY"), "{printed}");
        assert!(printed.contains("https://10.0.0.1:6443"), "{printed}");
        assert!(!printed.contains("/var/run/token"), "{printed}");
        assert!(printed.contains("args: 2"), "{printed}");
    }
}
