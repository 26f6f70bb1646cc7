//! On SIGTERM the collector gives its Lease up and exits within seconds, open watches and all.

use std::time::{Duration, Instant};

use e2e::{
    collector_run::{RunningCollector, admin_args, candidate, spawn_healthy, temp_dir},
    limits::{PROBE, START},
    scenario::Scenario,
};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use testkit::{eventually, matching, metrics};

/// Long, so that a takeover well within it can only come from a released Lease.
const LEASE: &str = "30";
/// A follower reads the Lease every second; allow for a slow machine.
const TAKEOVER: Duration = Duration::from_secs(4);

async fn leading(collector: &RunningCollector) -> bool {
    collector.metric("tether_leader", "").await.unwrap_or(0.0) == 1.0
}

#[tokio::test]
async fn sigterm_releases_the_lease_and_exits_promptly() -> anyhow::Result<()> {
    let mut s = Scenario::start_healthy(1, PROBE).await?;
    // The scenario's own replica stops: the process below is then the only candidate.
    s.collector.stop().await;

    let control_plane = s.env.control_plane();
    let mut args = admin_args(control_plane)?;
    // This test reads its /metrics without a token.
    let serve = ["--probe-period", "1", "--insecure-serve-api"];
    let flags = [&serve[..], &candidate("replica-p", LEASE)].concat();
    args.extend(flags.into_iter().map(str::to_owned));
    let mut process = spawn_healthy(&args, &temp_dir("shutdown")?, START).await?;
    eventually("the process leads", START, || async {
        let leader = process.metrics().await?;
        matching(metrics::sum(&leader, "tether_leader", ""), |n| *n == 1.0)
            .map_err(|now| anyhow::anyhow!("tether_leader {now}"))
    })
    .await?;

    let follower = s.start_collector(&candidate("replica-f", LEASE)).await?;
    assert!(!leading(&follower).await, "replica-f follows");

    let exited = process.terminate(Duration::from_secs(5)).await?;
    let lease = Api::<Lease>::namespaced(s.karmada.client().clone(), "tether-system")
        .get("tether-collector")
        .await?;
    let holder = lease.spec.and_then(|spec| spec.holder_identity);
    assert_ne!(
        holder.as_deref(),
        Some("replica-p"),
        "the Lease is still held by the process that exited"
    );
    // A follower reads the Lease every second, so the released Lease is taken at once, not
    // when the last renewal would have expired.
    let since = Instant::now();
    let what =
        format!("replica-f takes over within {TAKEOVER:?} of the exit (the Lease lasts {LEASE} s)");
    eventually(&what, TAKEOVER, || leading(&follower)).await?;
    println!(
        "SIGTERM → exit and Lease released in {exited:?}; the other replica led {:?} later",
        since.elapsed()
    );
    Ok(())
}
