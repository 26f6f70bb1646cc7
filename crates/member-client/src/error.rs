//! The crate's error type.

use std::sync::Arc;

use crate::{CredentialKey, SourceError, validation::ValidationError};

/// What can go wrong building or using a member client.
///
/// Requests through a client built by [`ClientFactory`](crate::ClientFactory) fail with
/// `kube::Error::Service` wrapping one of these when the cause is the credential; use
/// [`FailureKind::of`](crate::FailureKind::of) to classify any `kube::Error`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The member answered 401 to the credential, and the credential source had nothing newer
    /// (or the member rejected the newer one too). Not retryable until the Secret changes.
    #[error(
        "member {member:?} rejected the credential from {secret} (401 Unauthorized) after a refresh"
    )]
    Unauthorized {
        /// The member cluster.
        member: String,
        /// Where its credential comes from.
        secret: CredentialKey,
    },
    /// No credential could be read for the member. Retryable when
    /// [`SourceError::is_transient`] says so, otherwise once the Secret changes.
    #[error("no usable credential for member {member:?} in {secret}")]
    CredentialUnavailable {
        /// The member cluster.
        member: String,
        /// Where its credential should come from.
        secret: CredentialKey,
        /// Why there is none; shared with every request that waited on the same load.
        #[source]
        source: Arc<SourceError>,
    },
    /// The member's API endpoint, proxy URL or CA bundle breaks its
    /// [`validation`](crate::validation) rule. Not retryable until the definition changes.
    #[error("member {member:?} cannot be reached as defined")]
    Invalid {
        /// The member cluster.
        member: String,
        /// Which rule, and what is wrong.
        #[source]
        source: ValidationError,
    },
    /// kube refused the configuration (its TLS setup, say).
    #[error("building the client for member {member:?} failed")]
    BuildClient {
        /// The member cluster.
        member: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `err`, then each of its causes in turn. An `io::Error`'s `source` skips the error it wraps,
/// and connectors and kube's watch bodies wrap errors in one: the wrapped error is the next
/// cause here.
pub(crate) fn causes<'e>(
    err: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |&cause| {
        match cause.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as _),
            None => cause.source(),
        }
    })
}
