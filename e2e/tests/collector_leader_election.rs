//! Two collector replicas: exactly one writes status and Events, and the other takes over within
//! the lease duration when the first stops.

use std::time::Duration;

use e2e::{
    collector_run::{RunningCollector, candidate},
    limits::{PROBE, START},
    scenario::{Scenario, events_about},
};
use testkit::{eventually, matching};

const CONVERGE: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(4);
/// The lease of the fake holder in the takeover test: long next to its 1 s renewals, so a test
/// thread starved for seconds does not let it lapse early.
const HELD: Duration = Duration::from_secs(8);

async fn leading(collector: &RunningCollector) -> bool {
    collector.metric("tether_leader", "").await.unwrap() == 1.0
}

/// A second collector, `replica-b`, in the scenario's election with a [`LEASE`]-long Lease.
async fn start_replica_b(s: &Scenario) -> RunningCollector {
    let lease = LEASE.as_secs().to_string();
    s.start_collector(&candidate("replica-b", &lease))
        .await
        .unwrap()
}

/// The reporting instances of Events on Cluster `member` with `reason`.
async fn reporters(s: &Scenario, member: &str, reason: &str) -> Vec<String> {
    let events = events_about(s.karmada.client(), None, member).await;
    (events.unwrap().into_iter())
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.reporting_instance)
        .collect()
}

#[tokio::test]
async fn one_replica_writes_and_the_other_takes_over_within_the_lease() -> anyhow::Result<()> {
    let lease = LEASE.as_secs().to_string();
    let mut s = Scenario::start_with(1, PROBE, &candidate("replica-a", &lease)).await?;
    s.wait("member1", "Ready=True/MemberReady", START).await?;
    let mut b = start_replica_b(&s).await;
    // b watches and probes like a, but does not lead.
    b.wait_member_ready("member1", START).await?;
    let a_leads = leading(&s.collector).await;
    assert!(a_leads, "replica-a started first and leads");
    assert!(!leading(&b).await, "replica-b follows");

    // A transition: only the leader writes it.
    s.karmada.delete_secret("member1").await?;
    s.wait("member1", "Ready=False/SecretNotFound", CONVERGE)
        .await?;
    tokio::time::sleep(2 * PROBE).await; // b has probed and seen it too
    let written = reporters(&s, "member1", "SecretNotFound").await;
    assert_eq!(
        written,
        vec!["replica-a".to_owned()],
        "exactly one replica recorded the transition"
    );

    // The leader stops (releasing the Lease on its way out; a crash would leave it to expire):
    // b must take over within the lease duration.
    s.collector.stop().await;
    let stopped = tokio::time::Instant::now();
    let take_over = LEASE + Duration::from_secs(3);
    eventually("replica-b takes over", take_over, || leading(&b)).await?;
    eprintln!(
        "replica-b took over {:?} after replica-a stopped (lease {LEASE:?})",
        stopped.elapsed()
    );

    let token = s.registered_tokens[0].clone();
    let ca = s.member(1).ca_pem().to_owned();
    s.karmada.write_secret("member1", &token, &ca).await?;
    s.wait("member1", "Ready=True/MemberReady", CONVERGE)
        .await?;
    wait_reported(&s, "member1", "MemberReady", "replica-b").await;
    b.stop().await;
    Ok(())
}

/// Polls until an Event on Cluster `member` with `reason` was reported by `instance`.
async fn wait_reported(s: &Scenario, member: &str, reason: &str, instance: &str) {
    let what = format!("{instance} records a {reason} Event on {member}");
    eventually(&what, CONVERGE, || async {
        let now = reporters(s, member, reason).await;
        matching(now, |now| now.iter().any(|r| r == instance))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_new_leader_writes_and_records_what_it_saw_while_following() -> anyhow::Result<()> {
    // The scenario's own collector only watches; the Lease is held by someone else.
    let s = Scenario::start_with(1, PROBE, &["--write-status=false"]).await?;
    let holder = s.hold_the_lease(HELD).await?;

    let mut b = start_replica_b(&s).await;
    // While following, b probes member1 and learns of a Cluster it cannot use; it writes
    // neither.
    s.add_broken_member().await?;
    s.wait_sees_both(&b, START).await?;
    tokio::time::sleep(2 * PROBE).await;
    assert!(!leading(&b).await, "someone else holds the Lease");
    for name in ["member1", "broken"] {
        let ready = s.karmada.condition(name, "Ready").await?;
        assert_eq!(ready, None, "a follower wrote {name}");
    }

    // The holder dies: b leads once the Lease expires, writes both, and records both
    // transitions, which it saw while no one was writing.
    holder.abort();
    s.wait("member1", "Ready=True/MemberReady", HELD + LEASE + CONVERGE)
        .await?;
    s.wait("broken", "Ready=False/EndpointForbidden", CONVERGE)
        .await?;
    wait_reported(&s, "member1", "MemberReady", "replica-b").await;
    wait_reported(&s, "broken", "EndpointForbidden", "replica-b").await;
    b.stop().await;
    Ok(())
}
