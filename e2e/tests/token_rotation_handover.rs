//! Two collector processes rotating the same fleet: only the leader mints, and when it is
//! SIGKILLed the other takes the chains over with no double mint and no lost rotation,
//! counted in the member apiserver's own TokenRequest metrics.

use std::time::Duration;

use e2e::{
    collector_run::{candidate, spawn_healthy, temp_dir},
    rotation_plane::{RotationPlane, fast_rotation_flags},
};
use testkit::{CollectorProcess, eventually};

const MEMBERS: usize = 6;
const START: Duration = Duration::from_secs(60);

async fn replica(plane: &RotationPlane, identity: &str) -> CollectorProcess {
    let replica = ["--insecure-serve-api", "--mint-tokens"];
    let flags = [
        &replica[..],
        &candidate(identity, "4"),
        &fast_rotation_flags("0.01", "2"),
    ];
    let args = plane.collector_args(&flags.concat()).unwrap();
    spawn_healthy(&args, &temp_dir(identity).unwrap(), START)
        .await
        .unwrap()
}

/// The sum of metric `name`'s samples containing `label`.
async fn metric(process: &CollectorProcess, name: &str, label: &str) -> f64 {
    e2e::collector_run::process_metric(process, name, label)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_new_leader_mints_once_per_window_and_loses_no_rotation() -> anyhow::Result<()> {
    let plane = RotationPlane::start(1, MEMBERS).await?;
    let a = replica(&plane, "replica-a").await;
    eventually("replica-a leads", START, || async {
        metric(&a, "tether_leader", "").await == 1.0
    })
    .await?;
    let b = replica(&plane, "replica-b").await;
    eventually("every member rotated once", START, || async {
        metric(&a, "tether_token_mints_total", r#"result="success""#).await >= MEMBERS as f64
    })
    .await?;

    let writes = plane.count_secret_writes();
    let requests_before = plane.token_requests(1).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mints = metric(&b, "tether_token_mints_total", "").await;
    assert_eq!(mints, 0.0, "the follower mints nothing");
    let at_kill = writes.counts();
    drop(a); // SIGKILL: no Lease release, a mint may be cut off anywhere.

    // replica-b takes the Lease once it expires (4 s), waits out a mint (3 × 2 s + 1 s), and
    // goes on with every chain.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let at_end = writes.counts();
    let requests = plane.token_requests(1).await? - requests_before;
    drop(writes);
    let leader = metric(&b, "tether_leader", "").await;
    assert_eq!(leader, 1.0, "replica-b leads");
    let written: u32 = at_end.values().sum();
    assert!(
        requests >= f64::from(written) && requests <= f64::from(written) + 1.0,
        "{requests} TokenRequests for {written} tokens written: each write is one mint, and \
         the only mint not written may be one replica-a had in flight when it was killed"
    );
    for i in 0..MEMBERS {
        let name = format!("m{i:02}");
        let before = at_kill.get(&name).copied().unwrap_or(0);
        let after = at_end.get(&name).copied().unwrap_or(0);
        assert!(
            after >= before + 2,
            "{name}: {before} rotations before the kill, {after} after 30 s more"
        );
    }
    let conflicts = metric(&b, "tether_token_mints_total", r#"result="conflict""#);
    assert_eq!(conflicts.await, 0.0);
    eprintln!(
        "handover: {written} tokens written for {requests} TokenRequests across the SIGKILL of \
         the leader; every chain went on"
    );
    Ok(())
}
