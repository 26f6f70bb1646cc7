//! A member whose Cluster API kubeconfig Secret holds a client certificate: the collector is
//! Ready with it; a rewritten certificate is who the very next request is, through the same
//! client, while the collector's watches carry on without a relist; an expired one is
//! `CertificateExpired`.

mod registry_support;

use std::time::Duration;

use cluster_registry::{KubeconfigSecretsConfig, RegistryBuilder};
use e2e::{
    collector_run::RunningCollector,
    kubeconfig_plane::{
        CapiPlane, Kubeconfig,
        read_api::{
            create_and_wait_mirrored, member_metric, unix_now, wait_condition, wait_healthy,
        },
    },
    limits::{HOUR, PROBE, START},
    scenario::MEMBER,
};
use member_client::FailureKind;
use registry_support::{list_namespaces, loopback_policy, member_client, next_upserted, whoami};
use testkit::{Environment, eventually, matching};
use tokio::time::Instant;

const CONVERGE: Duration = Duration::from_secs(10);
/// How soon after the acknowledged write the next request must present the new certificate.
const SWITCH: Duration = Duration::from_secs(1);

/// `tether_credential_expiry_timestamp_seconds` of [`MEMBER`], minus now: how far ahead the
/// credential its requests carry expires.
async fn expires_in(collector: &RunningCollector) -> f64 {
    let name = "tether_credential_expiry_timestamp_seconds";
    member_metric(collector, name, MEMBER).await - unix_now()
}

/// Polls until [`MEMBER`]'s credential expires `want` from now (± 2 min); returns how long
/// that took.
async fn wait_expiry(collector: &RunningCollector, want: Duration) -> Duration {
    let started = Instant::now();
    let what = format!("the credential expires in ~{want:?}");
    eventually(&what, CONVERGE, || async {
        let ahead = expires_in(collector).await;
        matching(ahead, |ahead| (ahead - want.as_secs_f64()).abs() < 120.0)
    })
    .await
    .unwrap();
    started.elapsed()
}

async fn relists(collector: &RunningCollector) -> f64 {
    member_metric(collector, "tether_relists_total", MEMBER).await
}

#[tokio::test]
async fn a_client_certificate_member_is_ready_rotates_in_place_and_expires_visibly()
-> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));
    for user in ["alice", "bob"] {
        member.grant_reader_to_user(user).await?;
    }
    let workloads = member.create_namespace("workloads").await?;
    let plane = CapiPlane::create(control_plane).await?;
    let write_cert = async |cert| {
        plane
            .write(MEMBER, &Kubeconfig::client_cert(member, cert))
            .await
    };
    let alice = member.issue_client_cert("alice", &["tether-test"], HOUR)?;
    write_cert(&alice).await?;

    // (a) The collector reaches the member as alice.
    let started = Instant::now();
    let collector = plane.source.start_collector(PROBE, &[]).await?;
    wait_healthy(&collector, MEMBER, START).await?;
    println!(
        "certificate member Ready on the read API {:?} after starting the collector",
        started.elapsed()
    );
    create_and_wait_mirrored(&collector, (member, MEMBER), &workloads, "before", CONVERGE).await?;
    wait_expiry(&collector, HOUR).await;
    println!(
        "credential expiry with alice's certificate: now + {:.0} s",
        expires_in(&collector).await
    );
    let fetched = collector
        .metric("tether_token_fetches_total", "kind=\"certificate\"")
        .await?;
    assert!(fetched >= 1.0, "certificate fetches: {fetched}");
    assert_eq!(relists(&collector).await, 0.0, "nothing relisted yet");

    // (b) A client built from the registry, as the collector builds its own.
    let (registry, mut events, driver) = RegistryBuilder::new()
        .endpoint_policy(loopback_policy())
        .kubeconfig_secrets(
            control_plane.admin_client()?,
            KubeconfigSecretsConfig::cluster_api(vec![plane.namespace.clone()]),
        )
        .build();
    let driver = tokio::spawn(driver.run());
    let upserted = next_upserted(&mut events).await?;
    assert_eq!(upserted.0.name, MEMBER);
    let client = member_client(&registry, &upserted)?;
    assert_eq!(whoami(&client).await?, "alice");

    // Cluster API renews the certificate by rewriting the Secret: bob, valid twice as long.
    let bob = member.issue_client_cert("bob", &["tether-test"], 2 * HOUR)?;
    write_cert(&bob).await?;
    let written = Instant::now();
    let mut asked = 0;
    loop {
        let who = whoami(&client).await?;
        asked += 1;
        if who == "bob" {
            break;
        }
        assert_eq!(who, "alice", "nobody else");
        let since = written.elapsed();
        assert!(since < SWITCH, "still {who} {since:?} after the write");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let switched = written.elapsed();
    println!(
        "whoami through the same client: alice → bob {switched:?} after the acknowledged \
         write ({asked} reviews)"
    );
    assert!(switched < SWITCH, "{switched:?}");
    assert_eq!(whoami(&client).await?, "bob", "and stays bob");

    // The collector presents bob's certificate too, and its watches survived: a Deployment
    // created now is mirrored, and nothing was listed again.
    wait_expiry(&collector, 2 * HOUR).await;
    println!(
        "the collector's credential expiry followed bob's notAfter {:?} after the write: \
         now + {:.0} s",
        written.elapsed(),
        expires_in(&collector).await
    );
    let mirrored =
        create_and_wait_mirrored(&collector, (member, MEMBER), &workloads, "after", CONVERGE)
            .await?;
    println!("a Deployment created after the rotation was mirrored in {mirrored:?}");
    wait_healthy(&collector, MEMBER, CONVERGE).await?;
    let relisted = relists(&collector).await;
    println!("tether_relists_total{{member=\"{MEMBER}\"}} after the rotation: {relisted}");
    assert_eq!(
        relisted, 0.0,
        "a certificate rotation must not cost a relist"
    );

    // (c) An expired certificate is reported as such, not as a rejected credential.
    write_cert(&member.issue_expired_client_cert("alice", &["tether-test"])?).await?;
    let certificate_expired = "False/CertificateExpired";
    let expired = |type_| wait_condition(&collector, MEMBER, type_, certificate_expired, CONVERGE);
    let (took, ready) = expired("Ready").await?;
    println!(
        "expired certificate → Ready=False/CertificateExpired in {took:?}: {}",
        ready.message
    );
    expired("CredentialsValid").await?;
    // Bob may not list namespaces (403) until the registry has the expired certificate too.
    let what = "the registry's client no longer gets 403";
    let refused = eventually(what, CONVERGE, || async {
        let now = list_namespaces(&client).await;
        matching(now, |now| *now != Err(FailureKind::Forbidden))
    })
    .await?;
    assert_eq!(
        refused,
        Err(FailureKind::CredentialUnavailable),
        "the registry's client does not send an expired certificate either"
    );
    driver.abort();
    Ok(())
}
