//! Member health: what a member's probe says, or why it cannot be probed, and the condition
//! statuses and reasons that follow from it.

use cluster_registry::InvalidReason;
use member_client::{FailureKind, SourceError};

/// The outcome of the latest probe of a member, or why there is none.
///
/// An auth failure is always reported as such: never folded into "unreachable" or "not found".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MemberHealth {
    /// Not probed yet.
    Unknown,
    /// `/readyz` answered 200 with the member's credential.
    Healthy,
    /// The member rejects the credential (401), also after re-reading its Secret.
    Unauthorized,
    /// The credential is accepted but may not read `/readyz` (403).
    Forbidden,
    /// The member could not be reached (connect, TLS, timeout) or answered with an error.
    Unreachable(String),
    /// The member's definition or credential is unusable; the registry says why.
    Invalid(InvalidReason),
}

impl MemberHealth {
    /// Classifies a failed probe.
    pub(crate) fn from_error(err: &kube::Error) -> Self {
        // A host name that resolved to a forbidden address: EndpointForbidden, not Unreachable.
        if let Some(refusal) = member_client::validation::refusal_in(err) {
            return Self::Invalid(InvalidReason::from(refusal.clone()));
        }
        match FailureKind::of(err) {
            FailureKind::Unauthorized => Self::Unauthorized,
            FailureKind::Forbidden => Self::Forbidden,
            FailureKind::CredentialUnavailable => Self::Invalid(match source_error(err) {
                Some(source) => InvalidReason::from(source),
                None => InvalidReason::SecretInvalid(describe(err)),
            }),
            FailureKind::Unreachable | FailureKind::NotFound | FailureKind::Other => {
                Self::Unreachable(describe(err))
            }
        }
    }

    /// The reason written into both conditions (`Ready` and `CredentialsValid`).
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Unknown => "Probing",
            Self::Healthy => "MemberReady",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::Unreachable(_) => "Unreachable",
            Self::Invalid(reason) => reason.condition_reason(),
        }
    }

    /// A sentence for a person reading `kubectl describe`.
    pub(crate) fn message(&self) -> String {
        match self {
            Self::Unknown => "the member has not been probed yet".to_owned(),
            Self::Healthy => "the member's /readyz answers with its current credential".to_owned(),
            Self::Unauthorized => {
                "the member rejects the credential in its Secret (401), also after re-reading it; \
                 write a valid token to the Secret"
                    .to_owned()
            }
            Self::Forbidden => "the credential is accepted but lacks permission (403)".to_owned(),
            Self::Unreachable(why) => format!("the member cannot be reached: {why}"),
            Self::Invalid(reason) => invalid_message(reason),
        }
    }

    /// The `Ready` condition's status.
    pub(crate) fn ready_status(&self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::Healthy => "True",
            _ => "False",
        }
    }

    /// The `CredentialsValid` condition's status: unknown when the member can't be asked.
    pub(crate) fn credentials_valid_status(&self) -> &'static str {
        match self {
            Self::Healthy => "True",
            Self::Unauthorized
            | Self::Forbidden
            | Self::Invalid(InvalidReason::SecretNotFound | InvalidReason::SecretInvalid(_)) => {
                "False"
            }
            Self::Unknown | Self::Unreachable(_) | Self::Invalid(_) => "Unknown",
        }
    }

    /// The `CredentialsValid` reason: the credential is fine when the member is healthy.
    pub(crate) fn credentials_valid_reason(&self) -> &'static str {
        match self {
            Self::Healthy => "CredentialsAccepted",
            other => other.reason(),
        }
    }
}

fn invalid_message(reason: &InvalidReason) -> String {
    match reason {
        InvalidReason::SecretNotFound => {
            "the Secret the member references does not exist".to_owned()
        }
        InvalidReason::SecretInvalid(why) => format!("the member's Secret is unusable: {why}"),
        InvalidReason::SecretForbidden(why) => format!(
            "the collector may not read the member's Secret: {why}; grant it get, list and watch \
             on Secrets in that namespace"
        ),
        other => format!(
            "the member's definition is unusable: {}",
            other.detail().unwrap_or_else(|| other.condition_reason())
        ),
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

/// The error and its causes on one line (tokens never reach errors, so this is safe to log),
/// [`Text`](member_client::Text)-sanitized: the member writes its error bodies.
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
    member_client::Text::new(&text).into()
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
    #[case::resolved_to_a_forbidden_address(
        kube::Error::Service(Box::new(std::io::Error::other(member_client::ValidationError::Forbidden(
            "169.254.169.254 is a cloud metadata address".into()
        )))),
        "EndpointForbidden",
        "False",
        "Unknown"
    )]
    fn each_failure_gets_its_own_reason(
        #[case] err: kube::Error,
        #[case] reason: &str,
        #[case] ready: &str,
        #[case] credentials_valid: &str,
    ) {
        let health = MemberHealth::from_error(&err);
        assert_eq!(
            (
                health.reason(),
                health.ready_status(),
                health.credentials_valid_status()
            ),
            (reason, ready, credentials_valid)
        );
    }

    #[rstest]
    #[case::secret_forbidden(InvalidReason::SecretForbidden("secrets is forbidden".into()), "SecretForbidden", "Unknown", "secrets is forbidden")]
    #[case::endpoint(InvalidReason::EndpointInvalid("\"ftp://h\" is not an https URL".into()), "EndpointInvalid", "Unknown", "not an https URL")]
    #[case::secret_invalid(InvalidReason::SecretInvalid("the token is empty".into()), "SecretInvalid", "False", "the token is empty")]
    fn an_unusable_member_keeps_the_registry_reason(
        #[case] reason: InvalidReason,
        #[case] want_reason: &str,
        #[case] credentials_valid: &str,
        #[case] message: &str,
    ) {
        let health = MemberHealth::Invalid(reason);
        assert_eq!(
            (
                health.reason(),
                health.ready_status(),
                health.credentials_valid_status()
            ),
            (want_reason, "False", credentials_valid)
        );
        assert!(health.message().contains(message), "{}", health.message());
    }

    #[test]
    fn a_members_error_body_is_cut_and_cannot_forge_lines() {
        let body = format!("evil\nlevel=ERROR msg=forged {}", "x".repeat(100_000));
        let err = kube::Error::Api(Box::new(
            kube::core::Status::failure(&body, "y").with_code(500),
        ));
        let message = MemberHealth::from_error(&err).message();
        assert!(!message.contains('\n'), "{message}");
        assert!(
            message.len() <= 2 * member_client::Text::MAX_BYTES,
            "{}",
            message.len()
        );
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
