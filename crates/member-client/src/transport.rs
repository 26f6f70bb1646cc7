//! The HTTP stack under a member client: kube's own default stack, rebuilt so that its
//! connector resolves through the [`GuardedResolver`] and presents each request's client
//! certificate.
//!
//! `kube::client::ClientBuilder::try_from(Config)` hard-wires a plain `HttpConnector`, whose
//! resolver cannot be replaced; this module is that same stack (TLS from kube's config, connect
//! / read / write timeouts, base URI, retries of 429/503/504) with the one difference, plus TCP keepalive. Proxy
//! user info is refused by validation, so no proxy `Authorization` is set here.
//!
//! Where kube has one connection pool, this stack has one per client identity
//! ([`IdentityPools`]): a request whose extensions hold a [`ClientIdentity`](crate::ClientIdentity)
//! goes over connections that presented it, so a rotated certificate is used by the next
//! request without closing the connections (watches) that the old one opened.

mod identity_pools;
#[cfg(test)]
mod identity_tests;
#[cfg(test)]
mod mtls_server;
mod pool_recipe;

use hyper_util::client::legacy::connect::{HttpConnector, proxy::Tunnel};
use kube::client::{Body, ConfigExt as _, DynBody, retry::RetryPolicy};
use tower::{BoxError, ServiceBuilder, ServiceExt as _, retry::RetryLayer, util::BoxService};

/// What kube's default stack is (`kube::client::GenericService`, not exported).
pub(crate) type GenericService =
    BoxService<http::Request<Body>, http::Response<Box<DynBody>>, BoxError>;

use self::{identity_pools::IdentityPools, pool_recipe::PoolRecipe};
use crate::guarded_resolver::GuardedResolver;

/// Idle time before the first TCP keepalive probe on every connection to a member.
const TCP_KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(30);

/// kube's default service for `config`, dialling only what `resolver` lets through.
pub(crate) fn service(
    config: &kube::Config,
    resolver: GuardedResolver,
) -> Result<GenericService, kube::Error> {
    let mut connector = HttpConnector::new_with_resolver(resolver);
    connector.enforce_http(false);
    // A peer that vanished (a host gone, a dropped route) never closes the connection: an open
    // watch would wait on it for its whole idle deadline. Keepalive probes find it sooner.
    connector.set_keepalive(Some(TCP_KEEPALIVE));
    match &config.proxy_url {
        None => finish(config, connector),
        Some(proxy) if proxy.scheme_str() == Some("https") => {
            let tls_to_proxy = config.rustls_https_connector_with_connector(connector)?;
            finish(config, Tunnel::new(proxy.clone(), tls_to_proxy))
        }
        Some(proxy) => finish(config, Tunnel::new(proxy.clone(), connector)),
    }
}

fn finish<H>(config: &kube::Config, connector: H) -> Result<GenericService, kube::Error>
where
    H: tower::Service<http::Uri> + Clone + Send + Sync + 'static,
    H::Response: hyper_util::client::legacy::connect::Connection
        + hyper::rt::Read
        + hyper::rt::Write
        + Send
        + Unpin
        + 'static,
    H::Future: Send + 'static,
    H::Error: std::error::Error + Send + Sync + 'static,
{
    // kube's TLS and timeouts, one pool per client identity. Routed below the base URI and
    // retry layers, which keep a request's extensions (and so its identity) in every retry.
    let client = IdentityPools::new(PoolRecipe::new(config, connector)?);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .map_err(BoxError::from)
        .service(client);
    Ok(service
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .boxed())
}
