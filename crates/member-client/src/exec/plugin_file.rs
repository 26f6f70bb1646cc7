//! The exec plugins file (`--exec-plugins FILE`): the operator's plugin declarations, in the
//! shape of upstream's ClusterProfile provider file, JSON or YAML.
//!
//! ```yaml
//! providers:
//! - name: eks
//!   execConfig:
//!     apiVersion: client.authentication.k8s.io/v1
//!     command: /usr/local/bin/aws
//!     args: [eks, get-token]
//!     env: [{name: AWS_STS_REGIONAL_ENDPOINTS, value: regional}]
//!   definitionArgs:
//!   - pattern: --cluster-name
//!   - pattern: prod-[a-z0-9-]{1,60}
//!   definitionEnv:
//!   - name: AWS_REGION
//!     pattern: '[a-z]{2}-[a-z]+-[0-9]'
//! ```
//!
//! Upstream's other fields (`apiVersion`, `provideClusterInfo`, `interactiveMode`,
//! `profileSourced*Policy`) are read and ignored: for these plugins the member definition
//! says which `apiVersion` it speaks and whether it wants cluster info.

use std::{collections::BTreeSet, path::Path};

use serde::Deserialize;

use super::{DeclarationError, DefinitionRules, ExecEnvVar, PluginDeclaration};
use crate::read_bounded;

/// The largest exec plugins file read, in bytes.
pub const MAX_EXEC_PLUGINS_FILE_BYTES: u64 = 256 * 1024;

/// The declared plugins of an exec plugins file, in file order.
#[derive(Clone, Debug, Default)]
pub struct ExecPluginsFile {
    plugins: Vec<(String, PluginDeclaration)>,
}

/// Why an exec plugins file cannot be used. The collector does not start with one.
#[derive(Debug, thiserror::Error)]
pub enum ExecPluginsFileError {
    /// The file cannot be read.
    #[error("reading the exec plugins file: {0}")]
    Read(#[from] std::io::Error),
    /// The file is over [`MAX_EXEC_PLUGINS_FILE_BYTES`].
    #[error("the exec plugins file is over {MAX_EXEC_PLUGINS_FILE_BYTES} bytes")]
    TooLarge,
    /// Neither JSON nor YAML of the provider file's shape, or a pattern that does not compile.
    #[error("the exec plugins file is not valid: {0}")]
    Parse(#[from] serde_yaml::Error),
    /// A declaration is unusable.
    #[error("exec plugin {name:?}: {reason}")]
    Plugin {
        /// The entry's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

#[derive(Deserialize)]
struct Raw {
    providers: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    name: String,
    exec_config: EntryExec,
    #[serde(flatten)]
    rules: DefinitionRules,
}

#[derive(Deserialize)]
struct EntryExec {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<Vec<NameValue>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameValue {
    name: String,
    value: String,
}

impl ExecPluginsFile {
    /// Reads and checks the file at `path`.
    ///
    /// # Errors
    /// See [`ExecPluginsFileError`].
    pub fn read(path: &Path) -> Result<Self, ExecPluginsFileError> {
        let raw = read_bounded(path, MAX_EXEC_PLUGINS_FILE_BYTES)?
            .ok_or(ExecPluginsFileError::TooLarge)?;
        Self::parse(&raw)
    }

    /// Parses and checks a file's content (YAML; JSON is YAML too).
    ///
    /// # Errors
    /// Not of the provider file's shape; an entry without a name, a name or a command
    /// declared twice, a command that is not an absolute path, or an unusable
    /// [`definitionEnv`](DefinitionRules::definition_env) name.
    pub fn parse(raw: &[u8]) -> Result<Self, ExecPluginsFileError> {
        let Raw { providers } = serde_yaml::from_slice(raw)?;
        let (mut names, mut commands) = (BTreeSet::new(), BTreeSet::new());
        let mut plugins = Vec::with_capacity(providers.len());
        for entry in providers {
            let refuse = |reason: String| ExecPluginsFileError::Plugin {
                name: entry.name.clone(),
                reason,
            };
            if entry.name.is_empty() {
                return Err(refuse("has no name".to_owned()));
            }
            if !names.insert(entry.name.clone()) {
                return Err(refuse("is named twice".to_owned()));
            }
            let command = entry.exec_config.command.clone().unwrap_or_default();
            if !commands.insert(command.clone()) {
                return Err(refuse(format!(
                    "declares {command:?} again: one declaration per command"
                )));
            }
            let env = (entry.exec_config.env.iter().flatten())
                .map(|var| ExecEnvVar {
                    name: var.name.clone(),
                    value: var.value.clone(),
                })
                .collect();
            let declaration = PluginDeclaration::new(
                command,
                entry.exec_config.args.clone().unwrap_or_default(),
                env,
                entry.rules.clone(),
            )
            .map_err(|err: DeclarationError| refuse(err.to_string()))?;
            plugins.push((entry.name, declaration));
        }
        Ok(Self { plugins })
    }

    /// The declarations, in file order.
    pub fn declarations(&self) -> impl Iterator<Item = &PluginDeclaration> {
        self.plugins.iter().map(|(_, declaration)| declaration)
    }

    /// The entries' names, in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.plugins.iter().map(|(name, _)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{ExecConfig, ExecError};
    use rstest::rstest;

    const EKS: &str = r#"
providers:
- name: eks
  execConfig:
    apiVersion: client.authentication.k8s.io/v1
    command: /usr/local/bin/aws
    args: [eks, get-token]
    env: [{name: AWS_STS_REGIONAL_ENDPOINTS, value: regional}]
    provideClusterInfo: false
  definitionArgs:
  - pattern: --cluster-name
  - pattern: prod-[a-z0-9-]{1,60}
  definitionEnv:
  - name: AWS_REGION
    pattern: '[a-z]{2}-[a-z]+-[0-9]'
"#;

    #[test]
    fn reads_a_declaration_in_yaml() {
        let file = ExecPluginsFile::parse(EKS.as_bytes()).unwrap();
        assert_eq!(file.names().collect::<Vec<_>>(), ["eks"]);
        let declaration = file.declarations().next().unwrap();
        assert_eq!(declaration.command(), Path::new("/usr/local/bin/aws"));
        assert_eq!(declaration.rules().definition_args.len(), 2);
        assert_eq!(declaration.rules().definition_env[0].name, "AWS_REGION");
        let config = ExecConfig {
            args: vec!["--cluster-name".to_owned(), "prod-1".to_owned()],
            ..ExecConfig::new("/usr/local/bin/aws")
        };
        let invocation = declaration.invocation("/p".into(), &config).unwrap();
        let want = ["eks", "get-token", "--cluster-name", "prod-1"];
        assert_eq!(invocation.args, want);
        let other = ExecConfig {
            args: vec!["--cluster-name".to_owned(), "staging".to_owned()],
            ..config
        };
        assert!(matches!(
            declaration.invocation("/p".into(), &other),
            Err(ExecError::ArgNotAllowed { index: 1, .. })
        ));
    }

    #[test]
    fn reads_upstreams_provider_file_in_json_and_accepts_nothing_from_definitions() {
        let json = r#"{"providers": [{"name": "secretreader",
            "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
                           "command": "/bin/secretreader-plugin", "args": null, "env": null,
                           "provideClusterInfo": true, "interactiveMode": "Never"},
            "profileSourcedCLIArgsPolicy": "Append"}]}"#;
        let file = ExecPluginsFile::parse(json.as_bytes()).unwrap();
        let declaration = file.declarations().next().unwrap();
        assert_eq!(declaration.rules(), &DefinitionRules::default());
    }

    #[rstest]
    #[case::relative("providers: [{name: p, execConfig: {command: aws}}]", "absolute")]
    #[case::no_command("providers: [{name: p, execConfig: {}}]", "absolute")]
    #[case::no_name("providers: [{name: '', execConfig: {command: /bin/p}}]", "no name")]
    #[case::twice(
        "providers: [{name: p, execConfig: {command: /bin/p}}, {name: p, execConfig: {command: /bin/q}}]",
        "twice"
    )]
    #[case::command_twice(
        "providers: [{name: p, execConfig: {command: /bin/p}}, {name: q, execConfig: {command: /bin/p}}]",
        "one declaration per command"
    )]
    #[case::bad_pattern(
        "providers: [{name: p, execConfig: {command: /bin/p}, definitionArgs: [{pattern: '('}]}]",
        "not a valid regular expression"
    )]
    #[case::home(
        "providers: [{name: p, execConfig: {command: /bin/p}, definitionEnv: [{name: HOME, pattern: '.*'}]}]",
        "may not name \"HOME\""
    )]
    #[case::rule_typo(
        "providers: [{name: p, execConfig: {command: /bin/p}, definitionArgs: [{patern: x}]}]",
        "unknown field"
    )]
    fn unusable_files_are_refused(#[case] raw: &str, #[case] want: &str) {
        let err = ExecPluginsFile::parse(raw.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
    }

    #[test]
    fn an_oversized_file_is_refused_without_reading_it_all() {
        let endless = ExecPluginsFile::read(Path::new("/dev/zero"));
        assert!(matches!(endless, Err(ExecPluginsFileError::TooLarge)));
    }
}
