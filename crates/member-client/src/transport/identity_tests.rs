//! Client identities end to end, against a loopback server that names the certificate each
//! connection presented.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use hyper_util::client::legacy::connect::HttpConnector;
use kube::client::Body;
use rstest::rstest;
use tower::{BoxError, Service as _, ServiceExt as _};

use super::{
    GenericService, Http2Settings,
    identity_pools::IdentityPools,
    mtls_server::{ClientAuth, MtlsServer, Protocol, TestPki},
    pool_recipe::PoolRecipe,
    service,
};
use crate::{
    ClientFactory, ClientIdentity, CredentialCache, CredentialCacheConfig, CredentialHealth,
    CredentialKey, MemberClientConfig,
    guarded_resolver::{GuardedResolver, system_lookup},
    test_util::FakeSource,
    validation::EndpointPolicy,
};

/// Every wait in these tests is bounded by this.
const PATIENCE: Duration = Duration::from_secs(5);

fn config(server: &MtlsServer, pki: &TestPki) -> kube::Config {
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.root_cert = Some(vec![pki.ca_der()]);
    config
}

/// The member stack `ClientFactory` puts under its layers, offering `h2` as it does by
/// default: the server's [`Protocol`] decides.
fn transport(server: &MtlsServer, pki: &TestPki) -> GenericService {
    let resolver = GuardedResolver::new(Arc::new(EndpointPolicy::loopback()), system_lookup());
    let http2 = Some(Http2Settings::default());
    service(&config(server, pki), resolver, Default::default(), http2).unwrap()
}

fn request(path: &str, identity: Option<&ClientIdentity>) -> Request<Body> {
    let mut request = Request::get(path).body(Body::from(Vec::new())).unwrap();
    if let Some(identity) = identity {
        request.extensions_mut().insert(identity.clone());
    }
    request
}

/// What the server said: the CN it saw on the connection, and whether that connection
/// resumed a TLS session.
#[derive(Debug, PartialEq)]
struct Seen {
    cn: String,
    resumed: bool,
}

async fn seen<B>(response: http::Response<B>) -> Seen
where
    B: http_body::Body<Data = Bytes, Error: std::fmt::Debug>,
{
    assert_eq!(response.status(), StatusCode::OK);
    let resumed = response.headers()["x-resumed"] == "true";
    let body = tokio::time::timeout(PATIENCE, response.into_body().collect()).await;
    let cn = String::from_utf8(body.unwrap().unwrap().to_bytes().to_vec()).unwrap();
    let cn = cn.trim_end().to_owned();
    Seen { cn, resumed }
}

async fn send(
    svc: &mut GenericService,
    path: &str,
    identity: Option<&ClientIdentity>,
) -> Result<http::Response<Box<kube::client::DynBody>>, BoxError> {
    let call = svc.ready().await?.call(request(path, identity));
    tokio::time::timeout(PATIENCE, call).await?
}

async fn get(svc: &mut GenericService, path: &str, identity: &ClientIdentity) -> Seen {
    seen(send(svc, path, Some(identity)).await.unwrap()).await
}

/// A CA, a server that requires a client certificate it issued, and identities `A` and `B`.
async fn requiring_certificates(
    protocol: Protocol,
) -> (TestPki, MtlsServer, ClientIdentity, ClientIdentity) {
    let pki = TestPki::new();
    let server = MtlsServer::start(&pki, ClientAuth::Required, protocol).await;
    let (a, b) = (pki.identity("A"), pki.identity("B"));
    (pki, server, a, b)
}

#[rstest]
#[tokio::test]
async fn the_next_request_after_a_rotation_presents_the_new_identity(
    #[values(Protocol::Http1, Protocol::Http2)] protocol: Protocol,
) {
    let (pki, server, a, b) = requiring_certificates(protocol).await;
    let mut svc = transport(&server, &pki);

    assert_eq!(get(&mut svc, "/", &a).await.cn, "A");
    assert_eq!(get(&mut svc, "/", &a).await.cn, "A");
    let why = "A's idle connection was reused";
    assert_eq!(get(&mut svc, "/", &b).await.cn, "B", "{why}");
    // A's idle connections went with A's pool; B's one is left.
    assert_eq!(server.wait_open_at_most(1).await, 1);
    assert_eq!(get(&mut svc, "/", &a).await.cn, "A");
    server.assert_spoke(protocol);
}

#[rstest]
#[tokio::test]
async fn the_same_certificate_parsed_again_keeps_its_pool(
    #[values(Protocol::Http1, Protocol::Http2)] protocol: Protocol,
) {
    let (pki, server, ..) = requiring_certificates(protocol).await;
    let pools = pools(&server, &pki);
    let (chain, key) = pki.identity_pem("A");
    let parse = || ClientIdentity::from_pem(chain.as_bytes(), key.as_bytes()).unwrap();

    let (a, a_again) = (parse(), parse());
    assert_eq!(get_via(&pools, &server, "/", &a).await.cn, "A");
    let pool = pools.slots().current_pool;
    // A Secret read again gives a new value holding the same certificate and key.
    assert_eq!(get_via(&pools, &server, "/", &a_again).await.cn, "A");
    let why = "a new pool for the same identity";
    assert_eq!(pools.slots().current_pool, pool, "{why}");
    server.assert_spoke(protocol);
}

#[tokio::test]
/// HTTP/1.1 only: `/close` needs it. Both protocols share a pool's TLS config, and so its
/// session cache.
async fn sessions_are_never_resumed_across_identities() {
    let (pki, server, a, b) = requiring_certificates(Protocol::Http1).await;
    let mut svc = transport(&server, &pki);

    // `/close` ends each connection, so each request makes a new handshake. A resumed TLS 1.3
    // session would carry A's certificate into B's connection.
    let steps = [
        (&a, false, "a new identity's first handshake"),
        (&a, true, "the test needs a server that resumes sessions"),
        (&b, false, "A's session was resumed for B"),
        (&b, true, "B's own session"),
    ];
    for (identity, resumed, why) in steps {
        let cn = identity.subject().to_owned();
        assert_eq!(
            get(&mut svc, "/close", identity).await,
            Seen { cn, resumed },
            "{why}"
        );
    }
}

#[rstest]
#[tokio::test]
async fn a_stream_opened_under_the_old_identity_survives_a_rotation(
    #[values(Protocol::Http1, Protocol::Http2)] protocol: Protocol,
) {
    let (pki, server, a, b) = requiring_certificates(protocol).await;
    let mut svc = transport(&server, &pki);

    let mut watch = send(&mut svc, "/stream", Some(&a))
        .await
        .unwrap()
        .into_body();
    let mut next_line = async || {
        let frame = tokio::time::timeout(PATIENCE, watch.frame()).await.unwrap();
        let data = frame.expect("the stream ended").unwrap().into_data();
        String::from_utf8(data.unwrap().to_vec()).unwrap()
    };
    assert_eq!(next_line().await, "A\n");

    assert_eq!(get(&mut svc, "/", &b).await.cn, "B");
    for _ in 0..3 {
        server.tick();
        let why = "the old identity's stream was cut";
        assert_eq!(next_line().await, "A\n", "{why}");
    }
    assert_eq!(server.accepted(), 2);
    let why = "both connections stay open";
    assert_eq!(server.wait_open_at_most(2).await, 2, "{why}");

    // Once the stream ends, its connection is not pooled again: only B's idle one is left.
    drop(watch);
    assert_eq!(server.wait_open_at_most(1).await, 1);
    server.assert_spoke(protocol);
}

#[rstest]
#[tokio::test]
async fn a_request_without_identity_presents_no_certificate(
    #[values(Protocol::Http1, Protocol::Http2)] protocol: Protocol,
) {
    let pki = TestPki::new();
    let optional = MtlsServer::start(&pki, ClientAuth::Optional, protocol).await;
    let a = pki.identity("A");
    let mut svc = transport(&optional, &pki);

    let anonymous =
        async |svc: &mut GenericService| seen(send(svc, "/", None).await.unwrap()).await;
    assert_eq!(anonymous(&mut svc).await.cn, "anonymous");
    assert_eq!(get(&mut svc, "/", &a).await.cn, "A");
    let why = "an identity leaked into the anonymous pool";
    assert_eq!(anonymous(&mut svc).await.cn, "anonymous", "{why}");
    assert_eq!(optional.accepted(), 2);

    let required = MtlsServer::start(&pki, ClientAuth::Required, protocol).await;
    let mut svc = transport(&required, &pki);
    assert!(send(&mut svc, "/", None).await.is_err());
    assert_eq!(required.accepted(), 0);
    optional.assert_spoke(protocol);
}

/// The pools themselves, to look at what they keep.
fn pools(server: &MtlsServer, pki: &TestPki) -> IdentityPools<HttpConnector> {
    let mut dial = HttpConnector::new();
    dial.enforce_http(false);
    let http2 = Some(Http2Settings::default());
    IdentityPools::new(PoolRecipe::new(&config(server, pki), dial, http2).unwrap())
}

fn absolute(server: &MtlsServer, path: &str, identity: &ClientIdentity) -> Request<Body> {
    let mut request = request(path, Some(identity));
    *request.uri_mut() = format!("{}{path}", server.url()).parse().unwrap();
    request
}

/// What the server saw of a request sent straight through `pools`.
async fn get_via(
    pools: &IdentityPools<HttpConnector>,
    server: &MtlsServer,
    path: &str,
    identity: &ClientIdentity,
) -> Seen {
    let response = pools
        .clone()
        .oneshot(absolute(server, path, identity))
        .await;
    seen(response.unwrap()).await
}

#[rstest]
#[tokio::test]
async fn rotations_keep_one_pool_and_close_the_old_ones_idle_connections(
    #[values(Protocol::Http1, Protocol::Http2)] protocol: Protocol,
) {
    let (pki, server, ..) = requiring_certificates(protocol).await;
    let pools = pools(&server, &pki);
    let identities: Vec<_> = (0..5).map(|i| pki.identity(&format!("id{i}"))).collect();
    for identity in &identities {
        let seen = get_via(&pools, &server, "/", identity).await;
        assert_eq!(seen.cn, identity.subject());
    }
    let slots = pools.slots();
    assert!(slots.current.unwrap().same_as(&identities[4]));
    assert!(!slots.previous_alive, "nothing holds the replaced pool");
    assert_eq!(server.accepted(), 5);
    let why = "old pools' connections stay open";
    assert_eq!(server.wait_open_at_most(1).await, 1, "{why}");
    server.assert_spoke(protocol);
}

#[rstest]
#[tokio::test]
async fn a_request_still_carrying_the_old_identity_uses_the_old_pool_while_it_lives(
    #[values(Protocol::Http1, Protocol::Http2)] protocol: Protocol,
) {
    let (pki, server, a, b) = requiring_certificates(protocol).await;
    let pools = pools(&server, &pki);

    let held = tokio::spawn(pools.clone().oneshot(absolute(&server, "/hold", &a)));
    server.wait_holding(1).await;
    assert_eq!(get_via(&pools, &server, "/", &b).await.cn, "B");
    let why = "the in-flight request keeps A's pool alive";
    assert!(pools.slots().previous_alive, "{why}");

    // Read its identity before the rotation, sent after it: A's pool, and B stays current.
    assert_eq!(get_via(&pools, &server, "/", &a).await.cn, "A");
    let why = "a stale request swapped the pool back";
    assert!(pools.slots().current.unwrap().same_as(&b), "{why}");

    server.tick();
    let held = tokio::time::timeout(PATIENCE, held).await.unwrap().unwrap();
    assert_eq!(seen(held.unwrap()).await.cn, "A");
    let why = "A's pool outlived its requests";
    assert!(!pools.slots().previous_alive, "{why}");
    assert_eq!(server.wait_open_at_most(1).await, 1);
    server.assert_spoke(protocol);
}

/// Through the whole stack: the identity comes from the cache, a rotated certificate is
/// presented by the next request, and the copy sent after a 503 presents it too (an anonymous
/// copy would be refused by the server).
#[rstest]
#[tokio::test]
async fn a_factory_client_presents_the_identity_its_credential_holds(
    #[values(Protocol::Http1, Protocol::Http2)] protocol: Protocol,
) {
    let (pki, server, a, b) = requiring_certificates(protocol).await;
    let source = Arc::new(FakeSource::identity(a.clone()));
    let key = CredentialKey::new("ns", "m1");
    let tokens = CredentialCache::from_arc(source.clone(), CredentialCacheConfig::default());
    let factory = ClientFactory::new(tokens.clone()).with_policy(EndpointPolicy::loopback());
    let config =
        MemberClientConfig::new("m1", server.url(), key.clone()).with_ca_bundle(pki.ca_pem());
    let client = factory.build(&config, &CredentialHealth::new()).unwrap();

    for (identity, want) in [(&a, "A"), (&a, "A"), (&b, "B"), (&a, "A")] {
        source.set_identity(identity.clone());
        tokens.invalidate(&key).await;
        let response = client.send(request("/", None)).await.unwrap();
        assert_eq!(seen(response).await.cn, want);
    }
    let response = client.send(request("/flaky", None)).await.unwrap();
    assert_eq!(seen(response).await.cn, "A");
    server.assert_spoke(protocol);
}
