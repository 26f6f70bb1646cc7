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

/// Stops what [`start`] started, which must return within 10 s (else fails saying `late`).
async fn shut_down(
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<io::Result<()>>,
    late: &str,
) {
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect(late)
        .unwrap()
        .unwrap();
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

/// [`exchange`] on a new connection to `addr`, off the runtime, within 10 s.
async fn exchange_on_new_connection(addr: SocketAddr, request: &'static [u8]) -> String {
    let limit = Duration::from_secs(10);
    let exchanged = move || exchange(&mut TcpStream::connect(addr).unwrap(), request, limit);
    tokio::task::spawn_blocking(exchanged).await.unwrap()
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

#[tokio::test]
async fn serve_answers_on_the_socket_and_returns_after_shutdown() {
    let (addr, stop, server) = start(ServerLimits::default()).await;
    let response = exchange_on_new_connection(addr, HEALTHZ).await;
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.ends_with("\r\n\r\nok"), "{response}");

    shut_down(stop, server, "serve did not return after shutdown").await;
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let limits = ServerLimits {
        header_read_timeout: Duration::from_millis(300),
        ..ServerLimits::default()
    };
    let (addr, _stop, _server) = start(limits).await;
    let started = Instant::now();
    let response = exchange_on_new_connection(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await;
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

/// What `GET /healthz` from the loopback address `source` gets, within 5 s.
async fn healthz_from(source: [u8; 4], addr: SocketAddr) -> Vec<u8> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut connection = connect_from(source, addr).await;
    connection.write_all(HEALTHZ).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), connection.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    answer
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
    let answer = healthz_from([127, 0, 0, 2], addr).await;
    assert!(answer.starts_with(b"HTTP/1.1 200 OK"), "{answer:?}");
    // A slot given back is free again.
    held.pop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = healthz_from([127, 0, 0, 1], addr).await;
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
    shut_down(stop, server, "serve waited for the stuck request").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(stuck);
}
