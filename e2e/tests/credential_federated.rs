//! Secretless members: every member apiserver trusts the control plane's ServiceAccount
//! issuer, and the collector reaches each with a token the control plane mints for the
//! collector's own ServiceAccount and that member's audience. No member credential is stored
//! anywhere: the Clusters' `secretRef` names a Secret that does not exist.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use e2e::{
    collector_run::{RunningCollector, admin_args, collector_check, start_probing},
    kubeconfig_plane::read_api::{
        create_and_wait_mirrored, member_metric, sample_ready, wait_condition, wait_healthy,
    },
    limits::{PROBE, START},
    scenario::karmada_environment_from,
};
use testkit::{CONTROL_PLANE, Environment, Karmada};

const AUDIENCE_PREFIX: &str = "tether.io/member/";
const USERNAME_PREFIX: &str = "tether:";
/// The collector's own ServiceAccount on the control plane.
const COLLECTOR_NAMESPACE: &str = "tether-system";
const COLLECTOR_ACCOUNT: &str = "tether";
/// Minted tokens live 600 s, the least TokenRequest grants; at this fraction of that the
/// cache mints again (every 6 s), so a short run sees many refreshes.
const REFRESH_FRACTION: &str = "0.01";
/// How long the fleet runs on short-lived tokens; `TETHER_FEDERATED_SOAK_SECONDS` sets it
/// (600 for the ten-minute soak).
const SOAK_DEFAULT: Duration = Duration::from_secs(90);
/// How long a change may take to show: the member's authentication-config reload (~10 s),
/// then a probe, a refresh and its retry.
const CONVERGE: Duration = Duration::from_secs(45);

/// Two members trusting the control plane, a Karmada `Cluster` for each asking for a
/// federated credential, and the namespace `fleet` on each member.
async fn federated_fleet() -> anyhow::Result<(Environment, Karmada)> {
    let config = testkit::Config::default()
        .members(2)
        .members_trust_control_plane(AUDIENCE_PREFIX, USERNAME_PREFIX);
    let (env, karmada) = karmada_environment_from(config).await?;
    let control_plane = env.control_plane();
    control_plane
        .create_unbound_service_account(COLLECTOR_NAMESPACE, COLLECTOR_ACCOUNT)
        .await?;
    let user =
        format!("{USERNAME_PREFIX}system:serviceaccount:{COLLECTOR_NAMESPACE}:{COLLECTOR_ACCOUNT}");
    for member in env.members() {
        member.grant_reader_to_user(&user).await?;
        member.create_namespace_named("fleet").await?;
        let annotations = BTreeMap::from([
            ("tether.io/credential".to_owned(), "federated".to_owned()),
            ("tether.io/ca-bundle".to_owned(), member.ca_pem().to_owned()),
        ]);
        karmada
            .create_cluster(
                member.name(),
                member.endpoint(),
                "no-such-secret",
                false,
                &annotations,
            )
            .await?;
    }
    Ok((env, karmada))
}

/// A collector minting federated tokens as its own ServiceAccount, refreshing them at
/// `refresh_fraction` of their lifetime.
async fn federated_collector(
    env: &Environment,
    refresh_fraction: &str,
) -> anyhow::Result<RunningCollector> {
    let account = format!("{COLLECTOR_NAMESPACE}/{COLLECTOR_ACCOUNT}");
    let flags = [
        "--federated-service-account",
        &account,
        "--credential-refresh-fraction",
        refresh_fraction,
    ];
    start_probing(env.control_plane(), &[], PROBE, &flags).await
}

/// TokenRequests the control plane has served.
async fn token_requests(env: &Environment) -> anyhow::Result<f64> {
    let metrics = env.control_plane().metrics().await?;
    Ok(metrics.sum(
        "apiserver_request_total",
        r#"verb="POST",resource="serviceaccounts",subresource="token",code="201""#,
    ))
}

/// Federated tokens the collector minted, and loads that gave none.
async fn federated_loads(collector: &RunningCollector) -> anyhow::Result<(f64, f64)> {
    let minted = collector
        .metric(
            "tether_token_fetches_total",
            r#"cache="members",kind="federated""#,
        )
        .await?;
    let failed = collector
        .metric("tether_token_fetch_failures_total", r#"cache="members""#)
        .await?;
    Ok((minted.abs(), failed.abs()))
}

/// `collector check` of the fleet, as the collector under test reads it: its JSON report.
async fn check(env: &Environment) -> anyhow::Result<serde_json::Value> {
    let account = format!("{COLLECTOR_NAMESPACE}/{COLLECTOR_ACCOUNT}");
    let flags = [
        admin_args(env.control_plane())?,
        vec!["--federated-service-account".to_owned(), account],
    ]
    .concat();
    Ok(collector_check(&flags, CONVERGE).await?.report)
}

/// The row of `member` in a check report.
fn check_row<'a>(report: &'a serde_json::Value, member: &str) -> &'a serde_json::Value {
    let rows = report["members"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    rows.iter()
        .find(|row| row["name"] == member)
        .unwrap_or_else(|| panic!("no row for {member}: {report:#}"))
}

fn soak() -> Duration {
    std::env::var("TETHER_FEDERATED_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(SOAK_DEFAULT, Duration::from_secs)
}

#[tokio::test]
async fn a_federated_fleet_mirrors_on_short_lived_tokens_with_one_token_request_each()
-> anyhow::Result<()> {
    let (env, _karmada) = federated_fleet().await?;
    let collector = federated_collector(&env, REFRESH_FRACTION).await?;
    for (i, member) in env.members().iter().enumerate() {
        wait_healthy(&collector, member.name(), START).await?;
        let name = format!("before-{i}");
        create_and_wait_mirrored(&collector, (member, member.name()), "fleet", &name, START)
            .await?;
    }

    // A token for member1's audience opens member1 only.
    let control_plane = env.control_plane();
    let audience = vec![format!("{AUDIENCE_PREFIX}member1")];
    let member1_token = control_plane
        .mint_token_for(
            COLLECTOR_NAMESPACE,
            COLLECTOR_ACCOUNT,
            testkit::MIN_TOKEN_EXPIRY,
            &audience,
        )
        .await?;
    let user = env
        .cluster(1)
        .authenticated_username(&member1_token)
        .await?;
    assert_eq!(
        user.as_deref(),
        Some("tether:system:serviceaccount:tether-system:tether")
    );
    let elsewhere = env
        .cluster(2)
        .authenticated_username(&member1_token)
        .await?;
    assert_eq!(elsewhere, None, "member2 rejects member1's token (401)");

    let (requests_before, loads_before) = (
        token_requests(&env).await?,
        federated_loads(&collector).await?,
    );
    let window = soak();
    let done = AtomicBool::new(false);
    let soaked = async {
        tokio::time::sleep(window).await;
        for (i, member) in env.members().iter().enumerate() {
            let name = format!("after-{i}");
            create_and_wait_mirrored(&collector, (member, member.name()), "fleet", &name, START)
                .await
                .unwrap();
        }
        done.store(true, Ordering::Relaxed);
    };
    let (samples1, samples2, ()) = tokio::join!(
        sample_ready(&collector, "member1", &done),
        sample_ready(&collector, "member2", &done),
        soaked
    );
    let requests = token_requests(&env).await? - requests_before;
    let (minted, failed) = federated_loads(&collector).await?;
    let (minted, failed) = (minted - loads_before.0, failed - loads_before.1);
    println!(
        "{window:?} on 600 s tokens refreshed at {REFRESH_FRACTION} of their lifetime: {minted} \
         tokens minted, {failed} loads that gave none, {requests} TokenRequests granted; Ready \
         of member1 {samples1:?}, of member2 {samples2:?}"
    );
    for samples in [&samples1, &samples2] {
        assert_eq!(samples, &["True/MemberReady"], "never anything but Ready");
    }
    // Each member mints about every 6 s: far more than one token per member.
    let expected = 2.0 * window.as_secs_f64() / 6.0;
    assert!(minted >= expected / 2.0, "{minted} tokens in {window:?}");
    // The two counters are read one after the other, at the start and at the end, while each
    // member may have one load in flight (loads are single-flight): they may differ by that
    // much, never by a request per refresh.
    let in_flight = 2.0 * env.members().len() as f64;
    assert!(
        (requests - minted).abs() <= in_flight,
        "one granted TokenRequest per token used: {requests} granted, {minted} minted"
    );
    for member in ["member1", "member2"] {
        for metric in [
            "tether_relists_total",
            "tether_unauthorized_responses_total",
            "tether_retries_total",
        ] {
            assert_eq!(
                member_metric(&collector, metric, member).await,
                0.0,
                "{metric} of {member}"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_member_that_stops_trusting_the_issuer_is_rejected_and_heals_when_it_trusts_again()
-> anyhow::Result<()> {
    let (mut env, _karmada) = federated_fleet().await?;
    let collector = federated_collector(&env, REFRESH_FRACTION).await?;
    for member in env.members() {
        wait_healthy(&collector, member.name(), START).await?;
    }

    let checked = check(&env).await?;
    for member in ["member1", "member2"] {
        let row = check_row(&checked, member);
        assert_eq!(row["reason"], "MemberReady", "{row:#}");
        assert_eq!(
            row["whoami"]["user"], "tether:system:serviceaccount:tether-system:tether",
            "{row:#}"
        );
    }

    let done = AtomicBool::new(false);
    let distrust = async {
        env.set_member_trust(1, false).await.unwrap();
        let (took, _) = wait_condition(
            &collector,
            "member1",
            "Ready",
            "False/Unauthorized",
            CONVERGE,
        )
        .await
        .unwrap();
        wait_condition(
            &collector,
            "member1",
            "CredentialsValid",
            "False/Unauthorized",
            PROBE * 3,
        )
        .await
        .unwrap();
        println!("member1 reported Unauthorized {took:?} after it stopped trusting the issuer");
        done.store(true, Ordering::Relaxed);
    };
    let (distrusted, ()) = tokio::join!(sample_ready(&collector, "member1", &done), distrust);
    println!("Ready of member1 while it stopped trusting: {distrusted:?}");
    assert!(
        distrusted.iter().all(|s| !s.contains("Unreachable")),
        "a rejected credential is never reported as unreachable: {distrusted:?}"
    );
    wait_healthy(&collector, "member2", PROBE * 3).await?;
    let mut checked = check(&env).await?;
    // NB: now and then a fresh client's concurrent requests, all answered 401 and retried,
    // end with hyper's "dispatch task is gone" on the member's new HTTP/2 connection, and
    // the check says Unreachable; the collector's own long-lived clients have not shown it.
    // Until that is understood, such a run is repeated once, and says so.
    if check_row(&checked, "member1")["readyz"]["detail"]
        .as_str()
        .is_some_and(|detail| detail.contains("dispatch task is gone"))
    {
        println!("check again: {:#}", check_row(&checked, "member1"));
        checked = check(&env).await?;
    }
    let rejected = check_row(&checked, "member1");
    assert_eq!(rejected["reason"], "Unauthorized", "{rejected:#}");
    assert_eq!(rejected["whoami"]["error"], "credential rejected (401)");
    let remedy = rejected["remedy"].as_str().unwrap_or_default();
    assert!(remedy.contains("AuthenticationConfiguration"), "{remedy}");
    assert_eq!(check_row(&checked, "member2")["reason"], "MemberReady");

    env.set_member_trust(1, true).await?;
    let healed = wait_healthy(&collector, "member1", CONVERGE).await?;
    println!("member1 healed {healed:?} after it trusted the issuer again");
    Ok(())
}

#[tokio::test]
async fn a_signing_key_rotation_done_in_two_steps_keeps_every_federated_member_ready()
-> anyhow::Result<()> {
    let (mut env, _karmada) = federated_fleet().await?;
    // The default refresh (5 minutes): the rotation is over before any token is replaced,
    // so what it shows is the tokens already handed out staying valid through it.
    let collector = federated_collector(&env, "0.8").await?;
    for member in env.members() {
        wait_healthy(&collector, member.name(), START).await?;
    }

    let done = AtomicBool::new(false);
    let rotation = async {
        // Publish the new key while still signing with the old one; the members' cached key
        // sets expire (an hour in a fleet; refreshed here); then sign with the new key.
        env.publish_signing_key(CONTROL_PLANE).await.unwrap();
        for member in 1..=2 {
            env.refresh_member_keys(member).await.unwrap();
        }
        env.switch_signing_key(CONTROL_PLANE).await.unwrap();
        done.store(true, Ordering::Relaxed);
    };
    let (samples1, samples2, ()) = tokio::join!(
        sample_ready(&collector, "member1", &done),
        sample_ready(&collector, "member2", &done),
        rotation
    );
    println!("through the rotation, member1 {samples1:?}, member2 {samples2:?}");
    for samples in [&samples1, &samples2] {
        assert_eq!(samples, &["True/MemberReady"], "Ready throughout");
    }

    // Tokens signed with the new key: a collector that starts now mints only those.
    drop(collector);
    let fresh = federated_collector(&env, "0.8").await?;
    for member in env.members() {
        wait_healthy(&fresh, member.name(), START).await?;
        assert_eq!(
            member_metric(&fresh, "tether_unauthorized_responses_total", member.name()).await,
            0.0
        );
    }
    Ok(())
}
