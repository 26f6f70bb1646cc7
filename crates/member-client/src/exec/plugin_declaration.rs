//! The operator's declaration of one exec plugin: the command, its fixed arguments and
//! environment, and which arguments and variables a member definition may add, each checked
//! against a pattern.
//!
//! A definition (kubeconfig `exec`, Argo CD `execProviderConfig`, member file, ClusterProfile)
//! only chooses among what the declaration accepts. By default it accepts nothing: a
//! definition that passes one argument or one variable the declaration does not accept is
//! refused, and nothing runs.

use std::{fmt, path::PathBuf, sync::Arc};

use serde::Deserialize;

use crate::Text;

use super::{ExecConfig, ExecEnvVar, ExecError, config::debug_plugin, refused_env::env_is_refused};

/// The longest pattern source accepted, in bytes.
const MAX_PATTERN_BYTES: usize = 1024;
/// The most memory one compiled pattern may take: patterns are the operator's, but a typo
/// such as `.{1000}{1000}` should fail at start, not exhaust memory.
const MAX_PATTERN_SIZE: usize = 1 << 20;

/// A regular expression that must match a whole value: written `prod-[a-z0-9-]+`, it is
/// compiled as `^(?:prod-[a-z0-9-]+)$`. Matching takes linear time (the `regex` crate).
///
/// ```
/// use member_client::exec::Pattern;
/// let pattern = Pattern::new("prod-[a-z0-9-]+").unwrap();
/// assert!(pattern.is_match("prod-eu-1"));
/// assert!(!pattern.is_match("prod-eu-1 --profile admin"));
/// assert!(!pattern.is_match("xprod-eu"));
/// ```
#[derive(Clone)]
pub struct Pattern {
    source: Arc<str>,
    regex: regex::Regex,
}

impl Pattern {
    /// Compiles `source`, anchored at both ends.
    ///
    /// # Errors
    /// Not a valid regular expression, longer than 1 KiB, or one that compiles too large.
    pub fn new(source: &str) -> Result<Self, String> {
        if source.len() > MAX_PATTERN_BYTES {
            return Err(format!("pattern is over {MAX_PATTERN_BYTES} bytes"));
        }
        let regex = regex::RegexBuilder::new(&format!("^(?:{source})$"))
            .size_limit(MAX_PATTERN_SIZE)
            .build()
            .map_err(|err| {
                format!("pattern {source:?} is not a valid regular expression: {err}")
            })?;
        Ok(Self {
            source: source.into(),
            regex,
        })
    }

    /// Whether the whole of `value` matches.
    pub fn is_match(&self, value: &str) -> bool {
        self.regex.is_match(value)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.source, f)
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        Self::new(&source).map_err(serde::de::Error::custom)
    }
}

/// One argument a definition may pass: the argument at this position must match `pattern`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgRule {
    /// What the argument must be, whole.
    pub pattern: Pattern,
}

/// One variable a definition may set: `name`, with a value that matches `pattern`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvRule {
    /// The variable's name, exactly.
    pub name: String,
    /// What its value must be, whole.
    pub pattern: Pattern,
}

/// What a member definition may add to a declared plugin's invocation: Tether's extension of
/// upstream's provider entry (`definitionArgs`, `definitionEnv`). Both empty by default: a
/// definition adds nothing.
///
/// Arguments are positional: the definition's argument `i` must match `definition_args[i]`,
/// and a definition may pass fewer arguments than there are rules, never more. A definition
/// whose arguments begin with the declaration's fixed arguments (a kubeconfig written by
/// `aws eks update-kubeconfig` spells out the whole argv) has that repetition dropped first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DefinitionRules {
    /// The arguments a definition may append, in order.
    pub definition_args: Vec<ArgRule>,
    /// The variables a definition may set.
    pub definition_env: Vec<EnvRule>,
}

/// Why a plugin declaration is unusable; the collector does not start with one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeclarationError {
    /// The command is not an absolute path.
    #[error("command {0:?} must be an absolute path")]
    RelativeCommand(String),
    /// A fixed variable or a `definitionEnv` name is empty or holds `=` or NUL.
    #[error("environment variable name {0:?} is not valid")]
    BadEnvName(String),
    /// `definitionEnv` names a variable through which whoever sets it chooses code or trust.
    #[error(
        "definitionEnv may not name {0:?}: whoever sets it chooses what code the plugin runs, \
         which files it reads or whom it trusts; set it in execConfig.env instead"
    )]
    RefusedEnvName(String),
    /// `definitionEnv` names one variable twice.
    #[error("definitionEnv names {0:?} twice")]
    DuplicateEnvName(String),
}

/// The operator's declaration of one exec plugin.
///
/// `Debug` shows the command, how many fixed arguments there are and the names of the fixed
/// variables, never their values; the patterns are shown (they are the operator's rules, not
/// secrets).
///
/// ```
/// use member_client::exec::{DefinitionRules, ExecEnvVar, PluginDeclaration};
/// let declaration = PluginDeclaration::new(
///     "/usr/local/bin/aws",
///     vec!["eks".into(), "get-token".into()],
///     vec![ExecEnvVar { name: "AWS_STS_REGIONAL_ENDPOINTS".into(), value: "regional".into() }],
///     DefinitionRules::default(),
/// )?;
/// assert!(!format!("{declaration:?}").contains("regional"));
/// # Ok::<(), member_client::exec::DeclarationError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct PluginDeclaration {
    command: PathBuf,
    resolved: Option<PathBuf>,
    args: Vec<String>,
    env: Vec<ExecEnvVar>,
    rules: DefinitionRules,
}

/// What runs: the file, the whole argv after it, and the variables on top of the minimal
/// environment. `Debug` shows the count of arguments and the names of variables only.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub(crate) path: PathBuf,
    pub(crate) args: Vec<String>,
    /// The declaration's variables, then the definition's accepted ones (which win).
    pub(crate) env: Vec<ExecEnvVar>,
}

impl fmt::Debug for Invocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = ("path", &self.path as &dyn fmt::Debug);
        debug_plugin(f, "Invocation", path, &self.args, &self.env).finish()
    }
}

impl PluginDeclaration {
    /// A declaration of `command` (an absolute path, canonicalized now; one that does not
    /// exist never matches) run with `args` and `env` first, accepting what `rules` allow.
    ///
    /// # Errors
    /// See [`DeclarationError`].
    pub fn new(
        command: impl Into<PathBuf>,
        args: Vec<String>,
        env: Vec<ExecEnvVar>,
        rules: DefinitionRules,
    ) -> Result<Self, DeclarationError> {
        let command = command.into();
        if !command.is_absolute() {
            return Err(DeclarationError::RelativeCommand(
                command.display().to_string(),
            ));
        }
        if let Some(var) = env.iter().find(|var| !valid_env_name(&var.name)) {
            return Err(DeclarationError::BadEnvName(var.name.clone()));
        }
        let mut names = std::collections::BTreeSet::new();
        for rule in &rules.definition_env {
            if !valid_env_name(&rule.name) {
                return Err(DeclarationError::BadEnvName(rule.name.clone()));
            }
            if env_is_refused(&rule.name) {
                return Err(DeclarationError::RefusedEnvName(rule.name.clone()));
            }
            if !names.insert(rule.name.as_str()) {
                return Err(DeclarationError::DuplicateEnvName(rule.name.clone()));
            }
        }
        Ok(Self {
            args,
            env,
            rules,
            ..Self::command_only(command)
        })
    }

    /// `--allow-exec PATH`: the command alone, with no fixed arguments or variables, and
    /// accepting no argument and no variable from a definition.
    pub fn command_only(command: impl Into<PathBuf>) -> Self {
        let command = command.into();
        Self {
            resolved: std::fs::canonicalize(&command).ok(),
            command,
            args: Vec::new(),
            env: Vec::new(),
            rules: DefinitionRules::default(),
        }
    }

    /// The command as declared.
    pub fn command(&self) -> &std::path::Path {
        &self.command
    }

    /// The command canonicalized when the declaration was made; `None` when it could not be
    /// (it did not exist), and then it never runs.
    pub fn resolved(&self) -> Option<&std::path::Path> {
        self.resolved.as_deref()
    }

    /// The fixed arguments, which come first.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Whether this is `--allow-exec`'s shorthand: nothing fixed, nothing accepted.
    pub(crate) fn is_bare(&self) -> bool {
        self.args.is_empty() && self.env.is_empty() && self.rules == DefinitionRules::default()
    }

    /// What a definition may add.
    pub fn rules(&self) -> &DefinitionRules {
        &self.rules
    }

    /// The invocation of `path` (this declaration's resolved command) for `config`, if every
    /// argument and variable the definition passes is accepted.
    ///
    /// # Errors
    /// [`ExecError::ArgNotAllowed`] naming the first refused argument's position, or
    /// [`ExecError::EnvNotAllowed`] naming the first refused variable; never their values.
    pub(crate) fn invocation(
        &self,
        path: PathBuf,
        config: &ExecConfig,
    ) -> Result<Invocation, ExecError> {
        let given = config
            .args
            .strip_prefix(self.args.as_slice())
            .filter(|_| !self.args.is_empty())
            .unwrap_or(&config.args);
        let accepted = self.rules.definition_args.len();
        for (index, arg) in given.iter().enumerate() {
            let fits =
                (self.rules.definition_args.get(index)).is_some_and(|r| r.pattern.is_match(arg));
            if !fits {
                return Err(ExecError::ArgNotAllowed {
                    command: Text::new(&config.command),
                    index,
                    accepted,
                });
            }
        }
        for var in &config.env {
            let rule = (self.rules.definition_env.iter()).find(|rule| rule.name == var.name);
            if !rule.is_some_and(|rule| rule.pattern.is_match(&var.value)) {
                return Err(ExecError::EnvNotAllowed {
                    name: Text::new(&var.name),
                });
            }
        }
        let args = [self.args.as_slice(), given].concat();
        let env = [self.env.as_slice(), &config.env].concat();
        Ok(Invocation { path, args, env })
    }
}

impl fmt::Debug for PluginDeclaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let command = ("command", &self.command as &dyn fmt::Debug);
        debug_plugin(f, "PluginDeclaration", command, &self.args, &self.env)
            .field("definition_args", &self.rules.definition_args)
            .field(
                "definition_env",
                &(self.rules.definition_env.iter())
                    .map(|rule| (&rule.name, &rule.pattern))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A name that cannot forge another variable: not empty, no `=` or NUL.
fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

#[cfg(test)]
mod tests;
