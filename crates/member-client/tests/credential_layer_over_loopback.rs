//! The wire behaviour of member clients, over a loopback server that records what it receives.
//!
//! The rotation tests (invalidate, 401 → refresh → retry, rejection, JWT expiry) fail against a
//! client that copies the token at build time, as Karmada's did before PR #7663: such a client
//! never sends a token it did not start with, never fetches again and never retries. The 403,
//! 404, transport and missing-Secret tests pin down that nothing else is mistaken for an auth
//! failure.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails by panicking"
)]

mod support;

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use http::Request;
use member_client::test_util::{FakeSource, TestMember, jwt};
use member_client::{CredentialCacheConfig, CredentialState, FailureKind};
use rstest::rstest;
use support::{LoopbackApiserver, all_succeed, member_with_token_a, spawn_gets, wait_until};

const PATH: &str = "/api/v1/namespaces/default/configmaps/cm";

#[tokio::test]
async fn header_carries_the_current_token_and_follows_invalidate() {
    let (server, source, member) = member_with_token_a().await;
    server.accept_only(&["token-a", "token-b"]);

    member.get(PATH).await.unwrap();
    assert_eq!(server.seen_with("token-a"), 1);

    source.set_token("token-b");
    member.tokens.invalidate(&member.key).await;
    member.get(PATH).await.unwrap();
    let why = "after invalidate the next request carries the new token";
    assert_eq!(server.seen_with("token-b"), 1, "{why}");
    assert_eq!(source.fetches(), 2);
    assert_eq!(member.health.current(), CredentialState::Valid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_requests_on_a_cold_cache_fetch_once() {
    const N: usize = 10_000;
    let server = LoopbackApiserver::start(&["token-a"]).await;
    let source = Arc::new(FakeSource::token("token-a").gated());
    let member = Arc::new(TestMember::new(&server.url(), &source));

    let requests = spawn_gets(&member, PATH, N);
    // Every request has missed the cache and is waiting on the one load before it may finish.
    wait_until(
        "all requests miss the cache",
        Duration::from_secs(60),
        || member.tokens.stats().misses as usize >= N,
    )
    .await;
    source.open_gate();
    all_succeed(requests).await;

    assert_eq!(source.fetches(), 1, "concurrent misses share one fetch");
    assert_eq!(server.seen_with("token-a"), N);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_401s_for_one_stale_token_refetch_once_and_all_succeed() {
    const N: usize = 500;
    let server = LoopbackApiserver::start(&["token-a"]).await;
    let source = Arc::new(FakeSource::token("token-a"));
    // All N must be on the wire at once for the server to hold their 401s together.
    let member = Arc::new(TestMember::with_in_flight_limit(&server.url(), &source, N));
    member.get(PATH).await.unwrap();

    // Rotated and revoked, and the event that would have invalidated the cache was missed.
    source.set_token("token-b");
    server.accept_only(&["token-b"]);
    server.hold_401s_until(N);

    let requests = spawn_gets(&member, PATH, N);
    all_succeed(requests).await;

    assert_eq!(
        source.fetches(),
        2,
        "one fetch at start, one refetch for all {N} 401s"
    );
    assert_eq!(server.seen_with("token-a"), 1 + N);
    let why = "each rejected request is retried exactly once";
    assert_eq!(server.seen_with("token-b"), N, "{why}");
    assert_eq!(member.health.stats().retries, N as u64);
    assert_eq!(member.health.current(), CredentialState::Valid);
}

/// The member's in-flight limit holds: requests beyond it wait for a slot, and all succeed.
#[tokio::test]
async fn no_more_requests_are_on_the_wire_than_the_limit() {
    const LIMIT: usize = 3;
    let server = LoopbackApiserver::start(&["token-a"]).await;
    let source = Arc::new(FakeSource::token("token-a"));
    let member = TestMember::with_in_flight_limit(&server.url(), &source, LIMIT);
    let member = Arc::new(member);
    server.delay_responses(Duration::from_millis(50));

    let requests = spawn_gets(&member, PATH, 4 * LIMIT);
    all_succeed(requests).await;

    assert_eq!(server.seen().len(), 4 * LIMIT);
    assert_eq!(server.most_in_flight(), LIMIT);
}

#[rstest]
#[case::post(http::Method::POST)]
#[case::patch(http::Method::PATCH)]
#[case::put(http::Method::PUT)]
#[tokio::test]
async fn request_bodies_are_replayed_byte_for_byte(#[case] method: http::Method) {
    let (server, source, member) = member_with_token_a().await;
    member.get(PATH).await.unwrap();
    source.set_token("token-b");
    server.accept_only(&["token-b"]);

    let body: Vec<u8> =
        br#"{"data":{"k":"v"}}"#.iter().copied().chain([0xff, 0x00, b'\n']).collect();
    let request = Request::builder()
        .method(method.clone())
        .uri(PATH)
        .header("content-type", "application/merge-patch+json")
        .body(body.clone())
        .unwrap();
    // The echo is not UTF-8, so kube cannot return it as text; what matters is what was sent.
    let _ = member.client.request_text(request).await;
    let mut sent = server.seen();
    sent.retain(|s| s.method == method);
    let authorizations: Vec<_> = sent.iter().map(|s| s.authorization.as_deref()).collect();
    let want = [Some("Bearer token-a"), Some("Bearer token-b")];
    assert_eq!(authorizations, want, "one rejected attempt and one retry");
    assert!(sent.iter().all(|s| s.body[..] == body[..]), "{sent:?}");
}

#[tokio::test]
async fn a_credential_still_rejected_after_refresh_fails_once_then_heals() {
    let (server, source, member) = member_with_token_a().await;
    member.get(PATH).await.unwrap();
    assert_eq!(member.health.current(), CredentialState::Valid);

    // Revoked, and the Secret still holds the revoked token (the KAI-Scheduler incident).
    server.accept_only(&[]);
    let err = member.get(PATH).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::Unauthorized, "{err:?}");
    let why = "sent once; the refresh returned the same token, so no retry";
    assert_eq!(server.seen_with("token-a"), 2, "{why}");
    assert_eq!(source.fetches(), 2, "exactly one refresh");
    assert_eq!(member.health.current(), CredentialState::Unauthorized);
    assert_eq!(member.health.stats().retries, 0);

    // Someone writes a new token; the Secret watch invalidates the cache.
    server.accept_only(&["token-b"]);
    source.set_token("token-b");
    member.tokens.invalidate(&member.key).await;
    member.get(PATH).await.unwrap();
    assert_eq!(member.health.current(), CredentialState::Valid);
}

#[tokio::test]
async fn a_refreshed_token_rejected_too_is_not_retried_again() {
    let (server, source, member) = member_with_token_a().await;
    member.get(PATH).await.unwrap();

    source.set_token("token-b");
    server.accept_only(&[]);
    let err = member.get(PATH).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::Unauthorized, "{err:?}");
    assert_eq!(server.seen_with("token-a"), 2);
    assert_eq!(server.seen_with("token-b"), 1, "one retry, no loop");
    assert_eq!(member.health.current(), CredentialState::Unauthorized);

    // The rejected refresh was invalidated too: the next request reads the source again.
    source.set_token("token-c");
    server.accept_only(&["token-c"]);
    member.get(PATH).await.unwrap();
    assert_eq!(server.seen_with("token-c"), 1);
    assert_eq!(member.health.current(), CredentialState::Valid);
}

#[rstest]
#[case::forbidden(
    "/api/v1/namespaces/default/configmaps/forbidden",
    FailureKind::Forbidden
)]
#[case::not_found("/api/v1/namespaces/default/configmaps/missing", FailureKind::NotFound)]
#[tokio::test]
async fn forbidden_and_not_found_touch_neither_cache_nor_state(
    #[case] path: &str,
    #[case] want: FailureKind,
) {
    let (server, _source, member) = member_with_token_a().await;

    let err = member.get(path).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), want, "{err:?}");
    let why = "a 403/404 says nothing of the credential";
    assert_eq!(member.health.current(), CredentialState::Unknown, "{why}");

    member.get(PATH).await.unwrap();
    let before = member.tokens.stats();
    let err = member.get(path).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), want, "{err:?}");
    assert_eq!(member.health.current(), CredentialState::Valid);
    let after = member.tokens.stats();
    assert_eq!(after.invalidations, before.invalidations);
    assert_eq!(after.fetches, before.fetches);
    let sent = server.seen().iter().filter(|s| s.path == path).count();
    assert_eq!(sent, 2, "never retried");
}

#[tokio::test]
async fn a_jwt_near_its_exp_is_refetched_before_the_ttl() {
    let server = LoopbackApiserver::start(&[]).await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // Expires in 2.5 s; with a 2 s skew the entry must go after ~0.5 s, not after the 300 s TTL.
    let first = jwt(&format!(r#"{{"exp":{}}}"#, now + 2.5));
    let second = jwt(&format!(r#"{{"exp":{}}}"#, now + 3600.0));
    server.accept_only(&[first.as_str(), second.as_str()]);
    let source = Arc::new(FakeSource::token(first.as_str()));
    let config = CredentialCacheConfig {
        ttl: Duration::from_secs(300),
        expiry_skew: Duration::from_secs(2),
        min_ttl: Duration::from_millis(50),
        ..CredentialCacheConfig::default()
    };
    let member = TestMember::with_cache_config(&server.url(), &source, config);
    member.get(PATH).await.unwrap();
    source.set_token(&second);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while server.seen_with(&second) == 0 {
        let why = "the renewed JWT was never sent";
        assert!(tokio::time::Instant::now() < deadline, "{why}");
        member.get(PATH).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(source.fetches(), 2);
}

#[tokio::test]
async fn an_unreadable_credential_is_reported_and_nothing_is_sent() {
    let (server, source, member) = member_with_token_a().await;
    source.delete();

    let err = member.get(PATH).await.unwrap_err();
    let kind = FailureKind::of(&err);
    assert_eq!(kind, FailureKind::CredentialUnavailable, "{err:?}");
    assert!(matches!(
        member.health.current(),
        CredentialState::Unavailable { .. }
    ));
    assert!(server.seen().is_empty());

    source.set_token("token-a");
    member.get(PATH).await.unwrap();
    assert_eq!(member.health.current(), CredentialState::Valid);
}

#[rstest]
#[case::connection_refused(false)]
#[case::tls_to_a_plain_http_server(true)]
#[tokio::test]
async fn transport_failures_are_unreachable_not_auth(#[case] tls_mismatch: bool) {
    let server = LoopbackApiserver::start(&["token-a"]).await;
    let url = if tls_mismatch {
        format!("https://{}", server.addr)
    } else {
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        format!("http://{addr}")
    };
    let source = Arc::new(FakeSource::token("token-a"));
    let member = TestMember::new(&url, &source);

    let err = member.get(PATH).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::Unreachable, "{err:?}");
    assert_eq!(member.health.current(), CredentialState::Unknown);
    assert_eq!(member.tokens.stats().invalidations, 0);
}
