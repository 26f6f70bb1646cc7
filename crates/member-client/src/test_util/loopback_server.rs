//! [`LoopbackServer`]: the one HTTP(S) server loop behind every loopback stand-in for a member
//! apiserver; what it answers is the test's handler.

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::{Ipv4Addr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use hyper::{
    body::Incoming,
    server::conn::{http1, http2},
    service::service_fn,
};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::{HandshakeKind, ServerConfig, pki_types::CertificateDer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    task::{JoinHandle, JoinSet},
};
use x509_parser::{certificate::X509Certificate, prelude::FromDer as _};

/// A handler's answer.
pub type Reply = Response<BoxBody<Bytes, Infallible>>;

/// What a connection's TLS handshake established (nothing, over plain HTTP).
#[derive(Clone, Debug, Default)]
pub struct Peer {
    /// The common name of the client certificate the connection presented, if any.
    pub common_name: Option<String>,
    /// Whether the connection resumed an earlier TLS session.
    pub resumed: bool,
}

/// The `SETTINGS_MAX_CONCURRENT_STREAMS` a loopback server sends, as a kube-apiserver does.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 100;

/// A server on a free port of a loopback address, HTTP/1.1 over TCP or over TLS, answering
/// each request with `handler(request, peer)`. Over TLS it speaks HTTP/2 on a connection whose
/// ALPN chose `h2` (when the `ServerConfig` offers it). Dropping it closes its listener and
/// every connection.
#[derive(Debug)]
pub struct LoopbackServer {
    addr: SocketAddr,
    scheme: &'static str,
    counts: Arc<Counts>,
    accept: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Counts {
    accepted: AtomicUsize,
    open: AtomicUsize,
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl LoopbackServer {
    /// Serves on a free port of `ip`, over TLS when `tls` is given.
    ///
    /// # Errors
    /// `ip` is not a loopback address (nothing else is ever served or dialed), or binding
    /// failed.
    pub async fn start<H, F>(
        ip: Ipv4Addr,
        tls: Option<Arc<ServerConfig>>,
        handler: H,
    ) -> io::Result<Self>
    where
        H: Fn(Request<Incoming>, Peer) -> F + Send + Sync + 'static,
        F: Future<Output = Reply> + Send + 'static,
    {
        Self::start_with_streams(ip, tls, DEFAULT_MAX_CONCURRENT_STREAMS, handler).await
    }

    /// [`start`](Self::start), allowing `max_streams` concurrent streams on an HTTP/2
    /// connection.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_with_streams<H, F>(
        ip: Ipv4Addr,
        tls: Option<Arc<ServerConfig>>,
        max_streams: u32,
        handler: H,
    ) -> io::Result<Self>
    where
        H: Fn(Request<Incoming>, Peer) -> F + Send + Sync + 'static,
        F: Future<Output = Reply> + Send + 'static,
    {
        if !ip.is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a test server listens on loopback addresses only, not {ip}"),
            ));
        }
        let listener = TcpListener::bind(SocketAddr::from((ip, 0))).await?;
        let addr = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let counts = Arc::new(Counts::default());
        let (shared, handler) = (Arc::clone(&counts), Arc::new(handler));
        let accept = tokio::spawn(async move {
            // Owned here, so that aborting this task closes every connection.
            let mut connections = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, counts, handler) =
                    (acceptor.clone(), Arc::clone(&shared), Arc::clone(&handler));
                connections.spawn(async move {
                    let Some(acceptor) = acceptor else {
                        return serve(tcp, Peer::default(), None, &counts, handler).await;
                    };
                    // A failed handshake (no acceptable client certificate) is no connection.
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        let connection = tls.get_ref().1;
                        let peer = peer(connection);
                        let h2 = connection.alpn_protocol() == Some(b"h2".as_slice());
                        serve(tls, peer, h2.then_some(max_streams), &counts, handler).await;
                    }
                });
            }
        });
        Ok(Self {
            addr,
            scheme,
            counts,
            accept,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` or `https://`, then the address.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Connections taken so far (over TLS: whose handshake succeeded).
    pub fn connections_accepted(&self) -> usize {
        self.counts.accepted.load(Ordering::SeqCst)
    }

    /// Connections open now.
    pub fn connections_open(&self) -> usize {
        self.counts.open.load(Ordering::SeqCst)
    }
}

/// Serves one connection: HTTP/2 allowing `http2` streams, if given, else HTTP/1.1.
async fn serve<S, H, F>(stream: S, peer: Peer, http2: Option<u32>, counts: &Counts, handler: Arc<H>)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    H: Fn(Request<Incoming>, Peer) -> F + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    counts.accepted.fetch_add(1, Ordering::SeqCst);
    counts.open.fetch_add(1, Ordering::SeqCst);
    let service = service_fn(move |request| {
        let answer = handler(request, peer.clone());
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let io = TokioIo::new(stream);
    let _ = match http2 {
        Some(max_streams) => {
            http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(max_streams)
                .serve_connection(io, service)
                .await
        }
        None => http1::Builder::new().serve_connection(io, service).await,
    };
    counts.open.fetch_sub(1, Ordering::SeqCst);
}

fn peer(connection: &rustls::ServerConnection) -> Peer {
    Peer {
        common_name: connection
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(common_name),
        resumed: connection.handshake_kind() == Some(HandshakeKind::Resumed),
    }
}

fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(cert).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}
