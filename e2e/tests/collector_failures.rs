//! The collector reports each failure with its own reason and heals when it is fixed; rotation
//! with the old token still valid costs no relist; its own rejected credential makes it
//! not ready, then exit.

use std::time::Duration;

use e2e::{
    collector_run::{RunningCollector, control_plane_args},
    limits::{HOUR, PROBE, START},
    manifest_apply::apply_object,
    scenario::{MEMBER, Scenario},
};
use testkit::{Environment, Karmada, REVOCATION_TIMEOUT, RestartOptions, eventually, matching};

const CONVERGE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn each_failure_has_its_own_reason_and_heals_when_fixed() -> anyhow::Result<()> {
    let mut s = Scenario::start(1, PROBE).await?;
    let ns = s.namespace.clone();
    s.wait(MEMBER, "Ready=True/MemberReady", START).await?;
    let token = s.member(1).mint_token(&ns, "agent-a", HOUR).await?;

    // Secret deleted.
    s.karmada.delete_secret(MEMBER).await?;
    for condition in ["CredentialsValid", "Ready"] {
        let want = format!("{condition}=False/SecretNotFound");
        s.wait(MEMBER, &want, CONVERGE).await?;
    }

    // Secret holds garbage: an empty token and a CA that is not PEM.
    s.karmada
        .write_secret(MEMBER, "   ", "not a certificate")
        .await?;
    s.wait(MEMBER, "CredentialsValid=False/SecretInvalid", CONVERGE)
        .await?;

    // Fixed. The member's client is rebuilt, so its watches list again: that is what the relist
    // counter counts (and what the rotation test asserts stays flat).
    let ca = s.member(1).ca_pem().to_owned();
    s.karmada.write_secret(MEMBER, &token, &ca).await?;
    s.karmada.wait_healthy(MEMBER, CONVERGE).await?;
    assert!(s.metric("tether_relists_total", MEMBER).await? >= 1.0);

    // Unreachable: an outage is not an auth failure.
    s.env.stop(1).await?;
    s.wait(MEMBER, "Ready=False/Unreachable", CONVERGE).await?;
    let valid = s.karmada.condition(MEMBER, "CredentialsValid").await?;
    let unknown = ("Unknown".to_owned(), "Unreachable".to_owned());
    assert_eq!(valid, Some(unknown));
    s.env.start(1).await?;
    s.wait(MEMBER, "Ready=True/MemberReady", CONVERGE).await?;

    // CA rotated on the member: the Secret's CA no longer verifies it until the Secret is updated.
    s.env.restart(1, RestartOptions::new_ca()).await?;
    s.wait(MEMBER, "Ready=False/Unreachable", CONVERGE).await?;
    let new_ca = s.env.cluster(1).ca_pem().to_owned();
    assert_ne!(new_ca, ca);
    s.karmada.write_secret(MEMBER, &token, &new_ca).await?;
    s.karmada.wait_healthy(MEMBER, CONVERGE).await?;
    Ok(())
}

#[tokio::test]
async fn rotation_with_the_old_token_still_valid_costs_no_relist_and_misses_nothing()
-> anyhow::Result<()> {
    let s = Scenario::start(1, PROBE).await?;
    let ns = s.namespace.clone();
    s.create_deployment(1, "web", 1).await?;
    s.wait_mirrored("member1", "web", 1, START).await?;
    let relists_before = s.metric("tether_relists_total", "member1").await?;

    let new_token = s.member(1).mint_token(&ns, "agent-b", HOUR).await?;
    s.karmada
        .write_secret("member1", &new_token, s.member(1).ca_pem())
        .await?;
    for ready in [2, 3] {
        s.set_ready(1, "web", ready).await?;
    }
    s.create_deployment(1, "api", 2).await?;
    s.wait_mirrored("member1", "web", 3, CONVERGE).await?;
    s.wait_mirrored("member1", "api", 2, CONVERGE).await?;
    eventually("the rotation's first use is recorded", CONVERGE, || async {
        let uses = s
            .collector
            .metric("tether_rotation_to_use_seconds_count", "");
        matching(uses.await.unwrap(), |uses| *uses >= 1.0)
    })
    .await?;

    // The new token is what the member now gets: revoking the old one changes nothing, even
    // once the apiserver has let the old token go and two more probes have run.
    let old = s.registered_tokens[0].clone();
    s.member(1).revoke(&ns, "agent-a", &old).await?;
    s.member(1)
        .wait_until_unauthorized(&old, REVOCATION_TIMEOUT)
        .await?;
    tokio::time::sleep(2 * PROBE).await;
    let valid = s.karmada.condition("member1", "CredentialsValid").await;
    assert_eq!(valid?.unwrap().0, "True");
    s.set_ready(1, "web", 1).await?;
    s.wait_mirrored("member1", "web", 1, CONVERGE).await?;

    let relists_after = s.metric("tether_relists_total", "member1").await?;
    assert_eq!(
        relists_after, relists_before,
        "a rotation must not cost a relist"
    );
    Ok(())
}

#[tokio::test]
async fn own_credential_rejected_fails_readyz_at_once_then_exits_non_zero() -> anyhow::Result<()> {
    let env = Environment::with_members(0).await?;
    let control_plane = env.control_plane().clone();
    Karmada::install(&control_plane).await?;
    let ns = control_plane.create_namespace("tether-system").await?;
    control_plane
        .create_service_account(&ns, "collector")
        .await?;
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": "tether-collector-e2e" },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin",
        },
        "subjects": [{ "kind": "ServiceAccount", "name": "collector", "namespace": ns }],
    });
    apply_object(&control_plane.admin_client()?, &binding).await?;
    let token = control_plane.mint_token(&ns, "collector", HOUR).await?;

    let grace = Duration::from_secs(3);
    let mut args = control_plane_args(&control_plane, &token)?;
    args.extend([
        "--probe-period".to_owned(),
        PROBE.as_secs().to_string(),
        "--self-rejected-grace".to_owned(),
        grace.as_secs().to_string(),
        "--leader-election-namespace".to_owned(),
        ns.clone(),
    ]);
    let mut collector = RunningCollector::start(&args).await?;
    eventually("ready", START, || async {
        matching(collector.get("/readyz").await.unwrap().0, |s| *s == 200)
    })
    .await?;

    // The collector's ServiceAccount is deleted; its token file still holds the dead token.
    control_plane.revoke(&ns, "collector", &token).await?;
    let revoked = tokio::time::Instant::now();
    let limit = 2 * PROBE + Duration::from_secs(2);
    let body = eventually("/readyz fails", limit, || async {
        match collector.get("/readyz").await.unwrap() {
            (503, body) => Ok(body),
            (status, _) => Err(format!("/readyz still {status}")),
        }
    })
    .await?;
    assert!(body.contains("rejected"), "{body}");
    eprintln!(
        "/readyz failed {:?} after the revocation was observable",
        revoked.elapsed()
    );

    let ended = collector
        .wait_for_exit(grace + Duration::from_secs(10))
        .await?;
    let err = ended.expect_err("the collector must exit with an error");
    assert!(format!("{err:#}").contains("rejected"), "{err:#}");
    Ok(())
}
