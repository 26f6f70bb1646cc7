//! A member whose Cluster API kubeconfig Secret holds a bearer token, through the incident a
//! rotation exists for: the ServiceAccount is deleted and created again and the Secret
//! rewritten with a token of the new one. The member stays (or returns to) Ready, the old
//! token is dead, and the collector's watches carry on without a relist.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use e2e::{
    kubeconfig_plane::{
        CapiPlane, Kubeconfig,
        read_api::{create_and_wait_mirrored, member_metric, sample_ready, wait_healthy},
    },
    limits::{HOUR, PROBE, START},
    scenario::{AGENT, MEMBER, one_member_with_agent},
};
use testkit::REVOCATION_TIMEOUT;
use tokio::time::Instant;

const CONVERGE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_token_member_rotates_through_its_kubeconfig_secret_without_relist() -> anyhow::Result<()>
{
    let (env, ns, old) = one_member_with_agent().await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));
    let plane = CapiPlane::create(control_plane).await?;
    plane
        .write(MEMBER, &Kubeconfig::token(member, &old))
        .await?;

    let collector = plane.source.start_collector(PROBE, &[]).await?;
    wait_healthy(&collector, MEMBER, START).await?;
    create_and_wait_mirrored(&collector, (member, MEMBER), &ns, "before", CONVERGE).await?;
    assert_eq!(
        member_metric(&collector, "tether_relists_total", MEMBER).await,
        0.0
    );
    let labels = "cache=\"members\",kind=\"token\"";
    let token_fetches = || collector.metric("tether_token_fetches_total", labels);
    let fetched_before = token_fetches().await?;

    let done = AtomicBool::new(false);
    let rotation = async {
        // The ServiceAccount is deleted and created again (a new UID), and the Secret gets a
        // token of the new one, while the apiserver still accepts the old token from its cache.
        member.delete_service_account(&ns, AGENT).await.unwrap();
        member.create_service_account(&ns, AGENT).await.unwrap();
        let new = member.mint_token(&ns, AGENT, HOUR).await.unwrap();
        let rewritten = Kubeconfig::token(member, &new);
        plane.write(MEMBER, &rewritten).await.unwrap();
        let written = Instant::now();
        let dead = member
            .wait_until_unauthorized(&old, REVOCATION_TIMEOUT)
            .await
            .unwrap();
        println!("the old token got 401 {dead:?} after the Secret was rewritten");
        // Past the old token's death: probes and the watches run on the new one.
        let mirrored =
            create_and_wait_mirrored(&collector, (member, MEMBER), &ns, "after", CONVERGE)
                .await
                .unwrap();
        println!("a Deployment created after the revocation was mirrored in {mirrored:?}");
        tokio::time::sleep(3 * PROBE).await;
        wait_healthy(&collector, MEMBER, CONVERGE).await.unwrap();
        println!(
            "still Ready and CredentialsAccepted {:?} after the Secret was rewritten",
            written.elapsed()
        );
        done.store(true, Ordering::Relaxed);
    };
    let (samples, ()) = tokio::join!(sample_ready(&collector, MEMBER, &done), rotation);
    println!("Ready of {MEMBER} through the rotation: {samples:?}");
    assert_eq!(
        samples.last().map(String::as_str),
        Some("True/MemberReady"),
        "{samples:?}"
    );

    let relists = member_metric(&collector, "tether_relists_total", MEMBER).await;
    let unauthorized =
        member_metric(&collector, "tether_unauthorized_responses_total", MEMBER).await;
    let fetched = token_fetches().await? - fetched_before;
    println!(
        "after the rotation: {relists} relists, {unauthorized} unauthorized responses, \
         {fetched} token fetches"
    );
    assert_eq!(relists, 0.0, "a token rotation must not cost a relist");
    // The old token can die in the instant between the deletion and the write; only then may
    // the member have seen a 401. Otherwise nothing may have disturbed it.
    if unauthorized == 0.0 {
        assert_eq!(samples, ["True/MemberReady"], "the member stayed Ready");
    }
    assert!(fetched >= 1.0, "the rewritten Secret's token was read");
    Ok(())
}
