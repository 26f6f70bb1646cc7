//! The collector against real apiservers, Karmada-style: the failure this project exists for,
//! red then green, and the KAI-Scheduler incident reported loudly.

use std::time::Duration;

use e2e::{
    informer::Informer,
    limits::HOUR,
    scenario::{Scenario, events_about},
};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use testkit::{REVOCATION_TIMEOUT, RestartOptions};

/// The probe period the collector runs with in these tests.
const PROBE: Duration = Duration::from_secs(1);
/// Start-up: the registry lists, the member client connects, the watches list.
const START: Duration = Duration::from_secs(30);
/// The bound the issue sets for convergence after a rotation.
const CONVERGE: Duration = Duration::from_secs(10);

/// Whether the collector wrote an `Unauthorized` Event about `member`.
async fn unauthorized_reported(s: &Scenario, member: &str) -> bool {
    let events = events_about(s.karmada.client(), None, member).await;
    let mut reasons = events.unwrap().into_iter().filter_map(|e| e.reason);
    reasons.any(|reason| reason == "Unauthorized")
}

#[tokio::test]
async fn rotation_revocation_and_restart_red_for_baked_in_green_for_the_collector()
-> anyhow::Result<()> {
    let mut s = Scenario::start(1, PROBE).await?;
    let member = s.member(1).clone();
    let ns = s.namespace.clone();
    s.create_deployment(1, "web", 1).await?;
    s.wait_mirrored("member1", "web", 1, START).await?;
    s.karmada.wait_healthy("member1", START).await?;

    let old_token = member.mint_token(&ns, "agent-a", HOUR).await?;
    // A Deployment informer with the token baked in at start, as Karmada's was before PR #7663.
    let baked_in = member.client_with_token(&old_token)?;
    let baked = Informer::start(Api::<Deployment>::namespaced(baked_in, &ns));

    // Rotate: the Secret gets agent-b's token, agent-a is revoked, and the member apiserver
    // restarts so that every watch must reconnect.
    let new_token = member.mint_token(&ns, "agent-b", HOUR).await?;
    s.karmada
        .write_secret("member1", &new_token, member.ca_pem())
        .await?;
    member.revoke(&ns, "agent-a", &old_token).await?;
    s.env.restart(1, RestartOptions::default()).await?;
    s.set_ready(1, "web", 3).await?;

    let took = s.wait_mirrored("member1", "web", 3, CONVERGE).await?;
    eprintln!("collector mirrored the post-rotation status in {took:?}");
    // A probe that ran while member1 was down rightly said Unreachable, and the watches can be
    // back before the next probe, so the conditions are awaited rather than read. What must never
    // appear is an auth failure: the collector used the new token before the old one died.
    s.karmada.wait_healthy("member1", CONVERGE).await?;
    let refused = s
        .collector
        .metric("tether_watch_errors_total", r#"kind="unauthorized""#);
    assert_eq!(
        refused.await?,
        0.0,
        "no watch was refused after the rotation"
    );
    let reported = unauthorized_reported(&s, "member1").await;
    assert!(!reported, "member1 was never reported Unauthorized");

    // Red: the baked-in informer, given as long again, still shows the old value.
    tokio::time::sleep(CONVERGE).await;
    assert_ne!(
        baked
            .find("web")
            .and_then(|d| d.status.as_ref()?.ready_replicas),
        Some(3),
        "a baked-in token cannot follow the rotation"
    );
    let err = Api::<Deployment>::namespaced(member.client_with_token(&old_token)?, &ns)
        .get("web")
        .await
        .unwrap_err();
    assert_eq!(testkit::status_code(&err), Some(401), "{err}");
    Ok(())
}

#[tokio::test]
async fn service_account_recreated_is_reported_unauthorized_and_healed_by_the_secret()
-> anyhow::Result<()> {
    let probe = Duration::from_secs(2);
    let s = Scenario::start(2, probe).await?;
    let member = s.member(1).clone();
    let ns = s.namespace.clone();
    for name in ["member1", "member2"] {
        s.wait(name, "Ready=True/MemberReady", START).await?;
    }

    // The KAI-Scheduler incident: delete and recreate the ServiceAccount; the Secret still holds
    // a token of the old one. Wait until the apiserver's token cache lets that token go (~10 s);
    // from then on the collector has two probe periods to say so.
    let stale = s.registered_tokens[0].clone();
    member
        .recreate_service_account(&ns, "agent-a", &stale)
        .await?;
    member
        .wait_until_unauthorized(&stale, REVOCATION_TIMEOUT)
        .await?;
    let limit = 2 * probe + Duration::from_secs(1);
    let took = s.wait("member1", "CredentialsValid=False/Unauthorized", limit);
    let took = took.await?;
    eprintln!("CredentialsValid=False/Unauthorized {took:?} after the revocation was observable");
    s.wait("member1", "Ready=False/Unauthorized", CONVERGE)
        .await?;

    // Loud: an Event on the Cluster (recorded once the status is written), and /metrics.
    let started = std::time::Instant::now();
    testkit::eventually(
        "an Unauthorized Event on Cluster member1",
        CONVERGE,
        || async { unauthorized_reported(&s, "member1").await },
    )
    .await?;
    eprintln!(
        "the Unauthorized Event {:?} after the condition",
        started.elapsed()
    );
    assert_eq!(s.metric("tether_credential_state", "member1").await?, 1.0);
    let (_, metrics) = s.collector.get("/metrics").await?;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("tether_credential_state{")
                && l.contains("member=\"member1\"")
                && l.contains("state=\"unauthorized\"")
                && l.ends_with(" 1")),
        "credential state unauthorized in /metrics:\n{metrics}"
    );
    let unauthorized = s.metric("tether_unauthorized_responses_total", "member1");
    assert!(unauthorized.await? >= 1.0);

    // The other member is unaffected.
    let ready = s.karmada.condition("member2", "Ready").await;
    assert_eq!(ready?.unwrap().0, "True");

    // Writing a valid token into the Secret heals it, without a restart.
    let fresh = member.mint_token(&ns, "agent-a", HOUR).await?;
    s.karmada
        .write_secret("member1", &fresh, member.ca_pem())
        .await?;
    s.karmada.wait_healthy("member1", CONVERGE).await?;
    Ok(())
}
