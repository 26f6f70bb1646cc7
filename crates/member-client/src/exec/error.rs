//! Why an exec plugin gave no credential.
//!
//! NB: no message here quotes the plugin's stdout. A plugin that prints a token inside malformed
//! JSON would otherwise put the token into a condition; each failure says what is wrong instead.

use std::time::Duration;

use crate::Text;

use super::ExecApiVersion;

/// Why [`run`](super::run) returned no credential.
///
/// `Clone`, so that one failure can be handed to every caller that waited on the same run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// `command` does not resolve to a path given with `--allow-exec`; nothing was run.
    /// Permanent until the member definition or the allow-list changes.
    #[error(
        "exec plugin \"{command}\" is not allowed: it must be an absolute path or a name on PATH that resolves to a file declared with --exec-plugins or given with --allow-exec"
    )]
    NotAllowed {
        /// The command as the definition gives it, sanitized.
        command: Text,
    },
    /// The definition sets a variable the plugin's declaration does not accept from a
    /// definition (by default none), or whose value does not match the declared pattern;
    /// nothing was run. Permanent until the definition or the declaration changes.
    #[error(
        "exec plugin environment variable \"{name}\" is not accepted from a member definition: declare it with its value's pattern in the plugin's definitionEnv (--exec-plugins), or drop it from the definition"
    )]
    EnvNotAllowed {
        /// The variable's name, sanitized; never its value.
        name: Text,
    },
    /// The definition passes an argument the plugin's declaration does not accept at that
    /// position (by default none), or one that does not match the declared pattern; nothing
    /// was run. Permanent until the definition or the declaration changes.
    #[error(
        "exec plugin \"{command}\": argument {index} from the member definition is not accepted (the declaration accepts {accepted} definition arguments, each matching its pattern in definitionArgs, after its fixed args): declare it with --exec-plugins, or drop it from the definition"
    )]
    ArgNotAllowed {
        /// The command as the definition gives it, sanitized.
        command: Text,
        /// The refused argument's position among the definition's arguments, counted from 0
        /// after any repetition of the declared fixed arguments; never its value.
        index: usize,
        /// How many definition arguments the declaration accepts.
        accepted: usize,
    },
    /// The plugin ran (or was meant to) and gave no usable credential. May pass on retry, as a
    /// plugin's backend may be down.
    #[error(transparent)]
    Failed(#[from] ExecFailure),
}

impl ExecError {
    /// The `reason` for the member's credential condition: `ExecNotAllowed` when the allow-list
    /// refused the definition, `ExecFailed` when the plugin failed.
    pub fn condition_reason(&self) -> &'static str {
        match self {
            Self::NotAllowed { .. } | Self::EnvNotAllowed { .. } | Self::ArgNotAllowed { .. } => {
                "ExecNotAllowed"
            }
            Self::Failed(_) => "ExecFailed",
        }
    }
}

/// How an allowed plugin failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecFailure {
    /// The plugin could not be started (not executable, a bad interpreter, a NUL byte in an
    /// argument).
    #[error("exec plugin could not be started: {0}")]
    Spawn(Text),
    /// The plugin (or a process it left holding its output) was still running at the deadline;
    /// its process group was killed.
    #[error("exec plugin did not finish within {after:?} and was killed")]
    TimedOut {
        /// The [`ExecPolicy`](super::ExecPolicy)'s timeout.
        after: Duration,
    },
    /// The plugin exited unsuccessfully.
    #[error("exec plugin {}: {}", exit(.code), stderr_or_none(.stderr))]
    Exited {
        /// Its exit code; `None` when a signal killed it.
        code: Option<i32>,
        /// The end of what it wrote to stderr, sanitized. NB: a plugin that writes its
        /// credential to stderr puts it here; client-go shows stderr to the user, too.
        stderr: Text,
    },
    /// The plugin wrote more than [`ExecPolicy::MAX_STDOUT`](super::ExecPolicy::MAX_STDOUT)
    /// bytes to stdout; it was killed rather than buffered.
    #[error("exec plugin wrote more than {max} bytes to stdout")]
    OutputTooLarge {
        /// The cap.
        max: usize,
    },
    /// Reading the plugin's output or exit status failed.
    #[error("reading exec plugin output failed: {0}")]
    Read(Text),
    /// The plugin exited successfully but its stdout is not a usable ExecCredential.
    #[error("exec plugin printed an unusable ExecCredential: {0}")]
    BadOutput(BadExecOutput),
}

fn exit(code: &Option<i32>) -> String {
    match code {
        Some(code) => format!("exited with code {code}"),
        None => "was killed by a signal".to_owned(),
    }
}

fn stderr_or_none(stderr: &Text) -> &str {
    match stderr.as_str() {
        "" => "(nothing on stderr)",
        text => text,
    }
}

/// What is wrong with a plugin's stdout. Only names fields and kinds of problems, never values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadExecOutput {
    /// Nothing but whitespace.
    #[error("stdout is empty")]
    Empty,
    /// Not JSON at all.
    #[error("stdout is not JSON (error at line {line}, column {column})")]
    NotJson {
        /// Where parsing stopped, 1-based.
        line: usize,
        /// Where parsing stopped, 1-based.
        column: usize,
    },
    /// JSON, but not an object.
    #[error("stdout is not a JSON object")]
    NotAnObject,
    /// `apiVersion` is not the one sent in `KUBERNETES_EXEC_INFO`.
    #[error("apiVersion is {}, but {want} was sent", .got.unwrap_or("missing or unknown"))]
    WrongApiVersion {
        /// The version sent.
        want: ExecApiVersion,
        /// The version received, when it is one of client.authentication.k8s.io's.
        got: Option<&'static str>,
    },
    /// `kind` is not `ExecCredential`.
    #[error("kind is not ExecCredential")]
    WrongKind,
    /// No `status`.
    #[error("status is missing")]
    NoStatus,
    /// A field has the wrong JSON type.
    #[error("{field} is not {expected}")]
    WrongType {
        /// The field, e.g. `status.token`.
        field: &'static str,
        /// What it must be, e.g. `a string`.
        expected: &'static str,
    },
    /// `status` holds neither a token nor a client certificate and key.
    #[error("status holds neither a token nor clientCertificateData and clientKeyData")]
    NoCredential,
    /// `status` holds only one half of a client certificate and key.
    #[error("status holds {present} without {missing}")]
    IncompleteKeyPair {
        /// The field given.
        present: &'static str,
        /// The field missing.
        missing: &'static str,
    },
    /// `status.token` is longer than [`Credential::MAX_TOKEN_BYTES`](crate::Credential::MAX_TOKEN_BYTES).
    #[error("status.token is longer than {max} bytes")]
    TokenTooLong {
        /// The cap.
        max: usize,
    },
    /// `status.token` holds only whitespace.
    #[error("status.token is only whitespace")]
    TokenBlank,
    /// `status.token` holds characters that cannot go in an HTTP header.
    #[error("status.token holds characters that cannot be sent in an HTTP header")]
    TokenNotHeaderSafe,
    /// `status.expirationTimestamp` is not an RFC 3339 time such as `2026-12-01T20:00:00Z`.
    #[error("status.expirationTimestamp is not an RFC 3339 time")]
    BadTimestamp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::not_allowed(ExecError::NotAllowed { command: Text::new("x") }, "ExecNotAllowed")]
    #[case::env_not_allowed(ExecError::EnvNotAllowed { name: Text::new("LD_PRELOAD") }, "ExecNotAllowed")]
    #[case::timed_out(ExecFailure::TimedOut { after: Duration::from_secs(1) }.into(), "ExecFailed")]
    #[case::bad_output(ExecFailure::BadOutput(BadExecOutput::NoStatus).into(), "ExecFailed")]
    fn errors_map_to_condition_reasons(#[case] err: ExecError, #[case] want: &str) {
        assert_eq!(err.condition_reason(), want);
    }

    #[rstest]
    #[case::code(Some(3), "boom", "exec plugin exited with code 3: boom")]
    #[case::signal(None, "", "exec plugin was killed by a signal: (nothing on stderr)")]
    fn exit_messages_say_how_it_ended(
        #[case] code: Option<i32>,
        #[case] stderr: &str,
        #[case] want: &str,
    ) {
        let err = ExecError::from(ExecFailure::Exited {
            code,
            stderr: Text::new(stderr),
        });
        assert_eq!(err.to_string(), want);
    }

    #[test]
    fn bad_output_message_names_the_problem() {
        let err = ExecError::from(ExecFailure::BadOutput(BadExecOutput::WrongApiVersion {
            want: ExecApiVersion::V1,
            got: Some("client.authentication.k8s.io/v1beta1"),
        }));
        assert_eq!(
            err.to_string(),
            "exec plugin printed an unusable ExecCredential: apiVersion is \
             client.authentication.k8s.io/v1beta1, but client.authentication.k8s.io/v1 was sent"
        );
    }
}
