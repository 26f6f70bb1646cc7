//! [`PoolRecipe`]: how each of a member's connection pools is made, so that the pool for a new
//! client identity differs from the others in the identity it presents and nothing else.

use std::{fmt, sync::Arc, time::Duration};

use hyper_rustls::{FixedServerNameResolver, HttpsConnector, HttpsConnectorBuilder};
use hyper_timeout::TimeoutConnector;
use hyper_util::{
    client::legacy::{self, connect::Connection},
    rt::TokioExecutor,
};
use kube::client::{Body, ConfigExt as _, RustlsTlsError};
use rustls::{
    SignatureScheme,
    client::{ResolvesClientCert, Resumption},
    pki_types::ServerName,
    sign::CertifiedKey,
};

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

/// Everything a pool is made from: the dialler (resolver, keepalive, proxy tunnel), the TLS
/// verification of the member (roots or skip, server name) and the timeouts, all read from
/// the `kube::Config` once.
pub(crate) struct PoolRecipe<H> {
    dial: H,
    /// kube's TLS config for the member, with no client certificate.
    tls: rustls::ClientConfig,
    server_name: Option<ServerName<'static>>,
    /// Connect, read and write timeouts.
    timeouts: [Option<Duration>; 3],
}

impl<H> fmt::Debug for PoolRecipe<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolRecipe")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

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
                ServerName::try_from(name)
                    .map_err(|err| kube::Error::RustlsTls(RustlsTlsError::InvalidServerName(err)))
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
    pub(crate) fn pool(&self, identity: Option<&ClientIdentity>) -> Pool<H> {
        let mut tls = self.tls.clone();
        tls.resumption = Resumption::default();
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
        let https = https.enable_http1().wrap_connector(self.dial.clone());
        let [connect, read, write] = self.timeouts;
        let mut connector = TimeoutConnector::new(https);
        connector.set_connect_timeout(connect);
        connector.set_read_timeout(read);
        connector.set_write_timeout(write);
        legacy::Builder::new(TokioExecutor::new()).build(connector)
    }
}

/// Presents one certificate chain, whatever the member hints at: a pool has one identity.
struct Present(Arc<CertifiedKey>);

impl fmt::Debug for Present {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the signer's Debug: say nothing about the key.
        f.debug_struct("Present")
            .field("chain_len", &self.0.cert.len())
            .finish_non_exhaustive()
    }
}

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
