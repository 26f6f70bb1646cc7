//! Nothing goes blind while it looks healthy: a member that stops answering turns unready, a
//! frozen control plane holds up no member, a member whose identity may not list what is
//! mirrored is not Ready, and a restarting member is no refusal.

use std::time::{Duration, Instant};

use e2e::{
    collector_run::RunningCollector,
    kubeconfig_plane::read_api::wait_condition,
    limits::{HOUR, PROBE, START},
    scenario::{Scenario, events_about},
};
use testkit::RestartOptions;

const PROBE_TIMEOUT: &str = "2";
const CONVERGE: Duration = Duration::from_secs(15);

/// `Ready` and `CredentialsValid` of `member` on the read API, as `status/reason` pairs.
async fn conditions(collector: &RunningCollector, member: &str) -> Option<(String, String)> {
    let path = format!("/api/v1/clusters/{member}");
    let cluster = collector.get_json(&path).await.ok()?;
    let pick = |i: usize| {
        let c = &cluster["conditions"][i];
        format!(
            "{}/{}",
            c["status"].as_str().unwrap_or_default(),
            c["reason"].as_str().unwrap_or_default()
        )
    };
    Some((pick(0), pick(1)))
}

/// Polls the read API until `member`'s `Ready` is `ready` (`status/reason`); returns how long
/// that took.
async fn wait_ready_api(s: &Scenario, member: &str, ready: &str, limit: Duration) -> Duration {
    let waited = wait_condition(&s.collector, member, "Ready", ready, limit).await;
    waited.unwrap().0
}

#[tokio::test]
async fn a_frozen_member_turns_unready_and_resumes_without_relist_when_it_thaws()
-> anyhow::Result<()> {
    let s = Scenario::start_with(2, PROBE, &["--probe-timeout", PROBE_TIMEOUT]).await?;
    s.create_deployment(1, "web", 1).await?;
    s.wait_mirrored("member1", "web", 1, START).await?;
    wait_ready_api(&s, "member2", "True/MemberReady", START).await;
    let relists = s.metric("tether_relists_total", "member1").await?;

    s.env.apiserver(1).unwrap().freeze()?;
    let took = wait_ready_api(&s, "member1", "False/Unreachable", Duration::from_secs(10)).await;
    println!(
        "member1 frozen → Ready=False/Unreachable in {took:?} (probe period 1 s, probe timeout 2 s)"
    );
    assert!(took <= Duration::from_secs(5), "{took:?}");
    let (_, credentials) = conditions(&s.collector, "member1").await.unwrap();
    assert_eq!(credentials, "Unknown/Unreachable");
    assert_eq!(
        conditions(&s.collector, "member2").await.unwrap().0,
        "True/MemberReady",
        "another member is not held up"
    );

    s.env.apiserver(1).unwrap().thaw()?;
    wait_ready_api(&s, "member1", "True/MemberReady", CONVERGE).await;
    s.set_ready(1, "web", 3).await?;
    s.wait_mirrored("member1", "web", 3, CONVERGE).await?;
    assert_eq!(
        s.metric("tether_relists_total", "member1").await?,
        relists,
        "the watches resumed where they were"
    );
    Ok(())
}

#[tokio::test]
async fn a_frozen_control_plane_holds_up_no_member() -> anyhow::Result<()> {
    // Readers of the API are reviewed by the control plane, which fails closed while frozen:
    // this test reads what the collector sees, so it serves the API without reviews.
    let flags = ["--probe-timeout", PROBE_TIMEOUT, "--insecure-serve-api"];
    let mut s = Scenario::start_with(2, PROBE, &flags).await?;
    s.karmada.wait_healthy("member1", START).await?;
    s.karmada.wait_healthy("member2", START).await?;

    // Status writes now hang until their deadline; probes and the read API must not.
    s.env.apiserver(0).unwrap().freeze()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.env.stop(2).await?;
    let took = wait_ready_api(&s, "member2", "False/Unreachable", Duration::from_secs(10)).await;
    println!("control plane frozen; member2 stopped → Unreachable on the read API in {took:?}");
    assert_eq!(
        conditions(&s.collector, "member1").await.unwrap().0,
        "True/MemberReady"
    );

    // Thawed, the control plane gets the status it missed.
    s.env.apiserver(0).unwrap().thaw()?;
    s.wait("member2", "Ready=False/Unreachable", CONVERGE)
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_member_whose_identity_may_not_list_what_is_mirrored_is_forbidden_not_ready()
-> anyhow::Result<()> {
    let mut s = Scenario::start_healthy(1, PROBE).await?;

    // Rotate to an identity without any binding; the member's restart makes every watch start
    // again under it. /readyz stays open to it (system:public-info-viewer).
    let ns = s.namespace.clone();
    let member = s.member(1);
    member
        .create_unbound_service_account(&ns, "agent-unbound")
        .await?;
    let token = member.mint_token(&ns, "agent-unbound", HOUR).await?;
    let ca = member.ca_pem().to_owned();
    s.karmada.write_secret("member1", &token, &ca).await?;
    s.env.restart(1, RestartOptions::default()).await?;

    s.wait("member1", "Ready=False/Forbidden", Duration::from_secs(30))
        .await?;
    let conditions = s.karmada.conditions("member1").await?;
    let find = |type_| conditions.iter().find(|c| c.type_ == type_).unwrap();
    let ready = find("Ready");
    assert!(
        ready.message.contains("may not") && ready.message.contains("apps/v1/deployments"),
        "{}",
        ready.message
    );
    let credentials = find("CredentialsValid");
    assert_eq!(
        (credentials.status.as_str(), credentials.reason.as_str()),
        ("True", "CredentialsAccepted"),
        "a 403 says the credential was accepted"
    );
    Ok(())
}

#[tokio::test]
async fn a_restarting_member_with_a_valid_token_is_never_a_rejected_credential()
-> anyhow::Result<()> {
    let mut s = Scenario::start_healthy(1, PROBE).await?;

    let (collector, env) = (&s.collector, &mut s.env);
    let sampling = async {
        let mut samples = Vec::new();
        let until = Instant::now() + Duration::from_secs(25);
        while Instant::now() < until {
            if let Some(now) = conditions(collector, "member1").await
                && samples.last() != Some(&now)
            {
                samples.push(now);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        samples
    };
    let (samples, restarted) = tokio::join!(sampling, async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        env.restart(1, RestartOptions::default()).await
    });
    restarted?;
    println!("conditions of member1 through a restart (Ready, CredentialsValid): {samples:?}");
    assert!(
        samples
            .iter()
            .all(|(_, credentials)| !credentials.starts_with("False")),
        "{samples:?}"
    );
    assert_eq!(
        samples.last().unwrap(),
        &(
            "True/MemberReady".to_owned(),
            "True/CredentialsAccepted".to_owned()
        ),
        "{samples:?}"
    );
    let events = events_about(s.karmada.client(), None, "member1").await;
    let refusals: Vec<_> = (events?.iter())
        .filter(|e| {
            let reason = e.reason.as_deref();
            matches!(reason, Some("Forbidden" | "Unauthorized" | "MirrorFailing"))
        })
        .map(|e| e.note.clone())
        .collect();
    assert!(refusals.is_empty(), "{refusals:?}");
    Ok(())
}
