//! The metrics as a scrape sees them.

use super::*;
use member_client::CredentialState;
use member_client::{CredentialSource, SecretRef, SourceError, TokenCacheConfig};

const TOKEN: &str = "s3cr3t-token-value";

/// Always returns [`TOKEN`], so a test can look for it in the output.
#[derive(Debug)]
struct FixedSource;

#[async_trait::async_trait]
impl CredentialSource for FixedSource {
    async fn fetch(&self, _key: &SecretRef) -> Result<member_client::Credential, SourceError> {
        member_client::Credential::from_token_bytes(TOKEN.as_bytes())
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn recorded_counters_appear_as_exact_samples() {
    let metrics = Metrics::new();
    metrics.record_relist("m1", "apps/v1/deployments");
    metrics.record_relist("m1", "apps/v1/deployments");
    metrics.record_watch_error("m1", "core/v1/nodes", FailureKind::CredentialUnavailable);
    metrics.set_member_ready("m1", true);
    metrics.set_member_ready("m2", false);

    let text = metrics.encode().unwrap();
    let lines = lines(&text);
    for want in [
        r#"tether_relists_total{member="m1",resource="apps/v1/deployments"} 2"#,
        r#"tether_watch_errors_total{member="m1",resource="core/v1/nodes",kind="credential_unavailable"} 1"#,
        r#"tether_member_ready{member="m1"} 1"#,
        r#"tether_member_ready{member="m2"} 0"#,
        "# TYPE tether_relists counter",
        "# EOF",
    ] {
        assert!(lines.contains(&want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn member_counters_and_state_are_read_from_health_at_scrape_time() {
    let metrics = Metrics::new();
    let health = CredentialHealth::new();
    metrics.watch_member("m1", health.clone());
    let before = metrics.encode().unwrap();
    assert!(lines(&before).contains(&r#"tether_credential_state{member="m1",state="unknown"} 1"#));
    assert!(lines(&before).contains(&"tether_members 1"));

    health.report(CredentialState::Rejected);
    let text = metrics.encode().unwrap();
    let lines = lines(&text);
    for want in [
        r#"tether_unauthorized_responses_total{member="m1"} 0"#,
        r#"tether_retries_total{member="m1"} 0"#,
        r#"tether_credential_state{member="m1",state="unknown"} 0"#,
        r#"tether_credential_state{member="m1",state="valid"} 0"#,
        r#"tether_credential_state{member="m1",state="rejected"} 1"#,
        r#"tether_credential_state{member="m1",state="unavailable"} 0"#,
    ] {
        assert!(lines.contains(&want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn unavailable_reason_stays_out_of_labels() {
    let metrics = Metrics::new();
    let health = CredentialHealth::new();
    metrics.watch_member("m1", health.clone());
    health.report(CredentialState::Unavailable {
        reason: "secret ns/s not found".into(),
    });
    let text = metrics.encode().unwrap();
    assert!(
        lines(&text).contains(&r#"tether_credential_state{member="m1",state="unavailable"} 1"#)
    );
    assert!(!text.contains("not found"), "{text}");
}

#[test]
fn forgotten_member_disappears_from_every_family() {
    let metrics = Metrics::new();
    metrics.watch_member("m1", CredentialHealth::new());
    metrics.watch_member("m2", CredentialHealth::new());
    metrics.record_relist("m1", "apps/v1/deployments");
    metrics.record_watch_error("m1", "apps/v1/deployments", FailureKind::Unreachable);
    metrics.set_member_ready("m1", true);

    metrics.forget_member("m1");

    let text = metrics.encode().unwrap();
    assert!(!text.contains(r#"member="m1""#), "{text}");
    assert!(text.contains(r#"member="m2""#), "{text}");
    assert!(lines(&text).contains(&"tether_members 1"));
}

#[test]
fn recorded_only_members_are_not_counted_as_watched() {
    let metrics = Metrics::new();
    metrics.record_relist("m1", "apps/v1/deployments");
    let text = metrics.encode().unwrap();
    assert!(lines(&text).contains(&"tether_members 0"), "{text}");
}

#[test]
fn rotation_latency_lands_in_its_bucket() {
    let metrics = Metrics::new();
    metrics.observe_rotation_to_use(Duration::from_millis(40));
    let text = metrics.encode().unwrap();
    let lines = lines(&text);
    for want in [
        "# TYPE tether_rotation_to_use_seconds histogram",
        "# UNIT tether_rotation_to_use_seconds seconds",
        r#"tether_rotation_to_use_seconds_bucket{le="0.025"} 0"#,
        r#"tether_rotation_to_use_seconds_bucket{le="0.05"} 1"#,
        r#"tether_rotation_to_use_seconds_bucket{le="60.0"} 1"#,
        "tether_rotation_to_use_seconds_count 1",
    ] {
        assert!(lines.contains(&want), "missing {want:?} in\n{text}");
    }
}

#[tokio::test]
async fn token_cache_counters_are_read_at_scrape_time_and_tokens_never_appear() {
    let metrics = Metrics::new();
    let cache = TokenCache::new(FixedSource, TokenCacheConfig::default());
    metrics.watch_token_cache("members", cache.clone());
    let key = SecretRef::new("ns", "member1");
    cache.get(&key).await.unwrap(); // miss + fetch
    cache.get(&key).await.unwrap(); // hit
    cache.invalidate(&key).await;

    let text = metrics.encode().unwrap();
    let lines = lines(&text);
    for want in [
        r#"tether_token_fetches_total{cache="members",kind="token"} 1"#,
        r#"tether_token_fetches_total{cache="members",kind="exec"} 0"#,
        r#"tether_token_fetches_total{cache="members",kind="certificate"} 0"#,
        r#"tether_token_fetch_failures_total{cache="members"} 0"#,
        r#"tether_token_cache_hits_total{cache="members"} 1"#,
        r#"tether_token_cache_misses_total{cache="members"} 1"#,
        r#"tether_token_invalidations_total{cache="members"} 1"#,
    ] {
        assert!(lines.contains(&want), "missing {want:?} in\n{text}");
    }
    assert!(!text.contains(TOKEN), "token leaked into /metrics:\n{text}");
    assert!(!format!("{metrics:?}").contains(TOKEN));
}

#[test]
fn an_unauthorized_watch_error_is_labelled_as_such() {
    let metrics = Metrics::new();
    metrics.watch_member("member1", CredentialHealth::new());
    metrics.record_watch_error("member1", "apps/v1/deployments", FailureKind::Unauthorized);
    let text = metrics.encode().unwrap();
    assert!(lines(&text).contains(
        &r#"tether_watch_errors_total{member="member1",resource="apps/v1/deployments",kind="unauthorized"} 1"#
    ), "{text}");
}

#[test]
fn a_credential_expiry_is_exported_per_member_and_only_when_known() {
    use base64::Engine as _;
    let metrics = Metrics::new();
    let (with_exp, opaque) = (CredentialHealth::new(), CredentialHealth::new());
    metrics.watch_member("m1", with_exp.clone());
    metrics.watch_member("m2", opaque.clone());
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let jwt = format!(
        "{}.{}.c2ln",
        b64(r#"{"alg":"RS256"}"#),
        b64(r#"{"exp":2000000000}"#)
    );
    with_exp.using(&member_client::Credential::from_token_bytes(jwt.as_bytes()).unwrap());
    opaque.using(&member_client::Credential::from_token_bytes(b"opaque").unwrap());
    let text = metrics.encode().unwrap();
    assert!(
        lines(&text)
            .contains(&r#"tether_credential_expiry_timestamp_seconds{member="m1"} 2000000000"#),
        "{text}"
    );
    assert!(
        !text.contains(r#"tether_credential_expiry_timestamp_seconds{member="m2"}"#),
        "an opaque token has no expiry: {text}"
    );
}
