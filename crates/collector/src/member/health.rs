//! Member health: what a member's probe says, or why it cannot be probed, and the condition
//! statuses and reasons that follow from it.

use std::collections::BTreeMap;

use cluster_registry::InvalidReason;
use member_client::{FailureKind, SourceError, response_limit::LimitExceeded};

use super::informer_state::InformerState;
use crate::reason::Reason;

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
    /// The credential is accepted but may not do what the collector needs (403): read
    /// `/readyz`, or list or watch a mirrored kind. The `String` says which.
    Forbidden(String),
    /// `/readyz` answers, but a mirrored kind cannot be listed or watched for another reason
    /// (the resource is not served, say), on two probes in a row.
    MirrorFailing(String),
    /// `/readyz` answers, and the informers have not finished their first list.
    Syncing,
    /// A refusal seen once, not yet confirmed by a second probe: an apiserver that just
    /// started answers 403 until its RBAC caches load, which is no reason to report it.
    Settling(String),
    /// The member could not be reached (connect, TLS, timeout) or answered with an error.
    Unreachable(String),
    /// The member's definition or credential is unusable; the registry says why.
    Invalid(InvalidReason),
    /// The member sent more than it may, or too slowly: a response too large, a watch line
    /// too long, a list without end, too many objects of a kind. The `String` says in answer
    /// to what (`/readyz`, `list core/v1/nodes`).
    LimitExceeded(LimitExceeded, String),
}

impl MemberHealth {
    /// Classifies a failed probe.
    pub(crate) fn from_error(err: &kube::Error) -> Self {
        // A host name that resolved to a forbidden address: EndpointForbidden, not Unreachable.
        if let Some(refusal) = member_client::validation::refusal_in(err) {
            return Self::Invalid(InvalidReason::from(refusal.clone()));
        }
        if let Some(limit) = LimitExceeded::find_in(err) {
            return Self::LimitExceeded(limit.clone(), "/readyz".to_owned());
        }
        match FailureKind::of(err) {
            FailureKind::Unauthorized => Self::Unauthorized,
            FailureKind::Forbidden => {
                Self::Forbidden(format!("may not get /readyz: {}", describe(err)))
            }
            FailureKind::CredentialUnavailable => Self::Invalid(match source_error(err) {
                Some(source) => InvalidReason::from(source),
                None => InvalidReason::SecretInvalid(describe(err)),
            }),
            FailureKind::Unreachable
            | FailureKind::NotFound
            | FailureKind::Other
            | FailureKind::LimitExceeded => Self::Unreachable(describe(err)),
        }
    }

    /// Its reason in the table of reasons.
    pub(crate) fn as_reason(&self) -> Reason {
        match self {
            Self::Unknown => Reason::Probing,
            Self::Healthy => Reason::MemberReady,
            Self::Unauthorized => Reason::Unauthorized,
            Self::Forbidden(_) => Reason::Forbidden,
            Self::MirrorFailing(_) => Reason::MirrorFailing,
            Self::Syncing => Reason::Syncing,
            Self::Settling(_) => Reason::Settling,
            Self::Unreachable(_) => Reason::Unreachable,
            Self::Invalid(reason) => Reason::from(reason),
            Self::LimitExceeded(limit, _) => Reason::from(limit),
        }
    }

    /// The reason written into both conditions (`Ready` and `CredentialsValid`).
    pub(crate) fn reason(&self) -> &'static str {
        self.as_reason().name()
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
            Self::Forbidden(what) => format!(
                "the credential is accepted but {what}; grant the member's identity that permission \
                 on the member"
            ),
            Self::MirrorFailing(what) => format!("the mirror cannot be filled: {what}"),
            Self::Syncing => "the member answers; its informers are still listing".to_owned(),
            Self::Settling(what) => {
                format!("the member just reported {what}; waiting for the next probe to confirm it")
            }
            Self::Unreachable(why) => format!("the member cannot be reached: {why}"),
            Self::Invalid(reason) => invalid_message(reason),
            Self::LimitExceeded(limit, during) => format!(
                "the member broke a limit in {during}: {limit} ({}); the collector reads no \
                 more of that answer",
                limit_flag(limit)
            ),
        }
    }

    /// The `Ready` condition's status, as the table of reasons gives it.
    pub(crate) fn ready_status(&self) -> &'static str {
        self.as_reason().doc().ready.status().unwrap_or("Unknown")
    }

    /// The `CredentialsValid` condition's status, as the table of reasons gives it: unknown
    /// when the member can't be asked, true for any answer but 401.
    pub(crate) fn credentials_valid_status(&self) -> &'static str {
        (self.as_reason().doc().credentials_valid.status()).unwrap_or("Unknown")
    }

    /// The `CredentialsValid` reason: the credential is fine when the member is healthy.
    pub(crate) fn credentials_valid_reason(&self) -> &'static str {
        match self.credentials_valid_status() {
            "True" => Reason::CredentialsAccepted.name(),
            _ => self.reason(),
        }
    }

    /// What the informers say of a member whose `/readyz` answered: the first refusal, else
    /// the first other failure, else whether they are still listing. Transport failures and
    /// credential failures are left to the probe, which sees them too.
    pub(crate) fn of_mirror(states: &BTreeMap<String, InformerState>) -> Self {
        // A broken limit first: it is what keeps the collector's memory bounded.
        let limit = states.iter().find_map(|(resource, state)| match state {
            InformerState::Failing(f) => f
                .limit
                .as_ref()
                .map(|limit| (limit.clone(), format!("{} {resource}", f.verb))),
            _ => None,
        });
        if let Some((limit, during)) = limit {
            return Self::LimitExceeded(limit, during);
        }
        let failure = |wanted: fn(FailureKind) -> bool| {
            states.iter().find_map(|(resource, state)| match state {
                InformerState::Failing(f) if wanted(f.kind) => {
                    Some(format!("may not {} {resource}: {}", f.verb, f.message))
                }
                _ => None,
            })
        };
        if let Some(what) = failure(|kind| kind == FailureKind::Forbidden) {
            return Self::Forbidden(what);
        }
        if let Some(what) =
            failure(|kind| matches!(kind, FailureKind::NotFound | FailureKind::Other))
        {
            return Self::MirrorFailing(what.replacen("may not", "cannot", 1));
        }
        // A store that was filled once stays in use while its watch reconnects.
        let in_use = |state: &InformerState| match state {
            InformerState::Synced => true,
            InformerState::Failing(failure) => failure.after_sync,
            InformerState::Syncing => false,
        };
        if !states.values().all(in_use) {
            return Self::Syncing;
        }
        Self::Healthy
    }

    /// Whether a first sighting waits for a second probe before it is reported.
    pub(crate) fn needs_confirmation(&self) -> bool {
        matches!(self, Self::Forbidden(_) | Self::MirrorFailing(_))
    }
}

/// The flag that sets `limit`, for the condition's message.
fn limit_flag(limit: &LimitExceeded) -> &'static str {
    match limit {
        LimitExceeded::ResponseTooLarge {
            request: member_client::response_limit::RequestKind::Health,
            ..
        } => "a fixed limit",
        LimitExceeded::ResponseTooLarge { .. } => "set by --member-response-limit-mib",
        LimitExceeded::WatchLineTooLong { .. } => "set by --member-watch-line-limit-mib",
        LimitExceeded::ResponseTooSlow { .. } => "set by --request-timeout or --probe-timeout",
        LimitExceeded::TooManyListPages { .. } | LimitExceeded::TooManyObjects { .. } => {
            "set by --member-max-objects"
        }
        _ => "a limit of the collector",
    }
}

fn invalid_message(reason: &InvalidReason) -> String {
    match reason {
        InvalidReason::SecretNotFound => {
            "the Secret the member references does not exist".to_owned()
        }
        InvalidReason::SecretInvalid(why) => format!("the member's Secret is unusable: {why}"),
        // The refusal says what to declare: the command, an argument's position or a name.
        InvalidReason::ExecNotAllowed(why) => {
            format!("the member's exec credential plugin may not run: {why}")
        }
        InvalidReason::ExecFailed(why) => {
            format!("the member's exec credential plugin failed: {why}")
        }
        InvalidReason::CertificateInvalid(why) => {
            format!("the member's client certificate is unusable: {why}")
        }
        InvalidReason::CertificateExpired(why) => format!(
            "the member's client certificate has expired: {why}; write a renewed one to its Secret"
        ),
        InvalidReason::ProviderNotFound(why) => format!(
            "no access provider of the member's ClusterProfile is served: {why}; add one of its \
             providers to --clusterprofile-provider-file"
        ),
        InvalidReason::FederationFailed(why) => {
            format!("the control plane minted no token for the federated member: {why}")
        }
        // The registry's sentence says which rule refused it and what to do.
        InvalidReason::SecretForbidden(why) => why.clone(),
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
/// [`Text`](member_client::text::Text)-sanitized: the member writes its error bodies.
pub(crate) fn describe(err: &kube::Error) -> String {
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
    member_client::text::Text::new(&text).into()
}

#[cfg(test)]
pub(crate) mod tests;
