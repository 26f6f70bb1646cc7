//! `kube::Client`s for member clusters whose bearer tokens never go stale.
//!
//! A control plane that manages member clusters in push mode holds, per member, a Secret with a
//! bearer token. A client that copies the token at start-up keeps sending it after the Secret is
//! rotated: fresh clients (health checks) pass while long-lived watches get 401 forever. Here the
//! token is read per request from a [`CredentialCache`] keyed by the Secret; the cache is refreshed
//! single-flight when the Secret changes ([`CredentialCache::invalidate`]), when the JWT `exp` nears,
//! or when a 401 says it is stale, and the rejected request is retried once
//! ([`credential_layer`]).
//! A credential still rejected after a refresh is reported as [`Error::Unauthorized`] and
//! [`CredentialState::Unauthorized`], never as "not found" or "unreachable" ([`FailureKind`]).
//!
//! # How data flows
//! The crate root holds the names an embedder starts from; each other public item lives in the
//! module that defines it ([`exec`], [`validation`], [`text`], ...).
//!
//! - A [`CredentialSource`] reads a [`Credential`] (token, optional CA bundle, expiry) for a
//!   [`CredentialKey`]: [`file_source::FileSource`] reads a token file; cluster-registry's Secret store is
//!   another.
//! - The [`CredentialCache`] sits over one source: single-flight loads, expiry from the JWT `exp`,
//!   [`invalidate`](CredentialCache::invalidate) when the Secret changes.
//! - [`ClientFactory`] turns a [`MemberClientConfig`] into a `kube::Client`, after checking its
//!   endpoint, proxy and CA bundle with [`validation`] (errors: [`validation::ValidationError`]
//!   inside [`Error::Invalid`]). The client's stack holds a [`credential_layer::CredentialLayer`],
//!   which takes the token
//!   from the cache per request, refreshes and retries once on a 401, and reports what the
//!   member says of the credential to a [`CredentialHealth`].
//! - A failed request or watch is classified by [`FailureKind`] ([`FailureKind::of`],
//!   [`FailureKind::of_watch`]); watches back off as [`mod@watch_backoff`] says, which a failed
//!   list (kube-runtime's `Init`) cannot reset.
//!
//! Start with [`ClientFactory`]:
//!
//! ```no_run
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! use member_client::{
//!     ClientFactory, CredentialCache, CredentialCacheConfig, CredentialHealth, MemberClientConfig,
//!     file_source::FileSource,
//! };
//!
//! let source = FileSource::new("/etc/tether/member1/token");
//! let secret = source.secret_ref();
//! let factory = ClientFactory::new(CredentialCache::new(source, CredentialCacheConfig::default()));
//! let health = CredentialHealth::new();
//! let client = factory.build(&MemberClientConfig::new("member1", "https://10.0.0.1:6443", secret), &health)?;
//! let version = client.apiserver_version().await?;
//! # Ok(()) }
//! ```

#[cfg(not(any(
    feature = "rustls-ring",
    feature = "rustls-aws-lc-rs",
    feature = "openssl-tls"
)))]
compile_error!(
    "member-client needs a TLS stack: enable one of its features rustls-ring (the default), \
     rustls-aws-lc-rs or openssl-tls"
);
#[cfg(all(feature = "client-cert", not(feature = "__rustls")))]
compile_error!(
    "member-client's client-cert feature presents certificates through rustls: enable \
     rustls-ring or rustls-aws-lc-rs with it, or leave it out with openssl-tls"
);

mod client_factory;
pub mod client_identity;
mod credential;
mod credential_cache;
pub mod credential_layer;
mod credential_state;
mod error;
pub mod exec;
mod failure_kind;
pub mod federated;
pub mod file_source;
mod guarded_resolver;
pub mod jwt_claims;
pub mod request_deadline;
pub mod response_limit;
mod source;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod text;
mod transport;
pub mod validation;
pub mod watch_backoff;

// The names an embedder starts from, and the types their signatures hand back; everything else
// is in the public module that defines it.
pub use client_factory::{ClientFactory, ClientLimits, MemberClientConfig};
pub use credential::{Credential, CredentialKind};
pub use credential_cache::{CredentialCache, CredentialCacheConfig, CredentialCacheStats};
pub use credential_state::{CredentialHealth, CredentialState, CredentialStats};
pub use error::{Error, Result};
pub use failure_kind::FailureKind;
pub use source::{CredentialKey, CredentialSource, SourceError};

// Short paths inside the crate.
pub(crate) use client_identity::{ClientIdentity, IdentityError};
pub(crate) use credential_layer::CredentialLayer;
pub(crate) use file_source::read_bounded;
pub(crate) use jwt_claims::JwtClaims;
pub(crate) use request_deadline::RequestDeadlineLayer;
pub(crate) use response_limit::{LimitExceeded, ResponseLimits};
pub(crate) use text::Text;
pub(crate) use validation::MemberEndpoint;

/// This crate's README, its example compiled as a doctest so that it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
