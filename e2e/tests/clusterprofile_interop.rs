//! Tether publishes a ClusterProfile for every member (`--publish-clusterprofiles`), and a
//! client-go program no one here wrote (`e2e/interop/clusterprofile-client`) reaches a member
//! through it: its provider file maps the `tether` access provider to `tether-credential`,
//! which reads the member's Secret with the consumer's own, RBAC-scoped identity and returns
//! the token with an `expirationTimestamp`. So when the token is rotated in the Secret and the
//! old one revoked, client-go has already run the plugin again: its next request succeeds
//! without a restart, and its watch goes on.

use std::time::Duration;

use e2e::{
    clusterprofiles::{Consumer, grant_consumer, start_publishing},
    interop_client::{self, ProfileRef, is_added, is_list_with},
    limits::{HOUR, PROBE},
    scenario::{MEMBER, Scenario},
};
use testkit::karmada::SECRET_NAMESPACE;

const PUBLISHED: Duration = Duration::from_secs(30);
const INVENTORY: &str = "fleet";
/// The lifetime `tether-credential` gives the tokens it hands out here: client-go runs it again
/// that often.
const TTL: &str = "3s";

#[tokio::test]
async fn a_client_go_consumer_reaches_a_published_member_and_rides_out_a_rotation()
-> anyhow::Result<()> {
    let credential = testkit::locate_binary("tether-credential")?;
    let mut scenario = Scenario::start(1, PROBE).await?;
    let (_collector, profile) =
        start_publishing(&mut scenario, INVENTORY, MEMBER, PUBLISHED).await?;
    let control_plane = scenario.env.control_plane().clone();
    println!("published: {}", profile["status"]);

    // The consumer: its own ServiceAccount on the control plane, allowed to get the profile and
    // the member's Secret, and nothing else of either kind.
    let dir = tempfile::tempdir()?;
    let consumer =
        Consumer::create(&control_plane, dir.path(), &credential, &["--ttl", TTL]).await?;
    grant_consumer(
        &control_plane,
        INVENTORY,
        &[MEMBER],
        SECRET_NAMESPACE,
        &[MEMBER],
    )
    .await?;
    let profile_ref = ProfileRef {
        kubeconfig: &consumer.kubeconfig,
        namespace: INVENTORY,
        name: MEMBER,
        provider_file: &consumer.provider_file,
    };

    // 1. It lists the member's Deployments through tether-credential.
    scenario.create_deployment(1, "web", 1).await?;
    let ns = scenario.namespace.clone();
    let (web, after) = (format!("{ns}/web"), format!("{ns}/after"));
    let once = interop_client::command(&profile_ref, &["--once", "--namespace", &ns])?;
    let (status, lines, stderr) = interop_client::run(once).await?;
    assert!(status.success(), "{status}: {lines:?} {stderr}");
    assert!(is_list_with(&lines[0], &web), "{lines:?}");

    // 2. The token is rotated in the Secret and the old one revoked, while it lists every
    // 500 ms and watches.
    let watching = ["--namespace", &ns, "--list-interval", "500ms"];
    let mut running = interop_client::spawn(interop_client::command(&profile_ref, &watching)?)?;
    interop_client::until(&mut running, "synced", |l| l["kind"] == "synced").await?;
    let member = scenario.member(1).clone();
    let old_token = scenario.registered_tokens[0].clone();
    let new_token = member.mint_token(&ns, "agent-b", HOUR).await?;
    scenario
        .karmada
        .write_secret(MEMBER, &new_token, member.ca_pem())
        .await?;
    let revocation = member.revoke(&ns, "agent-a", &old_token).await?;
    scenario.create_deployment(1, "after", 1).await?;
    interop_client::until(&mut running, "ADDED after", |l| is_added(l, &after)).await?;
    interop_client::until(&mut running, "a list with after", |l| {
        is_list_with(l, &after)
    })
    .await?;
    let (status, seen, stderr) = running.stop().await?;
    println!(
        "the old token met 401 {revocation:?} after its ServiceAccount was deleted; {} lines \
         in all, none failed; stderr {stderr:?}",
        seen.len()
    );
    assert!(status.success(), "{status}: {stderr}");
    let failed: Vec<&String> = seen.iter().filter(|l| l.contains("\"ok\":false")).collect();
    assert_eq!(failed, [&""; 0], "a request failed across the rotation");
    for secret in [&old_token, &new_token, &consumer.token] {
        assert!(
            !seen.iter().any(|l| l.contains(secret.as_str())) && !stderr.contains(secret.as_str()),
            "a token was printed"
        );
    }
    Ok(())
}
