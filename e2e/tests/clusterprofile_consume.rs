//! The collector reads members from ClusterProfiles shaped the way OCM publishes them
//! (`--members-from clusterprofile`), reaching each through the provider file's plugin, a
//! copy of upstream's `secretreader` that returns tokens without expiry. It survives a
//! rotation through the 401 path; profiles no provider serves, or that are malformed, get a
//! reason of their own and leave the others alone.

use std::time::Duration;

use e2e::{
    kubeconfig_plane::read_api::{self, condition, wait_condition, wait_healthy},
    limits::{HOUR, PROBE, START},
    profile_plane::{ProfilePlane, ocm_access_provider},
    scenario::{AGENT, MEMBER, one_member_with_agent},
};
use serde_json::json;
use testkit::{REVOCATION_TIMEOUT, eventually, matching};
use tokio::time::Instant;

const CONVERGE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn ocm_profiles_become_members_that_survive_rotation_through_the_401_path()
-> anyhow::Result<()> {
    let (env, ns, old_token) = one_member_with_agent().await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));

    let plane = ProfilePlane::create(control_plane).await?;
    plane.write_token(MEMBER, &old_token).await?;
    plane.publish(MEMBER, member, None).await?;
    // A profile offering only a provider the file does not serve, and one whose provider
    // names a CA file, which a profile may not make Tether read.
    let elsewhere = json!([{"name": "gke-fleet", "cluster": {"server": member.endpoint()}}]);
    plane.publish("member2", member, Some(elsewhere)).await?;
    let mut file_ca = ocm_access_provider("member3", member);
    file_ca["cluster"]["certificate-authority"] = json!("/etc/kubernetes/pki/ca.crt");
    let file_ca = Some(json!([file_ca]));
    plane.publish("member3", member, file_ca).await?;

    // No --allow-exec: the provider file's command is the allow-list.
    let collector = plane.source.start_collector(PROBE, &[]).await?;
    wait_healthy(&collector, MEMBER, START).await?;
    let ready = |name, want| wait_condition(&collector, name, "Ready", want, CONVERGE);
    let (_, unserved) = ready("member2", "False/ProviderNotFound").await?;
    println!("member2: {}", unserved.message);
    assert!(
        unserved.message.contains("gke-fleet")
            && unserved.message.contains("open-cluster-management"),
        "{unserved:?}"
    );
    let (_, malformed) = ready("member3", "False/DefinitionInvalid").await?;
    assert!(
        malformed.message.contains("certificate-authority"),
        "{malformed:?}"
    );
    let mirrored =
        read_api::create_and_wait_mirrored(&collector, (member, MEMBER), &ns, "before", CONVERGE)
            .await?;
    println!("a new Deployment was mirrored in {mirrored:?}");
    let runs_before = plane.plugin_runs();
    assert!(runs_before >= 1, "the plugin ran to make the member Ready");

    // Rotation as a secretreader user does it: the new token goes into the Secret (which the
    // collector does not watch: the plugin reads it), then the old one is revoked.
    let new_token = member.mint_token(&ns, "rotated", HOUR).await;
    assert!(new_token.is_err(), "no ServiceAccount `rotated` yet");
    member.create_service_account(&ns, "rotated").await?;
    let new_token = member.mint_token(&ns, "rotated", HOUR).await?;
    plane.write_token(MEMBER, &new_token).await?;
    let revoked = Instant::now();
    member.revoke(&ns, AGENT, &old_token).await?;
    let metric = |name: &'static str| read_api::member_metric(&collector, name, MEMBER);
    let limit = REVOCATION_TIMEOUT + CONVERGE;
    eventually("the revoked token meets a 401", limit, || async {
        let unauthorized = metric("tether_unauthorized_responses_total").await;
        matching(unauthorized, |n| *n >= 1.0)
    })
    .await?;
    let to_401 = revoked.elapsed();
    // The 401 invalidates the token: the plugin runs again, reads the rotated Secret, and the
    // rejected request is retried with what it returned.
    let what = format!("after the 401, more plugin runs than {runs_before} and a retry");
    eventually(&what, CONVERGE, || async {
        let now = (plane.plugin_runs(), metric("tether_retries_total").await);
        matching(now, |(runs, retries)| {
            *runs > runs_before && *retries >= 1.0
        })
    })
    .await?;
    wait_healthy(&collector, MEMBER, CONVERGE).await?;
    let healthy_after = revoked.elapsed();
    let retries = metric("tether_retries_total").await;
    println!(
        "revoked: first 401 {to_401:?} and Ready again {healthy_after:?} after the revocation \
         began; plugin runs {runs_before} → {}; {retries} retries",
        plane.plugin_runs()
    );
    read_api::create_and_wait_mirrored(&collector, (member, MEMBER), &ns, "after", CONVERGE)
        .await?;
    let credentials = condition(&collector, MEMBER, "CredentialsValid")
        .await
        .unwrap();
    assert_eq!(credentials.short(), "True/CredentialsAccepted");

    // A deleted profile is a removed member.
    plane.delete(MEMBER).await?;
    let path = format!("/api/v1/clusters/{MEMBER}");
    eventually(
        &format!("{MEMBER} is no longer served"),
        CONVERGE,
        || async {
            let status = collector.get(&path).await.unwrap().0;
            matching(status, |status| *status == 404)
        },
    )
    .await?;
    assert!(condition(&collector, "member2", "Ready").await.is_some());
    Ok(())
}
