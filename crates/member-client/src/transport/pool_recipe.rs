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
use hyper_util::client::legacy::connect::Connection;
use kube::client::ConfigExt as _;
#[cfg(feature = "client-cert")]
use rustls::{SignatureScheme, client::ResolvesClientCert, sign::CertifiedKey};
#[cfg(feature = "__rustls")]
use rustls::{client::Resumption, pki_types::ServerName};

#[cfg(feature = "__rustls")]
use super::http2_connections::Http2Connections;
use super::{http2_connections::Http2Settings, pool::Pool};
use crate::ClientIdentity;

/// How long a dial (TCP, TLS, the HTTP/2 preface) may take when kube's config sets no connect
/// timeout.
#[cfg(feature = "__rustls")]
const DIAL_DEADLINE: Duration = Duration::from_secs(30);

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

/// `https` with `timeouts` (connect, read, write): kube's `ClientBuilder` stack.
fn connector_over<H: Dial>(
    https: HttpsConnector<H>,
    timeouts: [Option<Duration>; 3],
) -> Connector<H> {
    let [connect, read, write] = timeouts;
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(connect);
    connector.set_read_timeout(read);
    connector.set_write_timeout(write);
    connector
}

/// Everything a pool is made from: the dialler (resolver, keepalive, proxy tunnel), the TLS
/// verification of the member (roots or skip, server name), the timeouts, all read from the
/// `kube::Config` once, and whether to offer HTTP/2.
#[cfg(feature = "__rustls")]
pub(crate) struct PoolRecipe<H> {
    dial: H,
    /// kube's TLS config for the member, with no client certificate.
    tls: rustls::ClientConfig,
    server_name: Option<ServerName<'static>>,
    /// Connect, read and write timeouts.
    timeouts: [Option<Duration>; 3],
    /// `None`: HTTP/1.1 only.
    http2: Option<Http2Settings>,
}

#[cfg(feature = "__rustls")]
impl<H> fmt::Debug for PoolRecipe<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolRecipe")
            .field("server_name", &self.server_name)
            .field("http2", &self.http2)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "__rustls")]
impl<H: Dial> PoolRecipe<H> {
    /// What `config.rustls_https_connector_with_connector(dial)` and kube's timeouts would
    /// build, kept apart so that each pool gets its own copy; HTTP/2 is offered when `http2`
    /// is given.
    ///
    /// # Errors
    /// kube's, if its TLS config cannot be built or `tls_server_name` is not a server name.
    pub(crate) fn new(
        config: &kube::Config,
        dial: H,
        http2: Option<Http2Settings>,
    ) -> Result<Self, kube::Error> {
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
            http2,
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
        let http2 = self.http2.map(|settings| {
            let dial_deadline = self.timeouts[0].unwrap_or(DIAL_DEADLINE);
            Http2Connections::new(self.connector(tls.clone(), true), settings, dial_deadline)
        });
        Pool::new(self.connector(tls, false), http2)
    }

    /// kube's `rustls_https_connector_with_connector` and `ClientBuilder` stack, offering `h2`
    /// first by ALPN if `h2`, else HTTP/1.1 alone.
    fn connector(&self, tls: rustls::ClientConfig, h2: bool) -> Connector<H> {
        let mut https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        if let Some(name) = &self.server_name {
            https = https.with_server_name_resolver(FixedServerNameResolver::new(name.clone()));
        }
        let https = if h2 {
            https
                .enable_all_versions()
                .wrap_connector(self.dial.clone())
        } else {
            https.enable_http1().wrap_connector(self.dial.clone())
        };
        connector_over(https, self.timeouts)
    }
}

/// With OpenSSL, kube's own connector, whose TLS session cache every pool shares: there is only
/// ever one pool, as client certificates (and so identities) need rustls. kube's OpenSSL
/// connector offers no ALPN, so this stack speaks HTTP/1.1.
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
    /// What `config.openssl_https_connector_with_connector(dial)` and kube's timeouts build;
    /// `_http2` is never offered.
    ///
    /// # Errors
    /// kube's, if its TLS config cannot be built.
    pub(crate) fn new(
        config: &kube::Config,
        dial: H,
        _http2: Option<Http2Settings>,
    ) -> Result<Self, kube::Error> {
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
        Pool::new(connector_over(self.https.clone(), self.timeouts), None)
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
