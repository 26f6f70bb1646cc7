use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::test_util::{FakeSource, LoopbackServer, Reply, TestMember, TestPki};

fn identity(cn: &str) -> ClientIdentity {
    TestPki::new().identity(cn)
}

fn subject(request: &Request<Body>) -> Option<&str> {
    Some(request.extensions().get::<ClientIdentity>()?.subject())
}

/// A replay after a 401 starts as a copy of the rejected request: what the fresh
/// credential lacks must be taken off it, not left from the old one.
#[test]
fn a_replay_carries_only_the_fresh_credential() {
    let old = Credential::from_token_bytes(b"old-token")
        .unwrap()
        .with_identity(identity("old"));
    let request = authorize(Request::new(Body::empty()), &old);
    assert_eq!(request.headers()[AUTHORIZATION], "Bearer old-token");
    assert_eq!(subject(&request), Some("old"));

    let certificate_only = Credential::from_identity(identity("new"));
    let replay = authorize(replayable(&request).unwrap(), &certificate_only);
    assert!(replay.headers().get(AUTHORIZATION).is_none());
    assert_eq!(subject(&replay), Some("new"));

    let token_only = Credential::from_token_bytes(b"new-token").unwrap();
    let replay = authorize(replayable(&request).unwrap(), &token_only);
    assert_eq!(replay.headers()[AUTHORIZATION], "Bearer new-token");
    assert_eq!(subject(&replay), None);
}

/// Every part of the request the member sees; kube builds no streaming bodies for its
/// requests, and offers no way to make one here.
#[tokio::test]
async fn a_copy_keeps_every_part() {
    let mut request = Request::builder()
        .method(http::Method::PATCH)
        .uri("https://member.example:6443/api/v1/namespaces/a/configmaps/b?fieldManager=t")
        .version(http::Version::HTTP_11)
        .header("content-type", "application/merge-patch+json")
        .header("accept", "application/json")
        .header("accept", "application/yaml")
        .body(Body::from(b"{\"data\":{}}".to_vec()))
        .unwrap();
    request.extensions_mut().insert(7_u32);

    let copy = replayable(&request).unwrap();
    assert_eq!(copy.method(), request.method());
    assert_eq!(copy.uri(), request.uri());
    assert_eq!(copy.version(), request.version());
    assert_eq!(copy.headers(), request.headers());
    assert_eq!(copy.extensions().get::<u32>(), Some(&7));
    let copied = copy.into_body().collect_bytes().await.unwrap();
    assert_eq!(copied, request.into_body().collect_bytes().await.unwrap());
}

/// A member at a loopback server that answers every request with `answer(n)`, `n` counting
/// its requests from 0, and the count.
async fn member_answering(
    answer: impl Fn(usize) -> Reply + Send + Sync + 'static,
) -> (LoopbackServer, TestMember, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    let server = LoopbackServer::start(std::net::Ipv4Addr::LOCALHOST, None, move |_, _| {
        std::future::ready(answer(seen.fetch_add(1, Ordering::SeqCst)))
    })
    .await
    .unwrap();
    let source = Arc::new(FakeSource::token("t0ken"));
    let secret = CredentialKey::new("karmada-cluster", "member1");
    let mut config = crate::MemberClientConfig::new("member1", server.url(), secret);
    config.limits.request_timeout = Duration::from_secs(2);
    let member = TestMember::build(&source, config, crate::CredentialCacheConfig::default());
    (server, member, count)
}

fn reply(status: StatusCode, retry_after: Option<&str>) -> Reply {
    use http_body_util::BodyExt as _;
    let mut response = Response::builder().status(status);
    if let Some(seconds) = retry_after {
        response = response.header("retry-after", seconds);
    }
    let body = match status {
        StatusCode::OK => "{}".to_owned(),
        _ => format!(
            r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","code":{}}}"#,
            status.as_u16()
        ),
    };
    let body = http_body_util::Full::new(bytes::Bytes::from(body)).boxed();
    response.body(body).unwrap()
}

/// kube's default client retries these; the member client does too, with the copy it keeps
/// for a 401, since the transport under it has no retry layer of its own.
#[rstest::rstest]
#[case(StatusCode::TOO_MANY_REQUESTS)]
#[case(StatusCode::SERVICE_UNAVAILABLE)]
#[case(StatusCode::GATEWAY_TIMEOUT)]
#[tokio::test]
async fn a_busy_members_answer_is_retried_as_kube_retries_it(#[case] busy: StatusCode) {
    let (_server, member, count) = member_answering(move |n| match n {
        0 | 1 => reply(busy, None),
        _ => reply(StatusCode::OK, None),
    })
    .await;
    assert_eq!(member.get("/api/v1/namespaces").await.unwrap(), "{}");
    assert_eq!(count.load(Ordering::SeqCst), 3);
    assert_eq!(member.health.current(), CredentialState::Valid);
}

/// A member may ask to be retried in an hour: the client does not wait past its request
/// timeout for that, and says what the member answered rather than that it timed out.
#[tokio::test]
async fn a_retry_later_than_the_request_timeout_returns_the_members_answer() {
    let (_server, member, count) =
        member_answering(|_| reply(StatusCode::SERVICE_UNAVAILABLE, Some("3600"))).await;
    let answer = tokio::time::timeout(Duration::from_secs(60), member.get("/api/v1/namespaces"))
        .await
        .expect("the request waited for the member's Retry-After");
    match answer {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 503),
        other => panic!("not the member's 503: {other:?}"),
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
}
