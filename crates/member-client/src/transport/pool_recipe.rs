//! [`PoolRecipe`]: how each of a member's connection pools is made, so that the pool for a new
//! client identity differs from the others in the identity it presents and nothing else.

#[cfg(feature = "client-cert")]
use std::sync::Arc;
use std::{fmt, time::Duration};

#[cfg(not(feature = "__rustls"))]
use hyper_openssl::client::legacy::HttpsConnector;
#[cfg(feature = "__rustls")]
use hyper_rustls::{FixedServerNameResolver, HttpsConnector, HttpsConnectorBuilder};
use hyper_timeout::TimeoutConnector;
use hyper_util::{
    client::legacy::{self, connect::Connection},
    rt::TokioExecutor,
};
use kube::client::{Body, ConfigExt as _};
#[cfg(feature = "client-cert")]
use rustls::{SignatureScheme, client::ResolvesClientCert, sign::CertifiedKey};
#[cfg(feature = "__rustls")]
use rustls::{client::Resumption, pki_types::ServerName};

use crate::ClientIdentity;

/// A trait alias: the trait, and its impl for every type within `bounds`, from one list.
macro_rules! trait_alias {
    ($(#[$doc:meta])* $name:ident = $($bounds:tt)+) => {
        $(#[$doc])*
        pub(crate) trait $name: $($bounds)+ {}
        impl<H> $name for H where H: $($bounds)+ {}
    };
}

trait_alias! {
    /// What a pool dials through (the guarded resolver's `HttpConnector`, or a proxy tunnel over
    /// it): any connector hyper-rustls can wrap, named once.
    Dial = tower::Service<
        http::Uri,
        Response: Connection + hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
        Future: Send + 'static,
        Error: Into<tower::BoxError>,
    > + Clone
        + Send
        + Sync
        + 'static
}

/// TLS over `H`, with kube's timeouts.
pub(crate) type Connector<H> = TimeoutConnector<HttpsConnector<H>>;

/// One connection pool: hyper's pooled client over a [`Connector`].
pub(crate) type Pool<H> = legacy::Client<Connector<H>, Body>;

/// A pool over `https`, with `timeouts` (connect, read, write): kube's `ClientBuilder` stack.
fn pool_over<H: Dial>(https: HttpsConnector<H>, timeouts: [Option<Duration>; 3]) -> Pool<H> {
    let [connect, read, write] = timeouts;
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(connect);
    connector.set_read_timeout(read);
    connector.set_write_timeout(write);
    legacy::Builder::new(TokioExecutor::new()).build(connector)
}

/// Everything a pool is made from: the dialler (resolver, keepalive, proxy tunnel), the TLS
/// verification of the member (roots or skip, server name) and the timeouts, all read from
/// the `kube::Config` once.
#[cfg(feature = "__rustls")]
pub(crate) struct PoolRecipe<H> {
    dial: H,
    /// kube's TLS config for the member, with no client certificate.
    tls: rustls::ClientConfig,
    server_name: Option<ServerName<'static>>,
    /// Connect, read and write timeouts.
    timeouts: [Option<Duration>; 3],
}

#[cfg(feature = "__rustls")]
impl<H> fmt::Debug for PoolRecipe<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolRecipe")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "__rustls")]
impl<H: Dial> PoolRecipe<H> {
    /// What `config.rustls_https_connector_with_connector(dial)` and kube's timeouts would
    /// build, kept apart so that each pool gets its own copy.
    ///
    /// # Errors
    /// kube's, if its TLS config cannot be built or `tls_server_name` is not a server name.
    pub(crate) fn new(config: &kube::Config, dial: H) -> Result<Self, kube::Error> {
        let server_name = config
            .tls_server_name
            .clone()
            .map(|name| {
                ServerName::try_from(name).map_err(|err| {
                    kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(err))
                })
            })
            .transpose()?;
        Ok(Self {
            dial,
            tls: config.rustls_client_config()?,
            server_name,
            timeouts: [
                config.connect_timeout,
                config.read_timeout,
                config.write_timeout,
            ],
        })
    }

    /// A new pool whose TLS handshakes present `identity` (none if `None`) when the member asks
    /// for a client certificate.
    ///
    /// Each pool gets its own TLS session cache and its own certificate resolver. NB: a resumed
    /// TLS 1.3 session keeps, on the server's side, the client certificate of the handshake
    /// that made it, so a session must never cross identities. rustls itself resumes only
    /// under the same resolver instance (rustls 0.23 `compatible_config`); the separate cache
    /// does not lean on that, and keeps one identity's tickets from being spent by another.
    #[cfg_attr(not(feature = "client-cert"), allow(unused_variables))]
    pub(crate) fn pool(&self, identity: Option<&ClientIdentity>) -> Pool<H> {
        let mut tls = self.tls.clone();
        tls.resumption = Resumption::default();
        #[cfg(feature = "client-cert")]
        if let Some(identity) = identity {
            tls.client_auth_cert_resolver = Arc::new(Present(Arc::clone(identity.certified_key())));
        }
        // The rest is kube's `rustls_https_connector_with_connector` and `ClientBuilder` stack.
        let mut https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        if let Some(name) = &self.server_name {
            https = https.with_server_name_resolver(FixedServerNameResolver::new(name.clone()));
        }
        pool_over(
            https.enable_http1().wrap_connector(self.dial.clone()),
            self.timeouts,
        )
    }
}

/// With OpenSSL, kube's own connector, whose TLS session cache every pool shares: there is only
/// ever one pool, as client certificates (and so identities) need rustls.
#[cfg(not(feature = "__rustls"))]
pub(crate) struct PoolRecipe<H> {
    https: HttpsConnector<H>,
    /// Connect, read and write timeouts.
    timeouts: [Option<Duration>; 3],
}

#[cfg(not(feature = "__rustls"))]
impl<H> fmt::Debug for PoolRecipe<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolRecipe").finish_non_exhaustive()
    }
}

#[cfg(not(feature = "__rustls"))]
impl<H: Dial> PoolRecipe<H> {
    /// What `config.openssl_https_connector_with_connector(dial)` and kube's timeouts build.
    ///
    /// # Errors
    /// kube's, if its TLS config cannot be built.
    pub(crate) fn new(config: &kube::Config, dial: H) -> Result<Self, kube::Error> {
        Ok(Self {
            https: config.openssl_https_connector_with_connector(dial)?,
            timeouts: [
                config.connect_timeout,
                config.read_timeout,
                config.write_timeout,
            ],
        })
    }

    /// A new pool; `_identity` is always `None` here, as no certificate parses without rustls.
    pub(crate) fn pool(&self, _identity: Option<&ClientIdentity>) -> Pool<H> {
        pool_over(self.https.clone(), self.timeouts)
    }
}

/// Presents one certificate chain, whatever the member hints at: a pool has one identity.
#[cfg(feature = "client-cert")]
struct Present(Arc<CertifiedKey>);

#[cfg(feature = "client-cert")]
impl fmt::Debug for Present {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the signer's Debug: say nothing about the key.
        f.debug_struct("Present")
            .field("chain_len", &self.0.cert.len())
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "client-cert")]
impl ResolvesClientCert for Present {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}
