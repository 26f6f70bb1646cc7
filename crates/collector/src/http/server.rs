//! The HTTP server loop: hyper connections with a header-read timeout, at most
//! [`ServerLimits::max_connections`] at a time and [`ServerLimits::max_connections_per_peer`]
//! from one source address, and a deadline on graceful shutdown.

use std::{
    collections::HashMap,
    future::Future,
    io,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
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
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
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
        let mut counts = self.counts.0.lock().unwrap_or_else(PoisonError::into_inner);
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
                        Ok(Err(err)) => tracing::debug!(error = %err, "TLS handshake failed"),
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
mod tests;
