//! The HTTP server loop: hyper connections with a header-read timeout, at most
//! [`ServerLimits::max_connections`] at a time and [`ServerLimits::max_connections_per_peer`]
//! from one source address, and a deadline on graceful shutdown.

use std::{
    collections::HashMap,
    future::Future,
    io,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::{GracefulShutdown, Watcher},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::Semaphore,
    task::JoinSet,
};

use super::tls::Transport;

/// Bounds on what one client can hold of the server.
#[derive(Clone, Debug)]
pub(crate) struct ServerLimits {
    /// A connection that has not sent a request's headers within this is closed (slowloris).
    pub(crate) header_read_timeout: Duration,
    /// A request not answered within this gets 503 (longer than two access reviews).
    pub(crate) request_timeout: Duration,
    /// Connections served at once; further ones wait in the listen backlog.
    pub(crate) max_connections: usize,
    /// Connections served at once from one source address; further ones from it are closed
    /// as soon as they are accepted, so that one peer cannot hold the whole of
    /// `max_connections`. 0: no per-peer cap.
    pub(crate) max_connections_per_peer: usize,
    /// How long shutdown waits for requests in flight before dropping them.
    pub(crate) shutdown_deadline: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(15),
            max_connections: 512,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            shutdown_deadline: Duration::from_secs(3),
        }
    }
}

/// The default [`ServerLimits::max_connections_per_peer`] of the API port
/// (`--max-connections-per-peer`): far more than a scraper or a client keeps open, far fewer
/// than `max_connections`.
pub(crate) const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 32;

impl ServerLimits {
    /// The limits of the probe port: it serves two tiny answers, to the kubelet, so it needs
    /// few connections, and it keeps them apart from the API port's.
    pub(crate) fn probes() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            max_connections: 64,
            max_connections_per_peer: 8,
            shutdown_deadline: Duration::from_secs(1),
        }
    }
}

/// The connections open per source address. An entry lives only while its address has a
/// connection open, so the map holds at most `max_connections` entries.
#[derive(Clone, Default)]
struct PeerCounts(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One connection's place in [`PeerCounts`], given back when dropped.
struct PeerSlot {
    counts: PeerCounts,
    peer: IpAddr,
}

impl PeerCounts {
    /// A slot for one more connection from `peer`, or `None` when it already holds `cap`.
    fn claim(&self, peer: IpAddr, cap: usize) -> Option<PeerSlot> {
        let mut counts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let open = counts.entry(peer).or_default();
        if cap != 0 && *open >= cap {
            return None;
        }
        *open += 1;
        Some(PeerSlot {
            counts: self.clone(),
            peer,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut counts = self
            .counts
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(open) = counts.get_mut(&self.peer) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                counts.remove(&self.peer);
            }
        }
    }
}

/// Serves `router` on `listener`, through `transport`, until `shutdown` completes, then lets
/// the requests in flight finish for up to [`ServerLimits::shutdown_deadline`] and returns.
///
/// # Errors
/// None in practice: failed accepts (such as running out of file descriptors) are logged and
/// retried after a pause. The `io::Result` keeps the caller's error handling in one place.
pub(crate) async fn serve(
    listener: TcpListener,
    transport: &Transport,
    router: Router,
    limits: &ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let peers = PeerCounts::default();
    let graceful = GracefulShutdown::new();
    // Owns the connection tasks: whatever outlives the shutdown deadline is aborted on return.
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => permit.map_err(io::Error::other)?,
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting an HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Closed at once rather than left in the backlog: a peer over its cap waits for
        // nothing and holds nothing of anyone else's.
        let Some(slot) = peers.claim(peer.ip(), limits.max_connections_per_peer) else {
            tracing::debug!(peer = %peer.ip(), "closing a connection over the per-peer cap");
            drop(stream);
            continue;
        };
        while connections.try_join_next().is_some() {}
        let (http, router, watcher) = (http.clone(), router.clone(), graceful.watcher());
        let (transport, handshake_timeout) = (transport.clone(), limits.header_read_timeout);
        connections.spawn(async move {
            match transport {
                Transport::Plain => serve_connection(&http, stream, router, watcher).await,
                // The handshake is bounded like the headers that follow it: a client that
                // starts one and stalls holds its slot no longer than a slow header would.
                Transport::Tls(acceptor) => {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => serve_connection(&http, tls, router, watcher).await,
                        Ok(Err(err)) => {
                            tracing::debug!(error = %err, "TLS handshake failed");
                        }
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
            drop(slot);
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_deadline, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            deadline = ?limits.shutdown_deadline,
            "HTTP requests still in flight at the shutdown deadline are dropped"
        );
    }
    connections.shutdown().await;
    Ok(())
}

/// Serves HTTP/1.1 on `io` until the client or the shutdown `watcher` ends it.
async fn serve_connection<IO>(http: &http1::Builder, io: IO, router: Router, watcher: Watcher)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = http.serve_connection(TokioIo::new(io), TowerToHyperService::new(router));
    if let Err(err) = watcher.watch(connection).await {
        tracing::debug!(error = %err, "HTTP connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read as _, Write as _},
        net::{SocketAddr, TcpStream},
        time::Instant,
    };

    use super::*;
    use crate::http::{router, tests::state};

    /// `serve` on a loopback port with `limits`, stopped through the returned sender.
    async fn start(
        limits: ServerLimits,
    ) -> (
        SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = router(state(), None, limits.request_timeout);
        let server = tokio::spawn(async move {
            serve(listener, &Transport::Plain, app, &limits, async {
                let _ = stopped.await;
            })
            .await
        });
        (addr, stop, server)
    }

    /// A blocking client keeps the tests free of an HTTP client dependency. Returns what the
    /// server sent until it closed, or until `limit`.
    fn exchange(stream: &mut TcpStream, request: &[u8], limit: Duration) -> String {
        stream.set_read_timeout(Some(limit)).unwrap();
        stream.write_all(request).unwrap();
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response).into_owned()
    }

    const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

    #[tokio::test]
    async fn serve_answers_on_the_socket_and_returns_after_shutdown() {
        let (addr, stop, server) = start(ServerLimits::default()).await;
        let response = tokio::task::spawn_blocking(move || {
            exchange(
                &mut TcpStream::connect(addr).unwrap(),
                HEALTHZ,
                Duration::from_secs(10),
            )
        })
        .await
        .unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
        assert!(response.ends_with("\r\n\r\nok"), "{response}");

        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("serve did not return after shutdown")
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn a_client_that_never_finishes_its_headers_is_cut_off() {
        let limits = ServerLimits {
            header_read_timeout: Duration::from_millis(300),
            ..ServerLimits::default()
        };
        let (addr, _stop, _server) = start(limits).await;
        let started = Instant::now();
        let response = tokio::task::spawn_blocking(move || {
            exchange(
                &mut TcpStream::connect(addr).unwrap(),
                b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
                Duration::from_secs(10),
            )
        })
        .await
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the connection stayed open {:?} ({response:?})",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_wait_for_a_free_slot() {
        let limits = ServerLimits {
            max_connections: 1,
            ..ServerLimits::default()
        };
        let (addr, _stop, _server) = start(limits).await;
        let answered = tokio::task::spawn_blocking(move || {
            // The only slot, held by a connection that has said nothing yet.
            let holder = TcpStream::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            let mut waiting = TcpStream::connect(addr).unwrap();
            let early = exchange(&mut waiting, HEALTHZ, Duration::from_millis(500));
            drop(holder);
            let late = exchange(&mut waiting, b"", Duration::from_secs(10));
            (early, late)
        })
        .await
        .unwrap();
        assert_eq!(answered.0, "", "served beyond the connection limit");
        assert!(answered.1.starts_with("HTTP/1.1 200 OK"), "{answered:?}");
    }

    /// A connection to `addr` from the loopback address `source`.
    async fn connect_from(source: [u8; 4], addr: SocketAddr) -> tokio::net::TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((source, 0))).unwrap();
        socket.connect(addr).await.unwrap()
    }

    #[tokio::test]
    async fn one_peer_cannot_hold_more_than_its_cap_and_another_is_still_served() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let limits = ServerLimits {
            max_connections: 8,
            max_connections_per_peer: 3,
            ..ServerLimits::default()
        };
        let (addr, _stop, _server) = start(limits).await;
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(connect_from([127, 0, 0, 1], addr).await);
        }
        // Accepted, then closed at once: the read ends without an answer.
        let mut over = connect_from([127, 0, 0, 1], addr).await;
        let _ = over.write_all(HEALTHZ).await;
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), over.read_to_end(&mut answer))
            .await
            .expect("a connection over the cap was kept waiting");
        assert!(
            read.is_err() || answer.is_empty(),
            "served over the cap: {:?}",
            String::from_utf8_lossy(&answer)
        );
        let mut other = connect_from([127, 0, 0, 2], addr).await;
        other.write_all(HEALTHZ).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), other.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200 OK"), "{answer:?}");
        // A slot given back is free again.
        held.pop();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut again = connect_from([127, 0, 0, 1], addr).await;
        again.write_all(HEALTHZ).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), again.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200 OK"), "{answer:?}");
    }

    #[tokio::test]
    async fn shutdown_does_not_wait_past_its_deadline_for_a_stuck_request() {
        let limits = ServerLimits {
            header_read_timeout: Duration::from_secs(60),
            shutdown_deadline: Duration::from_millis(300),
            ..ServerLimits::default()
        };
        let (addr, stop, server) = start(limits).await;
        // A request stuck half-way through its headers: in flight, never finishing.
        let mut stuck = TcpStream::connect(addr).unwrap();
        stuck.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("serve waited for the stuck request")
            .unwrap()
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        drop(stuck);
    }
}
