//! A member file's `exec`: an exec plugin written as in a kubeconfig.

use std::fmt;

use member_client::{
    CredentialKey, SourceError,
    exec::{ExecCluster, ExecConfig},
};
use serde::Deserialize;

use crate::kubeconfig;

/// A member file's exec credential plugin, in kubeconfig's `users[].user.exec` shape. It runs
/// only if its command is declared (`--exec-plugins`, `--allow-exec`), and only with the args
/// and env its declaration accepts.
///
/// `Debug` shows how many args there are and the names of `env`, never an arg or a value,
/// which often hold secrets.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberExec {
    /// `client.authentication.k8s.io/v1` or `/v1beta1`.
    pub api_version: String,
    /// An absolute path, or a bare name looked up on the collector's `PATH`.
    pub command: String,
    /// Arguments, passed as given.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to the plugin's environment.
    #[serde(default)]
    pub env: Vec<MemberExecEnv>,
    /// Whether the plugin is told the member's endpoint, CA and proxy
    /// (`KUBERNETES_EXEC_INFO`'s `spec.cluster`).
    #[serde(default)]
    pub provide_cluster_info: bool,
}

/// One `exec.env` entry. `Debug` shows only its name.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberExecEnv {
    /// The variable's name.
    pub name: String,
    /// Its value; may be a secret.
    pub value: String,
}

impl fmt::Debug for MemberExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemberExec")
            .field("api_version", &self.api_version)
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .finish()
    }
}

impl fmt::Debug for MemberExecEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}=[REDACTED]", self.name)
    }
}

impl MemberExec {
    /// The plugin as member-client runs it against `cluster`, converted as a kubeconfig's
    /// `exec` is, so both are checked by the same rules.
    ///
    /// # Errors
    /// [`SourceError::Invalid`] for an empty command or an unsupported `apiVersion`.
    pub(crate) fn config(
        &self,
        key: &CredentialKey,
        cluster: ExecCluster,
    ) -> Result<ExecConfig, SourceError> {
        let env = kubeconfig::exec_env(self.env.iter().map(|var| (&var.name, &var.value)));
        let exec = kube::config::ExecConfig {
            api_version: Some(self.api_version.clone()),
            command: Some(self.command.clone()),
            args: Some(self.args.clone()),
            env: Some(env),
            provide_cluster_info: self.provide_cluster_info,
            ..kube::config::ExecConfig::default()
        };
        kubeconfig::exec_config(key, "exec", &exec, cluster)
    }
}

#[cfg(test)]
mod tests {
    use super::MemberExec;

    #[test]
    fn debug_shows_no_arg_or_env_value() {
        let exec: MemberExec = serde_yaml::from_str(
            "apiVersion: client.authentication.k8s.io/v1\ncommand: /usr/local/bin/cloud-auth\n\
             args: [--key=arg-s3cr3t]\nenv: [{name: CLOUD_KEY, value: s3cr3t}]\n",
        )
        .unwrap();
        assert_eq!(exec.command, "/usr/local/bin/cloud-auth");
        assert!(!format!("{exec:?}").contains("s3cr3t"));
    }
}
