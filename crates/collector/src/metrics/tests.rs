//! The metrics as a scrape sees them.

use super::*;
use member_client::CredentialState;
use member_client::{CredentialCacheConfig, CredentialKey, test_util::FakeSource};

/// The token the tests' source holds, so that a test can look for it in the output.
const TOKEN: &str = "s3cr3t-token-value";

/// Fails unless each of `wants` is a whole line of `text`.
fn assert_lines(text: &str, wants: &[&str]) {
    let lines: Vec<&str> = text.lines().collect();
    for want in wants {
        assert!(lines.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn recorded_counters_appear_as_exact_samples() {
    let metrics = Metrics::new();
    metrics.record_relist("m1", "apps/v1/deployments");
    metrics.record_relist("m1", "apps/v1/deployments");
    metrics.record_watch_error("m1", "core/v1/nodes", FailureKind::CredentialUnavailable);
    metrics.record_watch_error("m1", "apps/v1/deployments", FailureKind::Unauthorized);
    metrics.set_member_ready("m1", true);
    metrics.set_member_ready("m2", false);

    let text = metrics.encode().unwrap();
    let build_info = format!(
        r#"tether_build_info{{version="{}"}} 1"#,
        env!("CARGO_PKG_VERSION")
    );
    assert_lines(
        &text,
        &[
            r#"tether_relists_total{member="m1",resource="apps/v1/deployments"} 2"#,
            r#"tether_watch_errors_total{member="m1",resource="core/v1/nodes",kind="credential_unavailable"} 1"#,
            r#"tether_watch_errors_total{member="m1",resource="apps/v1/deployments",kind="unauthorized"} 1"#,
            r#"tether_member_ready{member="m1"} 1"#,
            r#"tether_member_ready{member="m2"} 0"#,
            // Members only recorded for are not counted as watched.
            "tether_members 0",
            &build_info,
            "# TYPE tether_relists counter",
            "# EOF",
        ],
    );
}

#[test]
fn member_counters_and_state_are_read_from_health_at_scrape_time() {
    let metrics = Metrics::new();
    let health = CredentialHealth::new();
    metrics.watch_member("m1", health.clone());
    let before = metrics.encode().unwrap();
    assert_lines(
        &before,
        &[
            r#"tether_credential_state{member="m1",state="unknown"} 1"#,
            "tether_members 1",
        ],
    );

    health.report(CredentialState::Unauthorized);
    let text = metrics.encode().unwrap();
    assert_lines(
        &text,
        &[
            r#"tether_unauthorized_responses_total{member="m1"} 0"#,
            r#"tether_retries_total{member="m1"} 0"#,
            r#"tether_credential_state{member="m1",state="unknown"} 0"#,
            r#"tether_credential_state{member="m1",state="valid"} 0"#,
            r#"tether_credential_state{member="m1",state="unauthorized"} 1"#,
            r#"tether_credential_state{member="m1",state="unavailable"} 0"#,
        ],
    );

    // The reason a credential is unavailable stays out of the labels.
    health.report(CredentialState::Unavailable {
        reason: "secret ns/s not found".into(),
    });
    let text = metrics.encode().unwrap();
    assert_lines(
        &text,
        &[r#"tether_credential_state{member="m1",state="unavailable"} 1"#],
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
    let text = metrics.encode().unwrap();
    assert!(
        !text.contains("tether_member_info{"),
        "no member info before there is a registry: {text}"
    );

    metrics.forget_member("m1");

    let text = metrics.encode().unwrap();
    assert!(!text.contains(r#"member="m1""#), "{text}");
    assert!(text.contains(r#"member="m2""#), "{text}");
    assert_lines(&text, &["tether_members 1"]);
}

#[test]
fn rotation_latency_lands_in_its_bucket() {
    let metrics = Metrics::new();
    metrics.observe_rotation_to_use(Duration::from_millis(40));
    let text = metrics.encode().unwrap();
    assert_lines(
        &text,
        &[
            "# TYPE tether_rotation_to_use_seconds histogram",
            "# UNIT tether_rotation_to_use_seconds seconds",
            r#"tether_rotation_to_use_seconds_bucket{le="0.025"} 0"#,
            r#"tether_rotation_to_use_seconds_bucket{le="0.05"} 1"#,
            r#"tether_rotation_to_use_seconds_bucket{le="60.0"} 1"#,
            "tether_rotation_to_use_seconds_count 1",
        ],
    );
}

#[tokio::test]
async fn credential_cache_counters_are_read_at_scrape_time_and_tokens_never_appear() {
    let metrics = Metrics::new();
    let cache = CredentialCache::new(FakeSource::token(TOKEN), CredentialCacheConfig::default());
    metrics.watch_credential_cache("members", cache.clone());
    let key = CredentialKey::new("ns", "member1");
    cache.get(&key).await.unwrap(); // miss + fetch
    cache.get(&key).await.unwrap(); // hit
    cache.invalidate(&key).await;

    let text = metrics.encode().unwrap();
    assert_lines(
        &text,
        &[
            r#"tether_token_fetches_total{cache="members",kind="token"} 1"#,
            r#"tether_token_fetches_total{cache="members",kind="exec"} 0"#,
            r#"tether_token_fetches_total{cache="members",kind="certificate"} 0"#,
            r#"tether_token_fetch_failures_total{cache="members"} 0"#,
            r#"tether_credential_cache_hits_total{cache="members"} 1"#,
            r#"tether_credential_cache_misses_total{cache="members"} 1"#,
            r#"tether_token_invalidations_total{cache="members"} 1"#,
        ],
    );
    assert!(!text.contains(TOKEN), "token leaked into /metrics:\n{text}");
    assert!(!format!("{metrics:?}").contains(TOKEN));
}

#[test]
fn a_credential_expiry_is_exported_per_member_and_only_when_known() {
    let metrics = Metrics::new();
    let (with_exp, opaque) = (CredentialHealth::new(), CredentialHealth::new());
    metrics.watch_member("m1", with_exp.clone());
    metrics.watch_member("m2", opaque.clone());
    let jwt = member_client::test_util::jwt(r#"{"exp":2000000000}"#);
    with_exp.using(&member_client::Credential::from_token_bytes(jwt.as_bytes()).unwrap());
    opaque.using(&member_client::Credential::from_token_bytes(b"opaque").unwrap());
    let text = metrics.encode().unwrap();
    assert_lines(
        &text,
        &[r#"tether_credential_expiry_timestamp_seconds{member="m1"} 2000000000"#],
    );
    assert!(
        !text.contains(r#"tether_credential_expiry_timestamp_seconds{member="m2"}"#),
        "an opaque token has no expiry: {text}"
    );
}

#[test]
fn leader_has_no_sample_until_leadership_is_known() {
    let metrics = Metrics::new();
    let text = metrics.encode().unwrap();
    assert_lines(&text, &["# TYPE tether_leader gauge"]);
    assert!(
        !text.lines().any(|l| l.starts_with("tether_leader ")),
        "a collector that writes no status must not look leaderless: {text}"
    );
    metrics.set_leader(false);
    assert_lines(&metrics.encode().unwrap(), &["tether_leader 0"]);
    metrics.set_leader(true);
    assert_lines(&metrics.encode().unwrap(), &["tether_leader 1"]);
}

fn registry() -> cluster_registry::Registry {
    cluster_registry::RegistryBuilder::new().build().0
}

#[test]
fn member_info_labels_every_member_with_its_source_and_credential_kind() {
    let metrics = Metrics::new();
    metrics.watch_registry(registry(), MembersFrom::Capi);
    let (used, unused) = (CredentialHealth::new(), CredentialHealth::new());
    metrics.watch_member("m1", used.clone());
    metrics.watch_member("m2", unused);
    // A member without a client (an invalid definition) is still described.
    metrics.set_member_ready("m3", false);
    used.using(&member_client::Credential::from_token_bytes(TOKEN.as_bytes()).unwrap());

    let text = metrics.encode().unwrap();
    assert_lines(
        &text,
        &[
            "# TYPE tether_member_info gauge",
            r#"tether_member_info{member="m1",source="kubeconfig",endpoint_host="",kind="token"} 1"#,
            r#"tether_member_info{member="m2",source="kubeconfig",endpoint_host="",kind="unknown"} 1"#,
            r#"tether_member_info{member="m3",source="kubeconfig",endpoint_host="",kind="unknown"} 1"#,
        ],
    );
    assert!(!text.contains(TOKEN), "token leaked into /metrics:\n{text}");

    metrics.forget_member("m1");
    assert!(!metrics.encode().unwrap().contains(r#"member="m1""#));
}

#[test]
fn member_info_takes_the_host_from_the_endpoint_the_registry_gives() {
    let watched = scrape::Watched::default();
    let entry = |name: &str| (name.to_owned(), MemberEntry::default());
    watched.members_mut().extend([entry("m1"), entry("m2")]);
    let endpoint = |name: &str| (name == "m1").then(|| "https://u:pw@api.m1.example:6443/x".into());
    let labels = member_info::info_labels(&watched, "karmada", endpoint);
    let hosts: Vec<_> = labels
        .iter()
        .map(|l| (l.member.as_str(), l.endpoint_host.as_str()))
        .collect();
    assert_eq!(hosts, [("m1", "api.m1.example"), ("m2", "")]);
    assert!(
        labels
            .iter()
            .all(|l| l.source == "karmada" && l.kind == "unknown")
    );
}

#[rstest::rstest]
#[case::name_and_port("https://api.example.com:6443", Some("api.example.com"))]
#[case::no_port("https://api.example.com", Some("api.example.com"))]
#[case::ipv4("https://10.0.0.1:6443/", Some("10.0.0.1"))]
#[case::ipv6_in_brackets("https://[fd00::1]:6443", Some("[fd00::1]"))]
#[case::user_info_never_reaches_a_label("https://admin:hunter2@10.0.0.1:6443", Some("10.0.0.1"))]
#[case::path_dropped("https://proxy.example/k8s/clusters/c-1", Some("proxy.example"))]
#[case::not_a_url("not a url", None)]
#[case::empty("", None)]
fn endpoint_host_is_the_bare_host(#[case] endpoint: &str, #[case] want: Option<&str>) {
    assert_eq!(member_info::endpoint_host(endpoint).as_deref(), want);
}

#[test]
fn every_source_is_labelled_by_its_kind_and_where_it_reads() {
    use cluster_registry::Source;
    let metrics = Metrics::new();
    metrics.set_source_listed(&Source::KarmadaClusters, true);
    metrics.set_source_listed(&Source::ArgoCdSecrets("argocd".into()), false);
    metrics.set_source_listed(&Source::KubeconfigSecrets("capi".into()), true);
    let text = metrics.encode().unwrap();
    assert_lines(
        &text,
        &[
            r#"tether_member_source_listed{source="karmada",location=""} 1"#,
            r#"tether_member_source_listed{source="argocd",location="argocd"} 0"#,
            r#"tether_member_source_listed{source="kubeconfig",location="capi"} 1"#,
        ],
    );
}

/// `tether_member_info` labels by the flag, `collector check` by the definition's origin:
/// both must say the same of one member.
#[test]
fn a_member_has_one_source_label_in_metrics_and_in_check() {
    use cluster_registry::Origin;
    use member_client::CredentialKey;
    let secret = || CredentialKey::new("ns", "wl1-kubeconfig");
    for (flag, origin) in [
        (MembersFrom::Karmada, Origin::Karmada("m".into())),
        (MembersFrom::Argocd, Origin::ArgoCd(secret())),
        (MembersFrom::Directory, Origin::File("/m/m.yaml".into())),
        (MembersFrom::Capi, Origin::Kubeconfig(secret())),
        (MembersFrom::Kubeconfig, Origin::Kubeconfig(secret())),
        (
            MembersFrom::Clusterprofile,
            Origin::ClusterProfile(secret()),
        ),
    ] {
        assert_eq!(flag.source_kind(), origin.kind(), "{flag:?}");
    }
}
