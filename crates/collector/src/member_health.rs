//! What a member's probe says, and the conditions that follow from it.

use member_client::{FailureKind, SourceError};

/// The outcome of the last probe of a member, as a condition reason.
///
/// An auth failure is always reported as such: never folded into "unreachable" or "not found".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberHealth {
    /// Not probed yet.
    Unknown,
    /// `/readyz` answered 200 with the member's credential.
    Healthy,
    /// The member rejects the credential (401), also after re-reading its Secret.
    Unauthorized,
    /// The credential is accepted but may not read `/readyz` (403).
    Forbidden,
    /// The Secret the member references does not exist.
    SecretNotFound,
    /// The Secret exists but holds no usable credential, or the definition is unusable.
    SecretInvalid(String),
    /// The collector may not list the Secrets of the member's Secret's namespace (403): it
    /// cannot know the credential, so it cannot say whether it is valid.
    SecretForbidden(String),
    /// The member could not be reached (connect, TLS, timeout) or answered with an error.
    Unreachable(String),
    /// The member's definition is unusable (bad endpoint or proxy URL, …); nothing is sent.
    DefinitionInvalid {
        /// The condition reason, e.g. `EndpointInvalid`.
        reason: &'static str,
        /// What is wrong.
        detail: String,
    },
}

impl MemberHealth {
    /// Classifies a failed probe.
    pub fn from_error(err: &kube::Error) -> Self {
        match FailureKind::of(err) {
            FailureKind::Unauthorized => Self::Unauthorized,
            FailureKind::Forbidden => Self::Forbidden,
            FailureKind::CredentialUnavailable => match source_error(err) {
                Some(SourceError::NotFound { .. }) => Self::SecretNotFound,
                Some(other) => Self::SecretInvalid(other.to_string()),
                None => Self::SecretInvalid(err.to_string()),
            },
            FailureKind::Unreachable | FailureKind::NotFound | FailureKind::Other => {
                Self::Unreachable(describe(err))
            }
        }
    }

    /// The reason written into both conditions (`Ready` and `CredentialsValid`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unknown => "Probing",
            Self::Healthy => "MemberReady",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::SecretNotFound => "SecretNotFound",
            Self::SecretInvalid(_) => "SecretInvalid",
            Self::SecretForbidden(_) => "SecretForbidden",
            Self::Unreachable(_) => "Unreachable",
            Self::DefinitionInvalid { reason, .. } => reason,
        }
    }

    /// A sentence for a person reading `kubectl describe`.
    pub fn message(&self) -> String {
        match self {
            Self::Unknown => "the member has not been probed yet".to_owned(),
            Self::Healthy => "the member's /readyz answers with its current credential".to_owned(),
            Self::Unauthorized => {
                "the member rejects the credential in its Secret (401), also after re-reading it; \
                 write a valid token to the Secret"
                    .to_owned()
            }
            Self::Forbidden => "the credential is accepted but lacks permission (403)".to_owned(),
            Self::SecretNotFound => "the Secret the member references does not exist".to_owned(),
            Self::SecretInvalid(why) => format!("the member's Secret is unusable: {why}"),
            Self::SecretForbidden(why) => format!(
                "the collector may not read the member's Secret: {why}; grant it get, list and \
                 watch on Secrets in that namespace"
            ),
            Self::Unreachable(why) => format!("the member cannot be reached: {why}"),
            Self::DefinitionInvalid { detail, .. } => {
                format!("the member's definition is unusable: {detail}")
            }
        }
    }

    /// The `Ready` condition's status.
    pub fn ready_status(&self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::Healthy => "True",
            _ => "False",
        }
    }

    /// The `CredentialsValid` condition's status: unknown when the member can't be asked.
    pub fn credentials_valid_status(&self) -> &'static str {
        match self {
            Self::Unknown
            | Self::Unreachable(_)
            | Self::SecretForbidden(_)
            | Self::DefinitionInvalid { .. } => "Unknown",
            Self::Healthy => "True",
            Self::Unauthorized
            | Self::Forbidden
            | Self::SecretNotFound
            | Self::SecretInvalid(_) => "False",
        }
    }

    /// The `CredentialsValid` reason: the credential is fine when the member is healthy.
    pub fn credentials_valid_reason(&self) -> &'static str {
        match self {
            Self::Healthy => "CredentialsAccepted",
            other => other.reason(),
        }
    }
}

fn source_error(err: &kube::Error) -> Option<&SourceError> {
    let kube::Error::Service(inner) = err else {
        return None;
    };
    match inner.downcast_ref::<member_client::Error>()? {
        member_client::Error::CredentialUnavailable { source, .. } => Some(source.as_ref()),
        _ => None,
    }
}

/// The error and its causes on one line (tokens never reach errors, so this is safe to log).
fn describe(err: &kube::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::SecretRef;
    use rstest::rstest;
    use std::sync::Arc;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("x", "y").with_code(code),
        ))
    }

    fn unavailable(source: SourceError) -> kube::Error {
        kube::Error::Service(Box::new(member_client::Error::CredentialUnavailable {
            member: "m".into(),
            secret: SecretRef::new("ns", "s"),
            source: Arc::new(source),
        }))
    }

    #[rstest]
    #[case::rejected(
        kube::Error::Service(Box::new(member_client::Error::Unauthorized { member: "m".into(), secret: SecretRef::new("ns", "s") })),
        "Unauthorized", "False", "False"
    )]
    #[case::plain_401(api(401), "Unauthorized", "False", "False")]
    #[case::forbidden(api(403), "Forbidden", "False", "False")]
    #[case::secret_missing(unavailable(SourceError::NotFound { key: SecretRef::new("ns", "s") }), "SecretNotFound", "False", "False")]
    #[case::token_empty(
        unavailable(SourceError::EmptyToken),
        "SecretInvalid",
        "False",
        "False"
    )]
    #[case::refused(
        kube::Error::Service(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        ))),
        "Unreachable",
        "False",
        "Unknown"
    )]
    #[case::server_error(api(500), "Unreachable", "False", "Unknown")]
    fn each_failure_gets_its_own_reason(
        #[case] err: kube::Error,
        #[case] reason: &str,
        #[case] ready: &str,
        #[case] credentials_valid: &str,
    ) {
        let health = MemberHealth::from_error(&err);
        assert_eq!(health.reason(), reason);
        assert_eq!(health.ready_status(), ready);
        assert_eq!(health.credentials_valid_status(), credentials_valid);
    }

    #[test]
    fn an_unreadable_secret_says_so_and_leaves_the_credential_unknown() {
        let health = MemberHealth::SecretForbidden("secrets is forbidden".into());
        assert_eq!(
            (
                health.reason(),
                health.ready_status(),
                health.credentials_valid_status()
            ),
            ("SecretForbidden", "False", "Unknown")
        );
        assert!(health.message().contains("secrets is forbidden"));
    }

    #[test]
    fn healthy_member_has_valid_credentials() {
        assert_eq!(MemberHealth::Healthy.ready_status(), "True");
        assert_eq!(MemberHealth::Healthy.credentials_valid_status(), "True");
        assert_eq!(
            MemberHealth::Healthy.credentials_valid_reason(),
            "CredentialsAccepted"
        );
    }
}
