//! Where credentials come from.

use std::{fmt, sync::Arc};

use async_trait::async_trait;

use crate::{Credential, IdentityError, exec::ExecError, federated::FederationError};

/// Reads the current credential for a [`CredentialKey`].
///
/// member-client knows nothing of where Secrets live: cluster-registry implements this over its
/// in-memory Secret store, and [`FileSource`](crate::file_source::FileSource) reads a projected token file.
/// The [`CredentialCache`](crate::CredentialCache) calls `fetch` only on a miss, an expiry, an
/// invalidation or a 401, and never twice at once for the same key.
///
/// ```
/// use async_trait::async_trait;
/// use member_client::{Credential, CredentialSource, CredentialKey, SourceError};
///
/// struct Fixed;
///
/// #[async_trait]
/// impl CredentialSource for Fixed {
///     async fn fetch(&self, _key: &CredentialKey) -> Result<Credential, SourceError> {
///         Credential::from_token_bytes(b"token")
///     }
/// }
/// ```
#[async_trait]
pub trait CredentialSource: Send + Sync + 'static {
    /// Reads the credential now.
    ///
    /// # Errors
    /// A [`SourceError`] saying why there is no usable credential.
    async fn fetch(&self, key: &CredentialKey) -> Result<Credential, SourceError>;
}

/// Why a [`CredentialSource`] has no usable credential.
///
/// `Clone`, so that a source can keep a parse failure and hand it out again (the registry's
/// Secret store parses each Secret once, when it arrives).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The Secret (or file) does not exist. Permanent until it is created.
    #[error("{key} was not found")]
    NotFound {
        /// What was looked for.
        key: CredentialKey,
    },
    /// The Secret exists but lacks a required field. Permanent until the Secret changes.
    #[error("{key} has no {field:?} field")]
    MissingKey {
        /// The Secret.
        key: CredentialKey,
        /// The missing field, e.g. `token`.
        field: String,
    },
    /// The token is empty or only whitespace. Permanent until the Secret changes.
    #[error("the token is empty")]
    EmptyToken,
    /// The token is not UTF-8, so it cannot be an HTTP header value. Permanent until the Secret
    /// changes.
    #[error("the token is not valid UTF-8")]
    TokenNotUtf8,
    /// The token holds control characters (an inner newline, say), so it cannot be sent in an
    /// HTTP header. Permanent until the Secret changes.
    #[error("the token holds characters that cannot be sent in an HTTP header")]
    TokenNotHeaderSafe,
    /// The token is longer than [`Credential::MAX_TOKEN_BYTES`](crate::Credential::MAX_TOKEN_BYTES):
    /// no issuer writes such tokens, and each request would carry it. Permanent until the
    /// Secret changes.
    #[error("the token is longer than {max} bytes")]
    TokenTooLong {
        /// The cap.
        max: usize,
    },
    /// The Secret's content is unusable for another reason (a field that is not JSON, say).
    /// Permanent until the Secret changes.
    #[error("{key} is invalid: {reason}")]
    Invalid {
        /// The Secret.
        key: CredentialKey,
        /// What is wrong with it. Never contains the token.
        reason: String,
    },
    /// The exec plugin may not run (its command is off the allow-list) or failed (it hung,
    /// exited non-zero or printed no usable `ExecCredential`). A failure is transient: the
    /// plugin runs again on the next fetch.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The client certificate or key is unusable, or the certificate has expired. Permanent
    /// until the Secret changes.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The control plane gave no federated token ([`federated`](crate::federated)). Transient
    /// unless it refused.
    #[error(transparent)]
    Federation(#[from] FederationError),
    /// Reading failed for a reason that may pass (an I/O error, an API error). Transient.
    #[error("reading {key} failed")]
    Read {
        /// What was being read.
        key: CredentialKey,
        /// Why; in an `Arc` because I/O errors are not `Clone`.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
}

impl SourceError {
    /// Whether retrying the same read later may succeed without anyone changing the Secret.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            SourceError::Read { .. }
                | SourceError::Exec(ExecError::Failed(_))
                | SourceError::Federation(FederationError::Failed { .. })
        )
    }
}

/// Names the Kubernetes Secret (or, for file-backed credentials, the file) that holds a member
/// cluster's bearer token. It is the [`CredentialCache`](crate::CredentialCache) key.
///
/// Two members that reference the same Secret share one cache entry, so one rotation of that
/// Secret is fetched once for both.
///
/// ```
/// use member_client::CredentialKey;
/// let key = CredentialKey::new("karmada-cluster", "member1");
/// assert_eq!(key.to_string(), "karmada-cluster/member1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CredentialKey {
    /// Namespace of the Secret. Empty for sources that have no namespaces (a token file).
    pub namespace: String,
    /// Name of the Secret, or the path of a token file.
    pub name: String,
}

impl CredentialKey {
    /// A reference to the Secret `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for CredentialKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}
