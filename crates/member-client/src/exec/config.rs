//! What a member definition says about its exec plugin: kubeconfig's `users[].user.exec`.

use std::fmt;

use super::{ExecApiVersion, ExecCluster};

/// How to run one member's exec credential plugin, as kubeconfig's `exec` stanza says it.
///
/// Every field comes from the member definition, so none of it is trusted:
/// [`ExecPolicy`](super::ExecPolicy) decides whether `command` may run at all.
///
/// `Debug` prints the command, how many arguments there are and the names of `env`, never an
/// argument or a value: either may hold a secret (`--token=…`, `AWS_SECRET_ACCESS_KEY`).
///
/// ```
/// use member_client::{exec::ExecApiVersion, exec::ExecConfig, exec::ExecEnvVar};
/// let config = ExecConfig {
///     args: vec!["--key=arg-s3cr3t".to_owned()],
///     env: vec![ExecEnvVar::new("CLOUD_KEY", "s3cr3t")],
///     ..ExecConfig::new("/usr/local/bin/cloud-auth")
/// };
/// assert_eq!(config.api_version, ExecApiVersion::V1);
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

impl ExecConfig {
    /// `command` with no argument, variable or cluster, speaking `v1`.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            args: vec![],
            env: vec![],
            api_version: ExecApiVersion::V1,
            provide_cluster_info: false,
            cluster: None,
        }
    }
}

/// The start of the `Debug` of what names a plugin run: the program, the count of its
/// arguments (they may hold secrets), and its variables (which show their names only).
pub(super) fn debug_plugin<'a, 'b>(
    f: &'a mut fmt::Formatter<'b>,
    name: &str,
    (program_field, program): (&str, &dyn fmt::Debug),
    args: &[String],
    env: &[ExecEnvVar],
) -> fmt::DebugStruct<'a, 'b> {
    let mut out = f.debug_struct(name);
    out.field(program_field, program)
        .field("args", &args.len())
        .field("env", &env);
    out
}

impl fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let command = ("command", &self.command as &dyn fmt::Debug);
        debug_plugin(f, "ExecConfig", command, &self.args, &self.env)
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

impl ExecEnvVar {
    /// The variable `name` set to `value`.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

impl fmt::Debug for ExecEnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}=[REDACTED]", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_args_env_values_proxy_user_info_and_the_extension() {
        let config = ExecConfig {
            args: vec!["--flag=arg-s3cr3t".to_owned(), "/var/run/token".to_owned()],
            env: vec![ExecEnvVar::new("API_KEY", "env-s3cr3t")],
            provide_cluster_info: true,
            cluster: Some(ExecCluster {
                certificate_authority_data: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
                proxy_url: Some("http://user:proxy-s3cr3t@proxy:3128".to_owned()),
                config: Some(serde_json::json!({"audience": "ext-s3cr3t"})),
                ..ExecCluster::new("https://10.0.0.1:6443")
            }),
            ..ExecConfig::new("/bin/plugin")
        };
        let printed = format!("{config:?} {config:#?}");
        assert!(!printed.contains("s3cr3t"), "{printed}");
        assert!(printed.contains("API_KEY"), "{printed}");
        assert!(printed.contains("https://10.0.0.1:6443"), "{printed}");
        assert!(!printed.contains("/var/run/token"), "{printed}");
        assert!(printed.contains("args: 2"), "{printed}");
    }
}
