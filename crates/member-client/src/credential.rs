//! A member's credential: a bearer token, a client certificate, or both, with the CA bundle
//! that goes with it and when it expires.

use std::{fmt, time::SystemTime};

use bytes::Bytes;
use http::HeaderValue;
use secrecy::{ExposeSecret, SecretString};

use crate::{ClientIdentity, JwtClaims, exec::ExecOutput, source::SourceError};

/// What produced a [`Credential`]; the `kind` label of `tether_token_fetches_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CredentialKind {
    /// A bearer token stored in a Secret or a file.
    Token,
    /// An exec plugin's `ExecCredential` (a token or a client certificate).
    Exec,
    /// A client certificate and key stored in a Secret or files.
    Certificate,
    /// A token the control plane minted for the collector's own ServiceAccount, with the
    /// member's audience ([`federated`](crate::federated)).
    Federated,
}

impl CredentialKind {
    /// Every kind, in label order.
    pub const ALL: [Self; 4] = [Self::Token, Self::Exec, Self::Certificate, Self::Federated];

    /// The metric label value: `token`, `exec`, `certificate` or `federated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Token => "token",
            Self::Exec => "exec",
            Self::Certificate => "certificate",
            Self::Federated => "federated",
        }
    }
}

/// One member cluster's credential, as last read from its [`CredentialSource`](crate::CredentialSource).
///
/// A bearer token, a TLS client identity ([`ClientIdentity`]), or both. The token is a
/// [`SecretString`] and the private key is kept inside the identity: `Debug` prints neither.
///
/// ```
/// use member_client::Credential;
/// let cred = Credential::from_token_bytes(b"opaque-token\n").unwrap();
/// assert_eq!(format!("{cred:?}").contains("opaque-token"), false);
/// assert!(cred.expires_at().is_none());
/// ```
#[derive(Clone)]
pub struct Credential {
    token: Option<Token>,
    identity: Option<ClientIdentity>,
    kind: CredentialKind,
    ca_bundle: Option<Bytes>,
    expires_at: Option<SystemTime>,
    generation: u64,
}

#[derive(Clone)]
struct Token {
    secret: SecretString,
    /// `Bearer <token>`, built once so requests only clone it; marked sensitive.
    authorization: HeaderValue,
}

impl Credential {
    /// The longest token accepted from any source, in bytes (16 KiB; service-account JWTs are
    /// around 1 KiB).
    pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

    /// Parses a token as it is stored in a Secret or a file.
    ///
    /// Surrounding whitespace (a trailing newline from `echo` or `kubectl create secret
    /// --from-file`) is trimmed. If the token is a JWT, its `exp` claim becomes
    /// [`expires_at`](Self::expires_at); the signature is not checked, because only the member's
    /// apiserver can judge it. A token that is not a JWT, or whose payload does not parse, is
    /// treated as opaque and has no expiry.
    ///
    /// # Errors
    /// [`SourceError::TokenTooLong`], [`SourceError::TokenNotUtf8`],
    /// [`SourceError::EmptyToken`] and [`SourceError::TokenNotHeaderSafe`].
    pub fn from_token_bytes(raw: &[u8]) -> Result<Self, SourceError> {
        if raw.len() > Self::MAX_TOKEN_BYTES {
            return Err(SourceError::TokenTooLong {
                max: Self::MAX_TOKEN_BYTES,
            });
        }
        let text = std::str::from_utf8(raw).map_err(|_| SourceError::TokenNotUtf8)?;
        let token = text.trim();
        if token.is_empty() {
            return Err(SourceError::EmptyToken);
        }
        let mut authorization = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| SourceError::TokenNotHeaderSafe)?;
        authorization.set_sensitive(true);
        Ok(Self {
            token: Some(Token {
                authorization,
                secret: SecretString::from(token),
            }),
            identity: None,
            kind: CredentialKind::Token,
            expires_at: JwtClaims::of(token).and_then(|claims| claims.exp),
            ca_bundle: None,
            generation: 0,
        })
    }

    /// A client-certificate credential; it expires at the certificate's `notAfter`.
    pub fn from_identity(identity: ClientIdentity) -> Self {
        Self {
            token: None,
            expires_at: Some(identity.not_after()),
            identity: Some(identity),
            kind: CredentialKind::Certificate,
            ca_bundle: None,
            generation: 0,
        }
    }

    /// The credential an exec plugin printed: its token and/or client certificate, expiring at
    /// its `expirationTimestamp` when it gave one (else at the JWT `exp` or `notAfter`).
    ///
    /// # Errors
    /// The token's errors ([`from_token_bytes`](Self::from_token_bytes)) and the
    /// certificate's ([`SourceError::Identity`]); [`SourceError::EmptyToken`] when it printed
    /// neither.
    pub fn from_exec(output: &ExecOutput) -> Result<Self, SourceError> {
        let identity = match (&output.client_certificate_pem, &output.client_key_pem) {
            (Some(cert), Some(key)) => Some(ClientIdentity::from_pem(
                cert.as_bytes(),
                key.expose_secret().as_bytes(),
            )?),
            _ => None,
        };
        let token = output.token.as_ref().map(|t| t.expose_secret().as_bytes());
        let credential = Self::from_parts(token, identity)?.ok_or(SourceError::EmptyToken)?;
        Ok(credential.produced_by(CredentialKind::Exec, output.expires_at))
    }

    /// The credential of a token and/or a client certificate, as a kubeconfig user or an
    /// `ExecCredential` may carry both; `None` when there is neither.
    ///
    /// # Errors
    /// The token's errors ([`from_token_bytes`](Self::from_token_bytes)).
    pub fn from_parts(
        token: Option<&[u8]>,
        identity: Option<ClientIdentity>,
    ) -> Result<Option<Self>, SourceError> {
        Ok(match (token, identity) {
            (Some(token), identity) => {
                let credential = Self::from_token_bytes(token)?;
                Some(match identity {
                    Some(identity) => credential.with_identity(identity),
                    None => credential,
                })
            }
            (None, identity) => identity.map(Self::from_identity),
        })
    }

    /// Adds a client certificate to a token credential (a kubeconfig user may carry both);
    /// the credential then expires at whichever comes first.
    #[must_use]
    pub fn with_identity(mut self, identity: ClientIdentity) -> Self {
        let not_after = identity.not_after();
        self.expires_at = Some(self.expires_at.map_or(not_after, |at| at.min(not_after)));
        self.identity = Some(identity);
        self
    }

    /// Attaches the PEM CA bundle that verifies the member's serving certificate.
    #[must_use]
    pub fn with_ca_bundle(mut self, pem: impl Into<Bytes>) -> Self {
        self.ca_bundle = Some(pem.into());
        self
    }

    /// Says what produced it, and when it expires if the producer said so (an exec plugin's
    /// `expirationTimestamp` wins over what the token or certificate says).
    #[must_use]
    pub(crate) fn produced_by(
        mut self,
        kind: CredentialKind,
        expires_at: Option<SystemTime>,
    ) -> Self {
        self.kind = kind;
        if expires_at.is_some() {
            self.expires_at = expires_at;
        }
        self
    }

    pub(crate) fn with_generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }

    /// The bearer token, if the credential has one.
    pub fn token(&self) -> Option<&SecretString> {
        self.token.as_ref().map(|t| &t.secret)
    }

    /// The TLS client identity, if the credential has one.
    pub fn identity(&self) -> Option<&ClientIdentity> {
        self.identity.as_ref()
    }

    /// What produced it.
    pub fn kind(&self) -> CredentialKind {
        self.kind
    }

    /// The `Authorization` header value, marked sensitive; `None` for a certificate alone.
    pub(crate) fn authorization(&self) -> Option<&HeaderValue> {
        self.token.as_ref().map(|t| &t.authorization)
    }

    /// The PEM CA bundle, if the source holds one.
    pub fn ca_bundle(&self) -> Option<&Bytes> {
        self.ca_bundle.as_ref()
    }

    /// When it expires: the JWT `exp`, the exec plugin's `expirationTimestamp`, or the
    /// certificate's `notAfter`, whichever applies and comes first; `None` for opaque tokens.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at
    }

    /// Which load of the [`CredentialCache`](crate::CredentialCache) produced this value. Every load gets
    /// a new, larger number, so two values with the same generation are the same load.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether both authenticate the same way: the same token and the same client certificate
    /// (whatever their generations).
    pub fn same_material(&self, other: &Credential) -> bool {
        let same_token = match (self.token(), other.token()) {
            (Some(a), Some(b)) => a.expose_secret() == b.expose_secret(),
            (None, None) => true,
            _ => false,
        };
        let same_identity = match (&self.identity, &other.identity) {
            (Some(a), Some(b)) => a.same_as(b),
            (None, None) => true,
            _ => false,
        };
        same_token && same_identity
    }
}

/// Equal when [`same_material`](Credential::same_material), with the same CA bundle and
/// expiry: what a Secret change compares.
impl PartialEq for Credential {
    fn eq(&self, other: &Self) -> bool {
        self.same_material(other)
            && self.ca_bundle == other.ca_bundle
            && self.expires_at == other.expires_at
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("kind", &self.kind)
            .field("token", &self.token.as_ref().map(|_| "[REDACTED]"))
            .field("identity", &self.identity)
            .field("ca_bundle", &self.ca_bundle.as_ref().map(|ca| ca.len()))
            .field("expires_at", &self.expires_at)
            .field("generation", &self.generation)
            .finish()
    }
}

#[cfg(test)]
mod tests;
