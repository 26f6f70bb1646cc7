//! A loopback HTTPS server for the transport tests that answers each request with the common
//! name of the client certificate its connection presented (`anonymous` for none).
//!
//! Paths: `/stream` streams one line per [`MtlsServer::tick`] and never ends; `/flood` sends
//! [`FLOOD_BYTES`] at once and never ends; `/hold` answers
//! only after the next tick; `/flaky` answers 503 the first time; `/close` closes the
//! connection after answering (HTTP/1.1 only). Every response says in `x-resumed` whether its
//! connection resumed a TLS session. It offers `h2` by ALPN when started with
//! [`Protocol::Http2`], and only HTTP/1.1 otherwise.

use std::{
    collections::BTreeSet,
    net::Ipv4Addr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http::{Request, Response, StatusCode, Version};
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use tokio::sync::broadcast;

pub(crate) use crate::test_util::{ClientAuth, TestPki};
use crate::test_util::{LoopbackServer, Peer, Reply};

/// What `/flood` sends before it waits for ever.
pub(crate) const FLOOD_BYTES: usize = 8 * 1024 * 1024;

/// The running server; stops (connections and all) when dropped.
pub(crate) struct MtlsServer {
    server: LoopbackServer,
    state: Arc<State>,
}

struct State {
    ticks: broadcast::Sender<()>,
    holding: AtomicUsize,
    flaked: AtomicBool,
    /// The HTTP versions of the requests served so far.
    versions: Mutex<BTreeSet<String>>,
}

/// What the server offers by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.1 alone (no ALPN): a client that offers `h2` falls back.
    Http1,
    /// `h2`, then HTTP/1.1.
    Http2,
}

impl MtlsServer {
    pub(crate) async fn start(pki: &TestPki, auth: ClientAuth, protocol: Protocol) -> Self {
        let streams = crate::test_util::DEFAULT_MAX_CONCURRENT_STREAMS;
        Self::start_with_streams(pki, auth, protocol, streams).await
    }

    /// [`start`](Self::start), allowing `max_streams` concurrent streams per HTTP/2 connection.
    pub(crate) async fn start_with_streams(
        pki: &TestPki,
        auth: ClientAuth,
        protocol: Protocol,
        max_streams: u32,
    ) -> Self {
        let state = Arc::new(State {
            ticks: broadcast::channel(16).0,
            holding: AtomicUsize::new(0),
            flaked: AtomicBool::new(false),
            versions: Mutex::default(),
        });
        let shared = Arc::clone(&state);
        let mut tls = (*pki.server_config(Ipv4Addr::LOCALHOST, auth)).clone();
        if protocol == Protocol::Http2 {
            tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        }
        let tls = Some(Arc::new(tls));
        let handler = move |request, peer: Peer| {
            let state = Arc::clone(&shared);
            async move { respond(&state, &peer, request).await }
        };
        let server =
            LoopbackServer::start_with_streams(Ipv4Addr::LOCALHOST, tls, max_streams, handler)
                .await
                .unwrap();
        Self { server, state }
    }

    /// `https://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        self.server.url()
    }

    /// One more line on every open `/stream`; answers every waiting `/hold`.
    pub(crate) fn tick(&self) {
        let _ = self.state.ticks.send(());
    }

    /// Panics unless every request so far came over `protocol`.
    pub(crate) fn assert_spoke(&self, protocol: Protocol) {
        let want = match protocol {
            Protocol::Http1 => Version::HTTP_11,
            Protocol::Http2 => Version::HTTP_2,
        };
        let versions = self.state.versions.lock().unwrap().clone();
        assert_eq!(versions, BTreeSet::from([format!("{want:?}")]));
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    /// Connections whose handshake succeeded, so far.
    pub(crate) fn accepted(&self) -> usize {
        self.server.connections_accepted()
    }

    /// Waits (up to 5 s) until `n` requests to `/hold` have arrived.
    pub(crate) async fn wait_holding(&self, n: usize) {
        let arrived = within_5s(|| self.state.holding.load(Ordering::SeqCst) >= n).await;
        assert!(arrived, "{n} requests to /hold never arrived");
    }

    /// Waits (up to 5 s) until at most `max` connections are open; the number open then.
    pub(crate) async fn wait_open_at_most(&self, max: usize) -> usize {
        within_5s(|| self.server.connections_open() <= max).await;
        self.server.connections_open()
    }
}

/// Whether `check` holds within 5 s, polled every 10 ms.
async fn within_5s(check: impl Fn() -> bool) -> bool {
    for _ in 0..500 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check()
}

async fn respond(state: &State, peer: &Peer, request: Request<Incoming>) -> Reply {
    let version = format!("{:?}", request.version());
    state.versions.lock().unwrap().insert(version);
    let cn = peer.common_name.as_deref().unwrap_or("anonymous");
    let line = Bytes::from(format!("{cn}\n"));
    let body = match request.uri().path() {
        "/stream" => {
            let ticks = state.ticks.subscribe();
            let lines = futures::stream::unfold((ticks, true), move |(mut ticks, first)| {
                let line = line.clone();
                async move {
                    if !first {
                        ticks.recv().await.ok()?;
                    }
                    Some((Ok(Frame::data(line)), (ticks, false)))
                }
            });
            StreamBody::new(lines).boxed()
        }
        "/flood" => {
            let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
            let count = FLOOD_BYTES / chunk.len();
            let chunks = (0..count).map(move |_| Ok(Frame::data(chunk.clone())));
            let chunks = futures::StreamExt::chain(
                futures::stream::iter(chunks),
                futures::stream::pending(),
            );
            StreamBody::new(chunks).boxed()
        }
        "/hold" => {
            // No response headers until the next tick: the request stays in flight.
            let mut ticks = state.ticks.subscribe();
            state.holding.fetch_add(1, Ordering::SeqCst);
            let _ = ticks.recv().await;
            Full::new(line).boxed()
        }
        "/flaky" if !state.flaked.swap(true, Ordering::SeqCst) => {
            let mut response = Response::new(Full::new(Bytes::new()).boxed());
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            return response;
        }
        _ => Full::new(line).boxed(),
    };
    let mut response = Response::new(body);
    response.headers_mut().insert(
        "x-resumed",
        http::HeaderValue::from_static(if peer.resumed { "true" } else { "false" }),
    );
    if request.uri().path() == "/close" {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    response
}
