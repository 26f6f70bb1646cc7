//! Tokens never reach logs, `Debug` output or errors, checked at TRACE level over a rotation.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails by panicking"
)]

mod support;

use std::sync::Arc;

use member_client::CredentialState;
use member_client::test_util::{FakeSource, LogBuffer, TestMember};
use support::LoopbackApiserver;

const PATH: &str = "/api/v1/namespaces/default/configmaps/cm";
const OLD: &str = "tok-OLD-7f3a9c1e5b";
const NEW: &str = "tok-NEW-2d8e4b6a0c";

#[tokio::test]
async fn a_full_rotation_at_trace_level_logs_no_token() {
    let captured = LogBuffer::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // current_thread runtime: every task of this test runs on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = LoopbackApiserver::start(&[OLD]).await;
    let source = Arc::new(FakeSource::token(OLD));
    let member = TestMember::new(&server.url(), &source);
    member.get(PATH).await.unwrap();

    // Rotation missed by the watch: 401, refresh, retry.
    source.set_token(NEW);
    server.accept_only(&[NEW]);
    member.get(PATH).await.unwrap();
    // Rotation seen by the watch.
    member.tokens.invalidate(&member.key).await;
    member.get(PATH).await.unwrap();
    // Revocation: rejected after refresh.
    server.accept_only(&[]);
    let err = member.get(PATH).await.unwrap_err();
    assert_eq!(member.health.current(), CredentialState::Unauthorized);
    tracing::error!(error = %err, debug = ?err, "request failed");
    let credential = member.tokens.get(&member.key).await.unwrap();
    tracing::info!(?credential, cache = ?member.tokens, health = ?member.health, "state");

    let logs = captured.text();
    for (line, what) in [
        ("retrying once with a refreshed token", "rotation"),
        ("rejects its credential", "rejection"),
    ] {
        let held = logs.contains(line);
        assert!(held, "the capture must hold the {what}:\n{logs}");
    }
    for token in [OLD, NEW] {
        let leaked = logs.contains(token);
        assert!(!leaked, "token {token} leaked into the logs:\n{logs}");
        assert!(!format!("{err} {err:?}").contains(token));
    }
    // The server did see them, so the test is about the logs, not an absent token.
    assert!(server.seen_with(OLD) > 0 && server.seen_with(NEW) > 0);
}
