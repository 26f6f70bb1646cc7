//! The provider file (`--clusterprofile-provider-file`): which exec plugin serves each access
//! provider name, in upstream's JSON format.
//!
//! The file is the operator's, a profile is anybody's who may write one: a profile chooses a
//! provider by name, never the program that runs, and adds arguments or environment only as
//! the provider's policies allow, and then only those its `definitionArgs` and
//! `definitionEnv` patterns accept (the same [`PluginDeclaration`] rules as `--exec-plugins`).

use std::{collections::BTreeSet, fmt, path::Path, sync::Arc};

use member_client::{
    exec::{DefinitionRules, PluginDeclaration},
    file_source::read_bounded,
};
use serde::Deserialize;

/// The largest provider file read, in bytes.
pub const MAX_PROVIDER_FILE_BYTES: u64 = 256 * 1024;

/// The exec plugins that serve access providers, by name.
#[derive(Clone, Debug, Default)]
pub struct ProviderFile {
    providers: Vec<Provider>,
}

/// One provider: its name, the plugin that serves it, and what a profile may add.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// Matched against `status.accessProviders[].name`.
    pub name: String,
    /// A kubeconfig `ExecConfig`; its `command` must be an absolute path.
    pub exec_config: kube::config::ExecConfig,
    /// Whether the profile's `additional-args` extension is used.
    #[serde(default, rename = "profileSourcedCLIArgsPolicy")]
    pub cli_args_policy: CliArgsPolicy,
    /// Whether, and how, the profile's `additional-envs` extension is used.
    #[serde(default, rename = "profileSourcedEnvVarsPolicy")]
    pub env_vars_policy: EnvVarsPolicy,
    /// Tether's extension: what a profile must say of its plugin `config`, server and proxy
    /// (`profileConfigPins`, `serverPatterns`, `proxyPatterns`).
    #[serde(flatten)]
    pub pins: super::provider_pins::ProfilePins,
    /// Tether's extension: which of a profile's `additional-args` and `additional-envs` the
    /// plugin accepts (`definitionArgs`, `definitionEnv`); by default none.
    #[serde(flatten)]
    pub definition: DefinitionRules,
    /// The plugin as declared: made by [`ProviderFile::parse`].
    #[serde(skip)]
    declaration: Option<Arc<PluginDeclaration>>,
}

/// What becomes of a profile's extra plugin arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum CliArgsPolicy {
    /// They follow the provider's own arguments.
    Append,
    /// They are not used (the default).
    #[default]
    Ignore,
}

/// What becomes of a profile's extra plugin environment variables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum EnvVarsPolicy {
    /// Those the provider does not set are added.
    AppendIfNotExists,
    /// They are added, and win over the provider's own of the same name.
    Replace,
    /// They are not used (the default).
    #[default]
    Ignore,
}

/// Why a provider file cannot be used. The collector does not start with one.
#[derive(Debug, thiserror::Error)]
pub enum ProviderFileError {
    /// The file cannot be read, or is over [`MAX_PROVIDER_FILE_BYTES`]
    /// ([`FileTooLarge`](std::io::ErrorKind::FileTooLarge)).
    #[error("reading the provider file: {0}")]
    Read(#[from] std::io::Error),
    /// The file is not the upstream JSON format.
    #[error("the provider file is not valid: {0}")]
    Json(#[from] serde_json::Error),
    /// A provider is unusable: which one, and why.
    #[error("provider {0}")]
    Provider(String),
}

impl fmt::Debug for Provider {
    // kubeconfig's `ExecConfig` shows env values, which may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("command", &self.exec_config.command)
            .field("cli_args_policy", &self.cli_args_policy)
            .field("env_vars_policy", &self.env_vars_policy)
            .field("pins", &self.pins)
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// The plugin as the operator declared it: the command, the fixed args and env of
    /// `execConfig`, and what a profile may add. `None` only for a provider not read by
    /// [`ProviderFile::parse`].
    pub fn declaration(&self) -> Option<&Arc<PluginDeclaration>> {
        self.declaration.as_ref()
    }
}

/// `provider`'s `execConfig` and `definition*` rules as one declaration.
fn declaration(provider: &Provider) -> Result<PluginDeclaration, String> {
    let exec = &provider.exec_config;
    let env = crate::kubeconfig::env_vars(exec.env.as_ref())
        .ok_or("an execConfig.env entry lacks name or value")?;
    PluginDeclaration::new(
        exec.command.clone().unwrap_or_default(),
        exec.args.clone().unwrap_or_default(),
        env,
        provider.definition.clone(),
    )
    .map_err(|err| err.to_string())
}

#[derive(Deserialize)]
struct Raw {
    providers: Vec<Provider>,
}

impl ProviderFile {
    /// Reads and checks the file at `path`.
    ///
    /// # Errors
    /// See [`ProviderFileError`].
    pub fn read(path: &Path) -> Result<Self, ProviderFileError> {
        let raw = read_bounded(path, MAX_PROVIDER_FILE_BYTES)?.ok_or_else(|| {
            let over = format!("over {MAX_PROVIDER_FILE_BYTES} bytes");
            std::io::Error::new(std::io::ErrorKind::FileTooLarge, over)
        })?;
        Self::parse(&raw)
    }

    /// Parses and checks a provider file's content.
    ///
    /// # Errors
    /// Not JSON of upstream's shape; a provider without a name, named twice, or whose command
    /// is not an absolute path (a bare name would be whatever `PATH` finds).
    pub fn parse(raw: &[u8]) -> Result<Self, ProviderFileError> {
        let Raw { mut providers } = serde_json::from_slice(raw)?;
        let mut names = BTreeSet::new();
        for provider in &mut providers {
            let refuse = |reason: &str| {
                ProviderFileError::Provider(format!("{:?}: {reason}", provider.name))
            };
            if provider.name.is_empty() {
                return Err(refuse("has no name"));
            }
            if !names.insert(provider.name.clone()) {
                return Err(refuse("is named twice"));
            }
            let command = provider.exec_config.command.as_deref().unwrap_or_default();
            if !Path::new(command).is_absolute() {
                return Err(refuse("execConfig.command must be an absolute path"));
            }
            provider.declaration = Some(Arc::new(declaration(provider).map_err(|r| refuse(&r))?));
        }
        Ok(Self { providers })
    }

    /// The provider named `name`.
    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// The providers' names, in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.providers.iter().map(|p| p.name.as_str())
    }

    /// The providers' commands.
    pub fn commands(&self) -> impl Iterator<Item = &Path> {
        (self.providers.iter()).filter_map(|p| p.exec_config.command.as_deref().map(Path::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn file(providers: serde_json::Value) -> Result<ProviderFile, ProviderFileError> {
        ProviderFile::parse(json!({ "providers": providers }).to_string().as_bytes())
    }

    #[test]
    fn reads_upstreams_format() {
        let parsed = file(json!([{"name": "secretreader",
            "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
                           "command": "/bin/secretreader-plugin", "args": null, "env": null,
                           "provideClusterInfo": true},
            "profileSourcedCLIArgsPolicy": "Append",
            "profileSourcedEnvVarsPolicy": "Replace"}]))
        .unwrap();
        let provider = parsed.provider("secretreader").unwrap();
        assert_eq!(provider.cli_args_policy, CliArgsPolicy::Append);
        assert_eq!(provider.env_vars_policy, EnvVarsPolicy::Replace);
        assert!(provider.exec_config.provide_cluster_info);
        assert_eq!(
            parsed.commands().collect::<Vec<_>>(),
            [Path::new("/bin/secretreader-plugin")]
        );
        assert!(parsed.provider("other").is_none());
    }

    #[test]
    fn a_provider_declares_its_plugin_with_the_patterns_a_profile_must_match() {
        let parsed = file(json!([{"name": "eks",
            "execConfig": {"command": "/usr/local/bin/aws", "args": ["eks", "get-token"],
                           "env": [{"name": "AWS_STS_REGIONAL_ENDPOINTS", "value": "regional"}]},
            "profileSourcedCLIArgsPolicy": "Append",
            "definitionArgs": [{"pattern": "--cluster-name"}, {"pattern": "prod-[a-z]+"}],
            "definitionEnv": [{"name": "AWS_REGION", "pattern": "[a-z0-9-]+"}]}]))
        .unwrap();
        let provider = parsed.provider("eks").unwrap();
        let declaration = provider.declaration().unwrap();
        assert_eq!(declaration.command(), Path::new("/usr/local/bin/aws"));
        assert_eq!(declaration.rules(), &provider.definition);
        assert_eq!(declaration.rules().definition_args.len(), 2);
        assert!(!format!("{provider:?}").contains("regional"));
        // Upstream's files have no patterns: a profile then adds nothing.
        let upstream = file(json!([{"name": "p", "execConfig": {"command": "/bin/p"},
            "profileSourcedCLIArgsPolicy": "Append"}]))
        .unwrap();
        let declaration = upstream.provider("p").unwrap().declaration().unwrap();
        assert_eq!(declaration.rules(), &DefinitionRules::default());
    }

    #[test]
    fn policies_default_to_ignore() {
        let parsed = file(json!([{"name": "p", "execConfig": {"command": "/bin/p"}}])).unwrap();
        let provider = parsed.provider("p").unwrap();
        assert_eq!(provider.cli_args_policy, CliArgsPolicy::Ignore);
        assert_eq!(provider.env_vars_policy, EnvVarsPolicy::Ignore);
    }

    #[rstest]
    #[case::bare_command(json!([{"name": "p", "execConfig": {"command": "aws"}}]), "absolute")]
    #[case::no_command(json!([{"name": "p", "execConfig": {}}]), "absolute")]
    #[case::no_name(json!([{"name": "", "execConfig": {"command": "/bin/p"}}]), "no name")]
    #[case::twice(
        json!([{"name": "p", "execConfig": {"command": "/bin/p"}},
               {"name": "p", "execConfig": {"command": "/bin/q"}}]),
        "twice"
    )]
    #[case::unknown_policy(
        json!([{"name": "p", "execConfig": {"command": "/bin/p"},
                "profileSourcedCLIArgsPolicy": "Prepend"}]),
        "unknown variant"
    )]
    #[case::bad_pattern(
        json!([{"name": "p", "execConfig": {"command": "/bin/p"},
                "definitionArgs": [{"pattern": "("}]}]),
        "not a valid regular expression"
    )]
    #[case::home_from_a_profile(
        json!([{"name": "p", "execConfig": {"command": "/bin/p"},
                "definitionEnv": [{"name": "HOME", "pattern": ".*"}]}]),
        "may not name \"HOME\""
    )]
    fn unusable_files_are_refused(#[case] providers: serde_json::Value, #[case] want: &str) {
        let err = file(providers).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }

    #[test]
    fn an_oversized_file_is_refused_without_reading_it_all() {
        let endless = ProviderFile::read(Path::new("/dev/zero"));
        assert!(
            matches!(endless, Err(ProviderFileError::Read(e)) if e.kind() == std::io::ErrorKind::FileTooLarge)
        );
    }
}
