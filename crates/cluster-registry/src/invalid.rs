//! Why a member cannot be used, and the per-member state the read API shows.

use std::fmt;

use member_client::{
    SourceError, client_identity::IdentityError, text::Text, validation::ValidationError,
};

/// Why a member's definition or credential is unusable.
///
/// Each variant maps 1:1 to the reason of the `Ready`/`CredentialsValid` conditions the
/// collector writes ([`condition_reason`](Self::condition_reason)). The `String`s say what is
/// wrong for a human; they never hold a token.
///
/// ```
/// use cluster_registry::InvalidReason;
/// let reason = InvalidReason::SecretInvalid("the token is empty".into());
/// assert_eq!(reason.condition_reason(), "SecretInvalid");
/// assert_eq!(reason.to_string(), "SecretInvalid: the token is empty");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, strum::VariantNames, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum InvalidReason {
    /// The referenced Secret (or, for the directory source, the token file) does not exist.
    SecretNotFound,
    /// The member may not use the Secret it names: the Secret is bound to another member
    /// ([`MEMBER_LABEL`](crate::MEMBER_LABEL)), its namespace is not one of the Secret
    /// namespaces, or the registry may not list the Secrets there (403: the collector's RBAC
    /// does not cover it). The `String` is a whole sentence: it names the Secret or namespace,
    /// the rule or the apiserver's words, and what to do.
    SecretForbidden(String),
    /// The Secret exists but its credential is unusable: a missing key, an empty or non-UTF-8
    /// token, a CA bundle that is not PEM, an Argo CD `config` that is not JSON.
    SecretInvalid(String),
    /// The API endpoint is missing or not an `https://host[:port]` URL.
    EndpointInvalid(String),
    /// The endpoint or proxy is well formed, but Tether may not send a token there: a
    /// loopback, link-local, unspecified or cloud-metadata address (as written or as resolved)
    /// outside `--allow-endpoint`, `http://` without `--allow-plain-http`, user info in the
    /// URL, or `insecureSkipTLSVerification` without `--allow-insecure-members`.
    EndpointForbidden(String),
    /// The proxy URL is not an `http://` or `https://` URL.
    ProxyInvalid(String),
    /// A Karmada Cluster in Pull mode: its agent reaches the control plane, Tether does not
    /// reach the member. Ignored on purpose.
    PullMode,
    /// The definition itself is unusable (a member file that is not YAML, a Cluster without
    /// `secretRef`, a name claimed by another definition).
    DefinitionInvalid(String),
    /// The member's exec credential plugin is not on the allow-list (`--allow-exec`): it never
    /// runs.
    ExecNotAllowed(String),
    /// The member's exec credential plugin ran and gave no credential: it hung past its
    /// timeout, exited non-zero (its stderr, truncated, is quoted) or printed no usable
    /// `ExecCredential`.
    ExecFailed(String),
    /// The client certificate or key does not parse, or they do not match.
    CertificateInvalid(String),
    /// The client certificate's `notAfter` has passed.
    CertificateExpired(String),
    /// No access provider of the member's `ClusterProfile` is in the provider file
    /// (`--clusterprofile-provider-file`): there is no way in that Tether may use.
    ProviderNotFound(String),
    /// The control plane gave no federated credential ([`federation`](crate::federation)):
    /// it refused the TokenRequest for the collector's own ServiceAccount (RBAC, no such
    /// ServiceAccount, a lifetime it refuses) or did not answer.
    FederationFailed(String),
}

impl InvalidReason {
    /// Every [`condition_reason`](Self::condition_reason), one per variant: derived from the
    /// variants' names, so that a new variant is listed without anyone listing it.
    pub const CONDITION_REASONS: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The condition reason (`CamelCase`, as Kubernetes conditions want) for this variant.
    pub fn condition_reason(&self) -> &'static str {
        self.into()
    }

    /// Whether the member's definition is fine and only its credential is unusable (missing,
    /// malformed, a plugin that may not run or failed, a certificate that does not parse or
    /// expired): its client can stay, and heals when the credential does.
    pub fn is_credential(&self) -> bool {
        matches!(
            self,
            Self::SecretNotFound
                | Self::SecretInvalid(_)
                | Self::ExecNotAllowed(_)
                | Self::ExecFailed(_)
                | Self::CertificateInvalid(_)
                | Self::CertificateExpired(_)
                | Self::FederationFailed(_)
        )
    }

    /// The human part of the condition message, if the variant carries one.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Self::SecretNotFound | Self::PullMode => None,
            Self::SecretForbidden(d)
            | Self::SecretInvalid(d)
            | Self::EndpointInvalid(d)
            | Self::EndpointForbidden(d)
            | Self::ProxyInvalid(d)
            | Self::DefinitionInvalid(d)
            | Self::ExecNotAllowed(d)
            | Self::ExecFailed(d)
            | Self::CertificateInvalid(d)
            | Self::CertificateExpired(d)
            | Self::ProviderNotFound(d)
            | Self::FederationFailed(d) => Some(d),
        }
    }
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.detail()) {
            (_, Some(detail)) => write!(f, "{}: {detail}", self.condition_reason()),
            (Self::PullMode, None) => {
                f.write_str("PullMode: the cluster is in Pull mode; Tether serves Push mode only")
            }
            (_, None) => f.write_str(self.condition_reason()),
        }
    }
}

/// The one mapping from member-client's [`validation`](member_client::validation) rules to
/// reasons. A CA bundle arrives with the token, in the Secret, so a bad one is the Secret's
/// fault. Details are [`Text`]-sanitized: they quote what a definition's author wrote.
impl From<ValidationError> for InvalidReason {
    fn from(err: ValidationError) -> Self {
        let text = |detail: String| Text::new(&detail).into();
        match err {
            ValidationError::Endpoint(detail) => Self::EndpointInvalid(text(detail)),
            ValidationError::Forbidden(detail) => Self::EndpointForbidden(text(detail)),
            ValidationError::Proxy(detail) => Self::ProxyInvalid(text(detail)),
            ValidationError::CaBundle(detail) => Self::SecretInvalid(text(detail)),
        }
    }
}

impl InvalidReason {
    /// Why a member has no client: the [`validation`](member_client::validation) rule that
    /// [`ClientFactory::build`](member_client::ClientFactory::build) found broken, else an
    /// endpoint kube could not make a client for.
    pub fn of_build_error(err: member_client::Error) -> Self {
        match err {
            member_client::Error::Invalid { source, .. } => source.into(),
            other => Self::EndpointInvalid(Text::new(&other.to_string()).into()),
        }
    }
}

/// The one mapping from a credential source's failure to a reason: a missing Secret (or token
/// file) is `SecretNotFound`, an exec plugin's and a client certificate's failures have reasons
/// of their own, anything else about the Secret is `SecretInvalid`.
impl From<&SourceError> for InvalidReason {
    fn from(err: &SourceError) -> Self {
        let detail = Text::new(&err.to_string()).into();
        match err {
            SourceError::NotFound { .. } => Self::SecretNotFound,
            // The exec policy refused it before anything ran.
            SourceError::Exec(exec) if exec.condition_reason() == "ExecNotAllowed" => {
                Self::ExecNotAllowed(detail)
            }
            SourceError::Exec(_) => Self::ExecFailed(detail),
            SourceError::Identity(IdentityError::Expired { .. }) => {
                Self::CertificateExpired(detail)
            }
            SourceError::Identity(_) => Self::CertificateInvalid(detail),
            SourceError::Federation(_) => Self::FederationFailed(detail),
            _ => Self::SecretInvalid(detail),
        }
    }
}

/// What the registry currently thinks of one member, for the read API.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberState {
    /// Defined, but the Secrets of its namespace are not listed yet; no event was sent. (A list
    /// that is refused with 403 makes it [`Invalid`](Self::Invalid) with
    /// [`SecretForbidden`](InvalidReason::SecretForbidden) instead.)
    Pending,
    /// Defined with a usable credential; an [`Upserted`](crate::RegistryEvent::Upserted) was sent.
    Ready,
    /// Unusable; an [`Invalid`](crate::RegistryEvent::Invalid) was sent.
    Invalid {
        /// Why.
        reason: InvalidReason,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::CredentialKey;
    use rstest::rstest;

    #[rstest]
    #[case::ca_bundle(ValidationError::CaBundle("not PEM".into()), "SecretInvalid")]
    #[case::forbidden(ValidationError::Forbidden("loopback".into()), "EndpointForbidden")]
    fn a_client_that_cannot_be_built_is_invalid_by_the_rule_it_broke(
        #[case] source: ValidationError,
        #[case] want: &str,
    ) {
        let member = "m".into();
        let err = member_client::Error::Invalid { member, source };
        assert_eq!(InvalidReason::of_build_error(err).condition_reason(), want);
    }

    #[rstest]
    #[case(InvalidReason::SecretNotFound, "SecretNotFound")]
    #[case(InvalidReason::SecretForbidden("x".into()), "SecretForbidden")]
    #[case(InvalidReason::SecretInvalid("x".into()), "SecretInvalid")]
    #[case(InvalidReason::EndpointInvalid("x".into()), "EndpointInvalid")]
    #[case(InvalidReason::EndpointForbidden("x".into()), "EndpointForbidden")]
    #[case(InvalidReason::ProxyInvalid("x".into()), "ProxyInvalid")]
    #[case(InvalidReason::PullMode, "PullMode")]
    #[case(InvalidReason::DefinitionInvalid("x".into()), "DefinitionInvalid")]
    #[case(InvalidReason::FederationFailed("x".into()), "FederationFailed")]
    fn every_reason_has_its_condition_reason(#[case] reason: InvalidReason, #[case] want: &str) {
        assert_eq!(reason.condition_reason(), want);
        assert!(reason.to_string().starts_with(want));
    }

    #[rstest]
    #[case::endpoint(ValidationError::Endpoint("e".into()), InvalidReason::EndpointInvalid("e".into()))]
    #[case::forbidden(ValidationError::Forbidden("f".into()), InvalidReason::EndpointForbidden("f".into()))]
    #[case::proxy(ValidationError::Proxy("p".into()), InvalidReason::ProxyInvalid("p".into()))]
    #[case::sanitized(ValidationError::Endpoint("a\nb".into()), InvalidReason::EndpointInvalid("a b".into()))]
    #[case::ca_bundle(ValidationError::CaBundle("c".into()), InvalidReason::SecretInvalid("c".into()))]
    fn each_validation_rule_has_its_reason(
        #[case] err: ValidationError,
        #[case] want: InvalidReason,
    ) {
        assert_eq!(InvalidReason::from(err), want);
    }

    #[rstest]
    #[case::not_found(SourceError::NotFound { key: CredentialKey::new("ns", "s") }, "SecretNotFound")]
    #[case::missing_key(SourceError::MissingKey { key: CredentialKey::new("ns", "s"), field: "token".into() }, "SecretInvalid")]
    #[case::empty_token(SourceError::EmptyToken, "SecretInvalid")]
    #[case::unreadable(SourceError::Read { key: CredentialKey::new("", "/t"), source: std::sync::Arc::new(std::io::Error::other("EIO")) }, "SecretInvalid")]
    #[case::federation(SourceError::Federation(member_client::federated::FederationError::Refused { account: "ns/sa".into(), code: 403, message: member_client::text::Text::new("no") }), "FederationFailed")]
    fn a_source_error_is_secret_not_found_or_secret_invalid(
        #[case] err: SourceError,
        #[case] want: &str,
    ) {
        let reason = InvalidReason::from(&err);
        assert_eq!(reason.condition_reason(), want);
        assert_eq!(
            reason.detail().is_some(),
            want != "SecretNotFound",
            "the detail is the error: {reason}"
        );
    }
}
