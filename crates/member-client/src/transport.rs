//! The HTTP stack under a member client: kube's own default stack, rebuilt so that its
//! connector resolves through the [`GuardedResolver`] and presents each request's client
//! certificate, and so that it speaks HTTP/2.
//!
//! `kube::client::ClientBuilder::try_from(Config)` hard-wires a plain `HttpConnector`, whose
//! resolver cannot be replaced; this module is that same stack (TLS from kube's config, connect
//! / read / write timeouts, base URI, impersonation and extra headers, a `tracing` span per
//! request) with that difference, plus TCP keepalive. kube's retries of 429/503/504 are the
//! [`CredentialLayer`](crate::CredentialLayer)'s, which keeps a copy of every request for its
//! 401 retry anyway: one copy serves both. Proxy user info
//! is refused by validation, so no proxy `Authorization` is set here.
//!
//! Where kube has one connection pool, this stack has one per client identity
//! ([`IdentityPools`]): a request whose extensions hold a [`ClientIdentity`](crate::ClientIdentity)
//! goes over connections that presented it, so a rotated certificate is used by the next
//! request without closing the connections (watches) that the old one opened.
//!
//! Where kube speaks HTTP/1.1, a connection per request in flight, each pool here offers `h2`
//! by ALPN and multiplexes every watch, probe and request of the member over one connection
//! while the member's stream limit allows (`transport::pool`); a member that does not offer
//! `h2` gets kube's HTTP/1.1.

mod http2_connections;
#[cfg(test)]
mod http2_tests;
mod identity_pools;
#[cfg(test)]
mod identity_tests;
#[cfg(test)]
mod mtls_server;
mod pool;
mod pool_recipe;
mod request_span;

use hyper_util::client::legacy::connect::{HttpConnector, proxy::Tunnel};
use kube::client::{Body, ConfigExt as _, DynBody};
use tower::{BoxError, ServiceBuilder, ServiceExt as _, util::BoxCloneService};

/// kube's default stack (`kube::client::GenericService`, not exported), but cloneable: every
/// layer of it is, so the bearer layer's retry after a 401 calls a clone of it, and no request
/// waits for another to be sent, as a shared handle behind a lock would make it.
pub(crate) type GenericService =
    BoxCloneService<http::Request<Body>, http::Response<Box<DynBody>>, BoxError>;

pub(crate) use self::http2_connections::Http2Settings;
use self::{
    identity_pools::IdentityPools,
    pool_recipe::{Dial, PoolRecipe},
};
use crate::{
    guarded_resolver::GuardedResolver,
    response_limit::{ResponseLimit, ResponseLimits},
};

/// Idle time before the first TCP keepalive probe on every connection to a member.
const TCP_KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(30);

/// kube's default service for `config`, dialling only what `resolver` lets through, every
/// response held to `limits`, offering HTTP/2 when `http2` is given.
pub(crate) fn service(
    config: &kube::Config,
    resolver: GuardedResolver,
    limits: ResponseLimits,
    http2: Option<Http2Settings>,
) -> Result<GenericService, kube::Error> {
    let mut connector = HttpConnector::new_with_resolver(resolver);
    connector.enforce_http(false);
    // A peer that vanished (a host gone, a dropped route) never closes the connection: an open
    // watch would wait on it for its whole idle deadline. Keepalive probes find it sooner.
    connector.set_keepalive(Some(TCP_KEEPALIVE));
    match &config.proxy_url {
        None => finish(config, connector, limits, http2),
        Some(proxy) if proxy.scheme_str() == Some("https") => {
            #[cfg(feature = "__rustls")]
            let tls_to_proxy = config.rustls_https_connector_with_connector(connector)?;
            #[cfg(not(feature = "__rustls"))]
            let tls_to_proxy = config.openssl_https_connector_with_connector(connector)?;
            finish(
                config,
                Tunnel::new(proxy.clone(), tls_to_proxy),
                limits,
                http2,
            )
        }
        Some(proxy) => finish(config, Tunnel::new(proxy.clone(), connector), limits, http2),
    }
}

fn finish(
    config: &kube::Config,
    connector: impl Dial,
    limits: ResponseLimits,
    http2: Option<Http2Settings>,
) -> Result<GenericService, kube::Error> {
    // kube's TLS and timeouts, one pool per client identity. Routed below the base URI and
    // retry layers, which keep a request's extensions (and so its identity) in every retry.
    let client = IdentityPools::new(PoolRecipe::new(config, connector, http2)?);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .map_err(BoxError::from)
        .layer(tower::layer::layer_fn(move |inner| {
            ResponseLimit::new(inner, limits)
        }))
        .layer(config.extra_headers_layer()?)
        .layer(request_span::layer())
        .service(client);
    Ok(service
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .boxed_clone())
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use crate::{
        CredentialCacheConfig, CredentialKey, MemberClientConfig,
        test_util::{FakeSource, LogBuffer, TestMember},
    };

    /// A member client for the loopback port `port`, configured by `edit`.
    fn client(port: u16, edit: impl FnOnce(&mut MemberClientConfig)) -> kube::Client {
        let secret = CredentialKey::new("ns", "m1");
        let mut config = MemberClientConfig::new("m1", format!("http://127.0.0.1:{port}"), secret);
        edit(&mut config);
        let source = Arc::new(FakeSource::token("t0ken"));
        TestMember::build(&source, config, CredentialCacheConfig::default()).client
    }

    /// The head of the first request sent to a loopback port, answered `200 {}`.
    async fn first_request_head(send: impl FnOnce(u16) -> kube::Client) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = send(listener.local_addr().unwrap().port());
        let request = tokio::spawn(async move {
            client
                .request_text(http::Request::get("/version").body(Vec::new()).unwrap())
                .await
        });
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(stream.read_u8().await.unwrap());
        }
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        stream.write_all(answer).await.unwrap();
        assert_eq!(request.await.unwrap().unwrap(), "{}");
        String::from_utf8(head).unwrap().to_ascii_lowercase()
    }

    /// What a kubeconfig's `as`/`as-groups` put on the wire, through kube's extra-headers layer.
    #[tokio::test]
    async fn impersonation_headers_reach_the_member() {
        let head = first_request_head(|port| {
            client(port, |config| {
                config.impersonate = Some("alice".to_owned());
                config.impersonate_groups = vec!["ops".to_owned(), "dev".to_owned()];
            })
        })
        .await;
        for line in [
            "impersonate-user: alice",
            "impersonate-group: ops",
            "impersonate-group: dev",
            "authorization: bearer t0ken",
        ] {
            let header = format!("\r\n{line}\r\n");
            assert!(head.contains(&header), "no {line:?} in {head}");
        }
    }

    /// kube's `HTTP` span, with its method, URL and status, around every request.
    ///
    /// NB: the process's global subscriber, not a thread's: with thread-local ones, a test on
    /// another thread that meets a callsite first can leave it disabled for this one.
    #[tokio::test]
    async fn every_request_has_kubes_request_span() {
        let logs = LogBuffer::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("member_client::transport::request_span=debug")
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        let mut url = String::new();
        first_request_head(|port| {
            url = format!("http://127.0.0.1:{port}/version");
            client(port, |_| ())
        })
        .await;
        let logs = logs.text();
        let close = logs
            .lines()
            .find(|line| line.contains(&url) && line.contains("close"))
            .unwrap_or_else(|| panic!("no request span for {url} closed in {logs}"));
        let fields = [
            "HTTP{",
            "http.method=GET",
            "http.status_code=200",
            "otel.kind=\"client\"",
        ];
        let missing: Vec<_> = fields.iter().filter(|f| !close.contains(*f)).collect();
        assert!(missing.is_empty(), "no {missing:?} in {close}");
    }

    /// The kernel's timer on the connection from a client port to `server_port`, from
    /// `/proc/net/tcp` (`tr`: 0 none, 1 retransmit, 2 keepalive): the keepalive timer if it
    /// shows within 2 s, else the last timer seen.
    async fn client_socket_timer(server_port: u16) -> Option<u8> {
        let wanted = format!("{server_port:04X}");
        let mut seen = None;
        for _ in 0..100 {
            let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
            let timer = table.lines().skip(1).find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (remote, state, timer) = (fields.get(2)?, fields.get(3)?, fields.get(5)?);
                let established = *state == "01";
                (established && remote.rsplit(':').next() == Some(wanted.as_str()))
                    .then(|| u8::from_str_radix(timer.split(':').next()?, 16).ok())
                    .flatten()
            });
            if timer == Some(2) {
                return timer;
            }
            seen = timer.or(seen);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        seen
    }

    /// A member that accepted the connection and went silent must still be probed by the
    /// kernel: the client's socket has its keepalive timer armed.
    #[tokio::test]
    async fn every_member_connection_has_tcp_keepalive() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (held, mut accepted) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            // Accept and never answer; keep the stream open.
            if let Ok((stream, _)) = listener.accept().await {
                let _ = held.send(stream).await;
            }
        });
        let client = client(port, |_| ());
        let request = tokio::spawn(async move { client.apiserver_version().await });
        let _stream = accepted.recv().await.unwrap();
        let timer = client_socket_timer(port).await;
        request.abort();
        let why = "the client's connection has no keepalive timer (tr=2 in /proc/net/tcp)";
        assert_eq!(timer, Some(2), "{why}");
    }
}
