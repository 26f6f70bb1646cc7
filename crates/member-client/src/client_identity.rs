//! [`ClientIdentity`]: a TLS client certificate chain and its private key, checked and parsed
//! once, for members that authenticate with a certificate instead of (or besides) a token.
//!
//! Cluster API kubeconfigs, Argo CD's `certData`/`keyData` and exec plugins returning
//! `clientCertificateData` all hand over a PEM chain and a PEM key. They rotate: the transport
//! presents whatever identity a request carries (see the crate docs), so a new identity is used
//! by the next connection without rebuilding the `kube::Client`.
//!
//! ```
//! use member_client::{client_identity::ClientIdentity, client_identity::IdentityError};
//!
//! let err = ClientIdentity::from_pem(b"not a certificate", b"").unwrap_err();
//! assert!(matches!(err, IdentityError::Invalid(_)));
//! assert_eq!(err.condition_reason(), "CertificateInvalid");
//! ```

#[cfg(feature = "client-cert")]
use std::time::Duration;
use std::{fmt, sync::Arc, time::SystemTime};

#[cfg(feature = "client-cert")]
use rustls::{InconsistentKeys, sign::CertifiedKey};
#[cfg(feature = "client-cert")]
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
#[cfg(feature = "client-cert")]
use x509_parser::{certificate::X509Certificate, prelude::FromDer as _, time::ASN1Time};

use crate::Text;

mod pem;

/// A client certificate chain (leaf first) and the private key of its leaf.
///
/// Parsed once by [`from_pem`](Self::from_pem): the key is loaded into a signer and checked
/// against the leaf, and the leaf's validity and subject are read. Cloning shares all of it
/// (one `Arc`).
///
/// The key is never printed: `Debug` shows the subject, `notAfter` and the chain's length. Its
/// DER is kept (for [`same_as`](Self::same_as)) in a holder that zeroes it on drop.
///
/// ```
/// # fn pem() -> (String, String) {
/// #     let key = rcgen::KeyPair::generate().unwrap();
/// #     let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
/// #     params.distinguished_name.push(rcgen::DnType::CommonName, "system:admin");
/// #     (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
/// # }
/// use member_client::client_identity::ClientIdentity;
/// let (cert_pem, key_pem) = pem();
/// let identity = ClientIdentity::from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).unwrap();
/// assert_eq!(identity.subject(), "system:admin");
/// assert!(identity.check_current(std::time::SystemTime::now()).is_ok());
/// assert!(!format!("{identity:?}").contains("PRIVATE"));
/// ```
#[derive(Clone)]
pub struct ClientIdentity {
    inner: Arc<Inner>,
}

// Never built without the `client-cert` feature: `from_pem` refuses every certificate.
#[cfg_attr(not(feature = "client-cert"), allow(dead_code))]
struct Inner {
    /// The chain, leaf first.
    chain: Vec<CertificateDer<'static>>,
    /// The chain with its signer: what a handshake presents.
    #[cfg(feature = "client-cert")]
    certified: Arc<CertifiedKey>,
    /// The key as given, to compare identities; `PrivateKeyDer` zeroes itself on drop.
    key: PrivateKeyDer<'static>,
    /// The PEM label of the key's encoding, to write it back as it was given.
    key_label: &'static str,
    subject: Text,
    not_before: SystemTime,
    not_after: SystemTime,
}

impl ClientIdentity {
    /// The largest PEM certificate chain accepted, in bytes (1 MiB).
    pub const MAX_CHAIN_BYTES: usize = 1024 * 1024;
    /// The largest PEM private key accepted, in bytes (64 KiB).
    pub const MAX_KEY_BYTES: usize = 64 * 1024;

    /// Parses a PEM certificate chain (leaf first; blocks that are not `CERTIFICATE` are
    /// skipped) and the leaf's PEM private key (PKCS#8, PKCS#1 or SEC1; the first key block is
    /// used).
    ///
    /// Expiry is not judged here: a certificate that has expired still parses, and
    /// [`check_current`](Self::check_current) says so.
    ///
    /// # Errors
    /// [`IdentityError::Invalid`], saying what is wrong (too large, not PEM, no certificate,
    /// no key, an unsupported key, a certificate that does not parse, a key that does not
    /// match the leaf) in words that never quote the key.
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, IdentityError> {
        #[cfg(not(feature = "client-cert"))]
        {
            let _ = (cert_chain_pem, key_pem);
            Err(IdentityError::Invalid(Text::new(
                "client certificates are not supported by this build of member-client (its \
                 `client-cert` feature)",
            )))
        }
        #[cfg(feature = "client-cert")]
        Self::parse(cert_chain_pem, key_pem)
    }

    #[cfg(feature = "client-cert")]
    fn parse(cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, IdentityError> {
        let invalid = |why: &str| IdentityError::Invalid(Text::new(why));
        if cert_chain_pem.len() > Self::MAX_CHAIN_BYTES {
            return Err(invalid(&format!(
                "the certificate chain is larger than {} bytes",
                Self::MAX_CHAIN_BYTES
            )));
        }
        if key_pem.len() > Self::MAX_KEY_BYTES {
            return Err(invalid(&format!(
                "the private key is larger than {} bytes",
                Self::MAX_KEY_BYTES
            )));
        }
        let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| invalid(&format!("the certificate chain is not PEM ({err})")))?;
        let Some(leaf) = chain.first() else {
            return Err(invalid("no CERTIFICATE block in the chain"));
        };
        let (not_before, not_after, subject) = read_leaf(leaf).map_err(|why| invalid(&why))?;
        for (at, cert) in chain.iter().enumerate().skip(1) {
            X509Certificate::from_der(cert)
                .map_err(|_| invalid(&format!("certificate {at} of the chain is not X.509")))?;
        }

        // NB: pem errors can quote a line of their input; for the key, say nothing of it.
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|err| match err {
            rustls_pki_types::pem::Error::NoItemsFound => invalid(
                "no private key block (PKCS#8 PRIVATE KEY, PKCS#1 RSA PRIVATE KEY or SEC1 EC \
                 PRIVATE KEY)",
            ),
            _ => invalid("the private key is not PEM"),
        })?;
        let key_label = pem::key_label(&key)
            .ok_or_else(|| invalid("a private key encoding that has no PEM label"))?;
        let signer = crypto_provider()
            .key_provider
            .load_private_key(key.clone_key())
            .map_err(|err| invalid(&format!("unsupported private key ({err})")))?;
        let certified = CertifiedKey::new(chain.clone(), signer);
        certified.keys_match().map_err(|err| match err {
            rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch) => {
                invalid("the private key does not match the leaf certificate")
            }
            err => invalid(&format!(
                "the private key cannot be checked against the leaf certificate ({err})"
            )),
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                chain,
                certified: Arc::new(certified),
                key,
                key_label,
                subject,
                not_before,
                not_after,
            }),
        })
    }

    /// The leaf's `notBefore`.
    pub fn not_before(&self) -> SystemTime {
        self.inner.not_before
    }

    /// The leaf's `notAfter`: when the member stops accepting this identity.
    pub fn not_after(&self) -> SystemTime {
        self.inner.not_after
    }

    /// The leaf's subject common name (sanitized; the whole subject if it has no CN), for
    /// messages.
    pub fn subject(&self) -> &str {
        self.inner.subject.as_str()
    }

    /// The certificate chain as PEM, leaf first: what an `ExecCredential`'s
    /// `clientCertificateData` holds.
    pub fn certificate_chain_pem(&self) -> String {
        pem::chain(self.inner.chain.iter().map(|cert| cert.as_ref()))
    }

    /// The private key as PEM, in the encoding it was given in (PKCS#8, PKCS#1 or SEC1): what
    /// an `ExecCredential`'s `clientKeyData` holds. Only in a [`SecretString`], so that it is
    /// zeroed on drop and never printed by accident.
    ///
    /// [`SecretString`]: secrecy::SecretString
    pub fn private_key_pem(&self) -> secrecy::SecretString {
        pem::key(self.inner.key_label, self.inner.key.secret_der())
    }

    /// Whether both hold the same certificate chain and the same key, however they were
    /// loaded.
    pub fn same_as(&self, other: &ClientIdentity) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.chain == other.inner.chain
                && self.inner.key.secret_der() == other.inner.key.secret_der())
    }

    /// Whether the leaf is still valid at `now`.
    ///
    /// Only `notAfter` is judged: a `notBefore` a little ahead of this clock is the member's
    /// clock to judge (issuers backdate a little for that reason).
    ///
    /// # Errors
    /// [`IdentityError::Expired`] once `notAfter` has passed.
    pub fn check_current(&self, now: SystemTime) -> Result<(), IdentityError> {
        if now > self.inner.not_after {
            return Err(IdentityError::Expired {
                not_after: self.inner.not_after,
            });
        }
        Ok(())
    }

    /// The chain and its signer, as a TLS handshake presents them.
    #[cfg(feature = "client-cert")]
    pub(crate) fn certified_key(&self) -> &Arc<CertifiedKey> {
        &self.inner.certified
    }
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("subject", &self.subject())
            .field(
                "not_after",
                &format_args!("{}", Timestamp(self.inner.not_after)),
            )
            .field("chain_len", &self.inner.chain.len())
            .finish_non_exhaustive()
    }
}

/// `notBefore`, `notAfter` and the subject of the leaf.
/// The rustls crypto backend the `rustls-*` feature picked; ring when both are on.
#[cfg(feature = "client-cert")]
fn crypto_provider() -> rustls::crypto::CryptoProvider {
    #[cfg(feature = "rustls-ring")]
    return rustls::crypto::ring::default_provider();
    #[cfg(not(feature = "rustls-ring"))]
    return rustls::crypto::aws_lc_rs::default_provider();
}

#[cfg(feature = "client-cert")]
fn read_leaf(leaf: &CertificateDer<'_>) -> Result<(SystemTime, SystemTime, Text), String> {
    let (_, cert) = X509Certificate::from_der(leaf)
        .map_err(|_| "the leaf certificate is not X.509".to_owned())?;
    let validity = cert.validity();
    let subject = cert.subject();
    let common_name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok());
    let subject = common_name.map_or_else(|| Text::new(&subject.to_string()), Text::new);
    Ok((
        system_time(&validity.not_before),
        system_time(&validity.not_after),
        subject,
    ))
}

#[cfg(feature = "client-cert")]
fn system_time(time: &ASN1Time) -> SystemTime {
    let secs = time.timestamp();
    let offset = Duration::from_secs(secs.unsigned_abs());
    let at = if secs >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(offset)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(offset)
    };
    at.unwrap_or(SystemTime::UNIX_EPOCH)
}

/// A `SystemTime` shown as a UTC date, for messages.
struct Timestamp(SystemTime);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = match self.0.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_secs()).map_or(i64::MIN, |s| -s),
        };
        #[cfg(feature = "client-cert")]
        if let Ok(time) = ASN1Time::from_timestamp(secs) {
            return write!(f, "{time}");
        }
        write!(f, "{secs} s after the epoch")
    }
}

/// A client certificate that cannot be used.
///
/// Neither is retryable with the same input: a new certificate (a changed Secret, a new exec
/// plugin answer) is needed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The chain or key is unusable; the text says what (too large, not PEM, no certificate,
    /// no key, an unsupported key, a key that does not match the certificate). It never
    /// quotes the key.
    #[error("invalid client certificate: {0}")]
    Invalid(Text),
    /// The leaf certificate's `notAfter` has passed.
    #[error("client certificate expired at {}", Timestamp(*not_after))]
    Expired {
        /// The leaf's `notAfter`.
        not_after: SystemTime,
    },
}

impl IdentityError {
    /// The reason a member's condition gives: `CertificateInvalid` or `CertificateExpired`.
    pub fn condition_reason(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "CertificateInvalid",
            Self::Expired { .. } => "CertificateExpired",
        }
    }
}

#[cfg(test)]
mod tests;
