//! The HTTP server loop: hyper connections with a header-read timeout, at most
//! [`ServerLimits::max_connections`] at a time, and a deadline on graceful shutdown.

use std::{future::Future, io, sync::Arc, time::Duration};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
    service::TowerToHyperService,
};
use tokio::{net::TcpListener, sync::Semaphore, task::JoinSet};

/// Bounds on what one client can hold of the server.
#[derive(Clone, Debug)]
pub(crate) struct ServerLimits {
    /// A connection that has not sent a request's headers within this is closed (slowloris).
    pub(crate) header_read_timeout: Duration,
    /// A request not answered within this gets 503 (longer than two access reviews).
    pub(crate) request_timeout: Duration,
    /// Connections served at once; further ones wait in the listen backlog.
    pub(crate) max_connections: usize,
    /// How long shutdown waits for requests in flight before dropping them.
    pub(crate) shutdown_deadline: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(15),
            max_connections: 512,
            shutdown_deadline: Duration::from_secs(3),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then lets the requests in flight
/// finish for up to [`ServerLimits::shutdown_deadline`] and returns.
///
/// # Errors
/// None in practice: failed accepts (such as running out of file descriptors) are logged and
/// retried after a pause. The `io::Result` keeps the caller's error handling in one place.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: &ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    // Owns the connection tasks: whatever outlives the shutdown deadline is aborted on return.
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => permit.map_err(io::Error::other)?,
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting an HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let connection = http.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let connection = graceful.watch(connection);
        connections.spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "HTTP connection ended with an error");
            }
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
            serve(listener, app, &limits, async {
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
