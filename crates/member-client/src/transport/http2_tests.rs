//! HTTP/2 to members: one connection per client identity, the member's stream limit, PINGs,
//! and the fallback to HTTP/1.1, against a loopback server.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use http::Request;
use http_body_util::BodyExt as _;
use kube::client::{Body, DynBody};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};
use tower::{Service as _, ServiceExt as _};

use super::{
    GenericService, Http2Settings,
    mtls_server::{ClientAuth, MtlsServer, Protocol, TestPki},
    service,
};
use crate::{
    ClientFactory, CredentialCache, CredentialCacheConfig, CredentialHealth, CredentialKey,
    MemberClientConfig,
    guarded_resolver::{GuardedResolver, system_lookup},
    test_util::FakeSource,
    validation::EndpointPolicy,
};

/// Every wait in these tests is bounded by this.
const PATIENCE: Duration = Duration::from_secs(5);

/// The member stack for `url`, with `http2` as given.
fn transport(url: &str, pki: &TestPki, http2: Option<Http2Settings>) -> GenericService {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.root_cert = Some(vec![pki.ca_der()]);
    let resolver = GuardedResolver::new(Arc::new(EndpointPolicy::loopback()), system_lookup());
    service(&config, resolver, Default::default(), http2).unwrap()
}

/// A `/stream` opened through `svc`, its first line read.
async fn open_stream(svc: &GenericService) -> http::Response<Box<DynBody>> {
    let request = Request::get("/stream")
        .body(Body::from(Vec::new()))
        .unwrap();
    let call = svc.clone().oneshot(request);
    let response = tokio::time::timeout(PATIENCE, call).await;
    let mut response = response.expect("no response headers").unwrap();
    let first = tokio::time::timeout(PATIENCE, response.body_mut().frame()).await;
    assert!(first.unwrap().unwrap().unwrap().is_data());
    response
}

async fn get(svc: &mut GenericService) {
    let request = Request::get("/").body(Body::from(Vec::new())).unwrap();
    let response = tokio::time::timeout(PATIENCE, svc.ready().await.unwrap().call(request));
    assert!(response.await.unwrap().unwrap().status().is_success());
}

async fn anonymous_server(protocol: Protocol, max_streams: u32) -> (TestPki, MtlsServer) {
    let pki = TestPki::new();
    let server =
        MtlsServer::start_with_streams(&pki, ClientAuth::None, protocol, max_streams).await;
    (pki, server)
}

#[tokio::test]
async fn a_members_watches_and_requests_share_one_connection() {
    let (pki, server) = anonymous_server(Protocol::Http2, 100).await;
    let mut svc = transport(&server.url(), &pki, Some(Http2Settings::default()));

    let streams = futures::future::join_all((0..30).map(|_| open_stream(&svc))).await;
    for _ in 0..10 {
        get(&mut svc).await;
    }
    assert_eq!(
        server.accepted(),
        1,
        "30 streams and 10 requests, one connection"
    );
    server.assert_spoke(Protocol::Http2);
    drop(streams);
}

/// hyper's own pool would queue the streams past the member's limit on its one connection,
/// where a watch waits for ever.
#[tokio::test]
async fn streams_past_the_members_limit_go_over_another_connection() {
    let (pki, server) = anonymous_server(Protocol::Http2, 4).await;
    let mut svc = transport(&server.url(), &pki, Some(Http2Settings::default()));

    let streams = futures::future::join_all((0..10).map(|_| open_stream(&svc))).await;
    assert_eq!(server.accepted(), 3, "10 streams at 4 per connection");

    // Once they end, the connections beside the first are let go.
    drop(streams);
    get(&mut svc).await;
    assert_eq!(server.wait_open_at_most(1).await, 1);
    get(&mut svc).await;
    assert_eq!(server.accepted(), 3, "the first connection still serves");
    server.assert_spoke(Protocol::Http2);
}

#[tokio::test]
async fn a_member_without_h2_is_served_over_http1_on_the_connection_it_answered() {
    let (pki, server) = anonymous_server(Protocol::Http1, 100).await;
    let mut svc = transport(&server.url(), &pki, Some(Http2Settings::default()));

    get(&mut svc).await;
    get(&mut svc).await;
    assert_eq!(server.accepted(), 1, "the dialled connection was not used");
    let streams = futures::future::join_all((0..3).map(|_| open_stream(&svc))).await;
    let why = "HTTP/1.1: a connection per stream, the idle one first";
    assert_eq!(server.accepted(), 3, "{why}");
    server.assert_spoke(Protocol::Http1);
    drop(streams);
}

#[tokio::test]
async fn with_http2_off_a_factory_client_speaks_http1() {
    let key = CredentialKey::new("ns", "m1");
    let source = Arc::new(FakeSource::token("t0ken"));
    let tokens = CredentialCache::from_arc(source, CredentialCacheConfig::default());
    for (http2, want) in [(true, Protocol::Http2), (false, Protocol::Http1)] {
        let (pki, server) = anonymous_server(Protocol::Http2, 100).await;
        let config =
            MemberClientConfig::new("m1", server.url(), key.clone()).with_ca_bundle(pki.ca_pem());
        let factory = ClientFactory::new(tokens.clone())
            .with_policy(EndpointPolicy::loopback())
            .with_http2(http2);
        let client = factory.build(&config, &CredentialHealth::new()).unwrap();
        // The server answers a line, not a version: only the protocol it came over counts.
        let _ = client.apiserver_version().await;
        server.assert_spoke(want);
    }
}

/// Three streams whose readers stopped hold 6 MiB unread, past hyper's default connection
/// window of 5 MiB: the connection's other streams must still flow.
#[tokio::test]
async fn streams_whose_readers_lag_do_not_stall_the_others() {
    let (pki, server) = anonymous_server(Protocol::Http2, 100).await;
    let mut svc = transport(&server.url(), &pki, Some(Http2Settings::default()));

    let mut stalled = Vec::new();
    for _ in 0..3 {
        let request = Request::get("/flood").body(Body::from(Vec::new())).unwrap();
        let response = tokio::time::timeout(PATIENCE, svc.clone().oneshot(request)).await;
        stalled.push(response.unwrap().unwrap());
    }
    // Let the member fill every stalled stream's window.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut watch = open_stream(&svc).await.into_body();
    server.tick();
    let line = tokio::time::timeout(PATIENCE, watch.frame()).await;
    assert!(
        line.expect("the stream stalled")
            .unwrap()
            .unwrap()
            .is_data()
    );
    get(&mut svc).await;
    assert_eq!(server.accepted(), 1);
    drop(stalled);
}

/// A TCP relay in front of `upstream` that can stop passing bytes either way: a member that
/// went silent without closing anything.
struct Relay {
    port: u16,
    frozen: Arc<AtomicBool>,
}

impl Relay {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let shared = Arc::clone(&frozen);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(upstream).await.unwrap();
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, Arc::clone(&shared)));
                tokio::spawn(pump(server_read, client_write, Arc::clone(&shared)));
            }
        });
        Self { port, frozen }
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buffer = vec![0; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buffer).await {
        while frozen.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

/// TCP keepalive would take minutes; an unanswered PING fails the stream within its deadline.
#[tokio::test]
async fn a_silent_member_fails_its_open_streams_once_a_ping_goes_unanswered() {
    let (pki, server) = anonymous_server(Protocol::Http2, 100).await;
    let relay = Relay::start(server.addr()).await;
    let pings = Http2Settings {
        ping_interval: Duration::from_millis(200),
        ping_timeout: Duration::from_millis(300),
    };
    let url = format!("https://127.0.0.1:{}", relay.port);
    let mut svc = transport(&url, &pki, Some(pings));

    let mut watch = open_stream(&svc).await.into_body();
    relay.frozen.store(true, Ordering::SeqCst);
    let next = tokio::time::timeout(PATIENCE, watch.frame()).await;
    let next = next.expect("the stream still looks open after 5 s of silence");
    assert!(
        !matches!(next, Some(Ok(_))),
        "a frame came through a frozen relay"
    );

    relay.frozen.store(false, Ordering::SeqCst);
    get(&mut svc).await;
    assert_eq!(server.accepted(), 2, "the dead connection was not replaced");
}
