//! Telling an auth failure from everything that merely looks like one.

use std::error::Error as StdError;

use kube::runtime::watcher;

use crate::Error;

/// What a failed request to a member means, for conditions and metrics.
///
/// A 401 is never folded into "not found" or "unreachable", and a 403 or 404 is never called an
/// auth failure: each is reported as what it is.
///
/// ```
/// use member_client::FailureKind;
/// let status = kube::core::Status::failure("nope", "Forbidden").with_code(403);
/// let err = kube::Error::Api(Box::new(status));
/// assert_eq!(FailureKind::of(&err), FailureKind::Forbidden);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The member rejected the credential (401), also after a refresh.
    Unauthorized,
    /// The credential is accepted but lacks permission (403).
    Forbidden,
    /// The object or resource does not exist (404).
    NotFound,
    /// No usable credential could be read (Secret missing, token empty, …).
    CredentialUnavailable,
    /// The member could not be reached: connect, TLS or timeout errors.
    Unreachable,
    /// The member sent more than it may, or too slowly ([`LimitExceeded`](crate::LimitExceeded)):
    /// a response too large, a watch line too long, a list without end.
    LimitExceeded,
    /// Anything else (another status code, a response that does not decode, …).
    Other,
}

impl FailureKind {
    /// Classifies an error returned by a `kube::Client`.
    pub fn of(err: &kube::Error) -> Self {
        if crate::LimitExceeded::find_in(err).is_some() {
            return Self::LimitExceeded;
        }
        match err {
            kube::Error::Api(status) => Self::of_status_code(status.code),
            kube::Error::Service(inner) => Self::of_service_error(inner.as_ref()),
            kube::Error::HyperError(_) => Self::Unreachable,
            _ => Self::Other,
        }
    }

    /// Classifies an HTTP status code of a failed response.
    pub fn of_status_code(code: u16) -> Self {
        match code {
            401 => Self::Unauthorized,
            403 => Self::Forbidden,
            404 => Self::NotFound,
            _ => Self::Other,
        }
    }

    /// Classifies a watcher error: a 401 inside it is an auth failure, whatever the stage
    /// (list, watch start, watch) it happened in.
    pub fn of_watch(err: &watcher::Error) -> Self {
        match err {
            watcher::Error::InitialListFailed(err)
            | watcher::Error::WatchStartFailed(err)
            | watcher::Error::WatchFailed(err) => Self::of(err),
            watcher::Error::WatchError(status) => Self::of_status_code(status.code),
            watcher::Error::NoResourceVersion => Self::Other,
        }
    }

    fn of_service_error(err: &(dyn StdError + Send + Sync + 'static)) -> Self {
        if let Some(ours) = err.downcast_ref::<Error>() {
            return match ours {
                Error::Unauthorized { .. } => Self::Unauthorized,
                Error::CredentialUnavailable { .. } => Self::CredentialUnavailable,
                _ => Self::Other,
            };
        }
        if let Some(kube_err) = err.downcast_ref::<kube::Error>() {
            return Self::of(kube_err);
        }
        // What is left below kube's stack is the connector: DNS, TCP, TLS, timeouts.
        Self::Unreachable
    }
}

/// What the apiserver said when it refused (403) a watch's list, if that is what `err` is.
///
/// Only the list counts: it is what a missing RBAC rule fails first, and a watch that has
/// listed once keeps what it listed through later errors.
pub fn list_forbidden(err: &watcher::Error) -> Option<&str> {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 403 => {
            Some(&status.message)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CredentialKey, SourceError};
    use rstest::rstest;
    use std::sync::Arc;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure(&format!("status {code}"), "y").with_code(code),
        ))
    }

    fn rejected() -> kube::Error {
        kube::Error::Service(Box::new(Error::Unauthorized {
            member: "m".into(),
            secret: CredentialKey::new("ns", "s"),
        }))
    }

    #[rstest]
    #[case::status_401(api(401), FailureKind::Unauthorized)]
    #[case::status_403(api(403), FailureKind::Forbidden)]
    #[case::status_404(api(404), FailureKind::NotFound)]
    #[case::status_500(api(500), FailureKind::Other)]
    #[case::rejected_after_refresh(rejected(), FailureKind::Unauthorized)]
    #[case::secret_missing(
        kube::Error::Service(Box::new(Error::CredentialUnavailable {
            member: "m".into(),
            secret: CredentialKey::new("ns", "s"),
            source: Arc::new(SourceError::NotFound { key: CredentialKey::new("ns", "s") }),
        })),
        FailureKind::CredentialUnavailable
    )]
    #[case::connection_refused(
        kube::Error::Service(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        ))),
        FailureKind::Unreachable
    )]
    #[case::response_too_large(
        kube::Error::Service(Box::new(crate::LimitExceeded::ResponseTooLarge {
            request: crate::response_limit::RequestKind::Health,
            limit: 1,
        })),
        FailureKind::LimitExceeded
    )]
    #[case::watch_line_too_long(
        kube::Error::ReadEvents(std::io::Error::other(kube::Error::Service(Box::new(
            crate::LimitExceeded::WatchLineTooLong { limit: 1 },
        )))),
        FailureKind::LimitExceeded
    )]
    #[case::decode_error(
        kube::Error::SerdeError(serde_json::from_str::<u8>("x").unwrap_err()),
        FailureKind::Other
    )]
    fn classifies_each_failure_as_what_it_is(#[case] err: kube::Error, #[case] want: FailureKind) {
        assert_eq!(FailureKind::of(&err), want);
    }

    #[rstest]
    #[case::list(
        watcher::Error::InitialListFailed(rejected()),
        FailureKind::Unauthorized
    )]
    #[case::watch_start(
        watcher::Error::WatchStartFailed(rejected()),
        FailureKind::Unauthorized
    )]
    #[case::watch(watcher::Error::WatchFailed(rejected()), FailureKind::Unauthorized)]
    #[case::watch_event(
        watcher::Error::WatchError(Box::new(kube::core::Status::failure("x", "Unauthorized").with_code(401))),
        FailureKind::Unauthorized
    )]
    #[case::expired(
        watcher::Error::WatchError(Box::new(kube::core::Status::failure("x", "Expired").with_code(410))),
        FailureKind::Other
    )]
    #[case::list_forbidden(watcher::Error::InitialListFailed(api(403)), FailureKind::Forbidden)]
    #[case::no_resource_version(watcher::Error::NoResourceVersion, FailureKind::Other)]
    fn a_401_in_any_watch_stage_is_an_auth_failure(
        #[case] err: watcher::Error,
        #[case] want: FailureKind,
    ) {
        assert_eq!(FailureKind::of_watch(&err), want, "{err}");
    }

    #[test]
    fn only_a_refused_list_is_list_forbidden() {
        let forbidden = watcher::Error::InitialListFailed(api(403));
        assert_eq!(list_forbidden(&forbidden), Some("status 403"));
        for other in [
            watcher::Error::InitialListFailed(api(500)),
            watcher::Error::InitialListFailed(api(401)),
            watcher::Error::WatchStartFailed(api(403)),
            watcher::Error::NoResourceVersion,
        ] {
            assert_eq!(list_forbidden(&other), None, "{other}");
        }
    }
}
