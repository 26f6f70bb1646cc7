//! A member whose Cluster API kubeconfig Secret runs an exec credential plugin
//! (`e2e/plugins/tokenrequest-plugin.py`, 600 s TokenRequest tokens): the collector runs it
//! again ahead of expiry without a single 401, and when the ServiceAccount is deleted and
//! created again it meets the 401, runs the plugin again, retries and stays usable.

use std::time::Duration;

use e2e::{
    collector_run::RunningCollector,
    kubeconfig_plane::{
        CapiPlane, Kubeconfig, TokenRequestPlugin, plugin_path,
        read_api::{condition, member_metric, unix_now, wait_healthy},
    },
    limits::{PROBE, START},
    scenario::{AGENT, MEMBER},
};
use testkit::{Environment, REVOCATION_TIMEOUT, eventually, matching};
use tokio::time::Instant;

const CONVERGE: Duration = Duration::from_secs(15);
/// How long the refreshing collector is watched: about three refreshes at 1 % of 600 s.
const WATCHED: Duration = Duration::from_secs(20);
/// The lifetime of the plugin's tokens (its default `expirationSeconds`).
const TOKEN_LIFETIME: f64 = 600.0;

const UNAUTHORIZED: &str = "tether_unauthorized_responses_total";

/// `tether_credential_expiry_timestamp_seconds` of the member, minus now.
async fn expires_in(collector: &RunningCollector) -> f64 {
    let expiry = "tether_credential_expiry_timestamp_seconds";
    member_metric(collector, expiry, MEMBER).await - unix_now()
}

async fn exec_fetches(collector: &RunningCollector) -> f64 {
    let labels = "cache=\"members\",kind=\"exec\"";
    let fetches = collector.metric("tether_token_fetches_total", labels);
    fetches.await.unwrap()
}

/// Polls until `metric` of the member is at least `want`; returns how long that took.
async fn wait_metric_at_least(
    collector: &RunningCollector,
    metric: &str,
    want: f64,
    limit: Duration,
) -> Duration {
    let started = Instant::now();
    eventually(&format!("{metric} ≥ {want}"), limit, || async {
        let now = member_metric(collector, metric, MEMBER).await;
        matching(now, |now| *now >= want)
    })
    .await
    .unwrap();
    started.elapsed()
}

#[tokio::test]
async fn an_exec_member_is_refreshed_ahead_of_expiry_and_recovers_from_revocation()
-> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));
    let ns = member.create_namespace("agents").await?;
    member.create_service_account(&ns, AGENT).await?;
    let plugin = TokenRequestPlugin::for_service_account(member, &ns, AGENT)?;
    let command = plugin_path("tokenrequest-plugin.py")?;
    let plane = CapiPlane::create(control_plane).await?;
    plane
        .write(MEMBER, &Kubeconfig::exec(member, &command, plugin.env()))
        .await?;
    // The definition passes the plugin its variables; the operator's declaration accepts them.
    let declared = plugin.exec_plugins_file(&command)?;
    let allow = declared.display().to_string();

    // At 1 % of its remaining lifetime a 600 s token is fetched again after ~6 s.
    let exec = ["--exec-plugins", &allow];
    let fraction = ["--credential-refresh-fraction", "0.01"];
    let flags = [&exec[..], &fraction].concat();
    let mut refreshing = plane.source.start_collector(PROBE, &flags).await?;
    wait_healthy(&refreshing, MEMBER, START).await?;
    let first = plugin.runs().len();
    assert!(first >= 1, "the plugin ran to make the member Ready");
    let started = Instant::now();
    let mut samples = 0;
    while started.elapsed() < WATCHED {
        let ready = condition(&refreshing, MEMBER, "Ready").await.unwrap();
        let at = started.elapsed();
        assert_eq!(ready.short(), "True/MemberReady", "{at:?} in");
        let unauthorized = member_metric(&refreshing, UNAUTHORIZED, MEMBER).await;
        assert_eq!(unauthorized, 0.0, "a refresh ahead of expiry meets no 401");
        samples += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let runs = plugin.runs();
    let during = runs.len() - first;
    println!(
        "refresh fraction 0.01: {during} execs in {WATCHED:?} ({} in all, {samples} samples all \
         Ready, 0 unauthorized); runs at {runs:?}",
        runs.len()
    );
    assert!(
        during >= 2,
        "the plugin ran {during} times in {WATCHED:?}: no refresh ahead of expiry"
    );
    let fetches = exec_fetches(&refreshing).await;
    let ahead = expires_in(&refreshing).await;
    println!(
        "tether_token_fetches_total{{kind=\"exec\"}} = {fetches}; the credential expires in \
         {ahead:.0} s"
    );
    assert!(fetches >= during as f64, "{fetches} exec fetches");
    assert!(
        (TOKEN_LIFETIME - 30.0..=TOKEN_LIFETIME + 5.0).contains(&ahead),
        "expiry now + {ahead:.0} s, not ~{TOKEN_LIFETIME} s"
    );
    refreshing.stop().await;

    // Revocation. The default fraction keeps a token for minutes, so the one in use outlives
    // the apiserver's ~10 s cache of its authentication and meets the 401.
    let collector = plane.source.start_collector(PROBE, &exec).await?;
    wait_healthy(&collector, MEMBER, START).await?;
    let before = plugin.runs().len();
    assert_eq!(member_metric(&collector, UNAUTHORIZED, MEMBER).await, 0.0);
    member.delete_service_account(&ns, AGENT).await?;
    member.create_service_account(&ns, AGENT).await?;
    let recreated = Instant::now();
    let to_401 = wait_metric_at_least(&collector, UNAUTHORIZED, 1.0, REVOCATION_TIMEOUT).await;
    wait_metric_at_least(&collector, "tether_retries_total", 1.0, CONVERGE).await;
    wait_healthy(&collector, MEMBER, CONVERGE).await?;
    let healthy_after = recreated.elapsed();
    let after = plugin.runs().len();
    let unauthorized = member_metric(&collector, UNAUTHORIZED, MEMBER).await;
    let retries = member_metric(&collector, "tether_retries_total", MEMBER).await;
    println!(
        "ServiceAccount recreated: first 401 after {to_401:?}, Ready and CredentialsAccepted \
         again after {healthy_after:?}; execs {before} → {after}; {unauthorized} unauthorized, \
         {retries} retries"
    );
    assert!(after > before, "a 401 ran the plugin again");
    let fetches = exec_fetches(&collector).await;
    let ahead = expires_in(&collector).await;
    println!(
        "after the revocation: {fetches} exec fetches, the credential expires in {ahead:.0} s"
    );
    assert!(fetches >= 2.0, "{fetches} exec fetches");
    assert!(
        (TOKEN_LIFETIME - 60.0..=TOKEN_LIFETIME + 5.0).contains(&ahead),
        "expiry now + {ahead:.0} s, not ~{TOKEN_LIFETIME} s"
    );
    Ok(())
}
