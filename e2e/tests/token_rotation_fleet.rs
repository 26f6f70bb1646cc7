//! Fifty members rotated every six seconds for two minutes by one collector
//! (`--mint-tokens`): no request answered 401, no relist, one Secret write per rotation,
//! every member's Secret rewritten as often as its tokens' lifetime says.

use std::time::Duration;

use e2e::rotation_plane::{RotationPlane, rotations};
use testkit::eventually;

/// Start-up: the registry lists, the member clients connect, the watches list.
const START: Duration = Duration::from_secs(60);
/// The period a 600 s token rotates with at `--mint-at-fraction 0.01`.
const PERIOD: Duration = Duration::from_secs(6);

#[tokio::test]
async fn fifty_members_rotate_every_six_seconds_with_no_401_no_relist_and_one_write_each()
-> anyhow::Result<()> {
    const MEMBERS: usize = 50;
    const WINDOW: Duration = Duration::from_secs(120);
    let plane = RotationPlane::start(2, MEMBERS).await?;
    let minting = ["--mint-tokens", "--mint-at-fraction", "0.01"];
    let probing = ["--probe-period", "2", "--request-timeout", "3"];
    let collector = plane
        .start_collector(&[&minting[..], &probing].concat())
        .await?;
    let names: Vec<String> = plane.members.iter().map(|m| m.name.clone()).collect();
    for name in &names {
        plane
            .karmada
            .wait_condition(name, "Ready", "True/MemberReady", START)
            .await?;
    }
    // Every chain has turned once before the window opens.
    eventually("every member rotated once", START, || async {
        let mut all = true;
        for name in &names {
            all &= rotations(&collector, name, "success").await >= 1.0;
        }
        all
    })
    .await?;

    let writes = plane.count_secret_writes();
    let mut before = Vec::new();
    for name in &names {
        before.push(rotations(&collector, name, "success").await);
    }
    let started = tokio::time::Instant::now();
    let mut samples = 0;
    while started.elapsed() < WINDOW {
        tokio::time::sleep(Duration::from_secs(10)).await;
        samples += 1;
        for name in &names {
            let credentials = plane.karmada.condition(name, "CredentialsValid").await?;
            assert_eq!(
                credentials,
                Some(("True".to_owned(), "CredentialsAccepted".to_owned())),
                "{name} at {:?}",
                started.elapsed()
            );
        }
        let listed = collector.metric("tether_member_source_listed", r#"source="karmada""#);
        let own_watches = "the collector's own watches of the control plane stay listed";
        assert_eq!(listed.await?, 1.0, "{own_watches}");
    }
    let window = started.elapsed();
    let counts = writes.counts();
    drop(writes);

    let expected = (window.as_secs_f64() / PERIOD.as_secs_f64()).round();
    let mut minted = 0.0;
    let mut written = 0_u32;
    for (name, before) in names.iter().zip(before) {
        let successes = rotations(&collector, name, "success").await - before;
        let count = counts.get(name).copied().unwrap_or(0);
        minted += successes;
        written += count;
        assert!(
            (f64::from(count) - expected).abs() <= 1.0,
            "{name}: its Secret was rewritten {count} times in {window:?}, expected {expected} ± 1"
        );
        assert!(
            (f64::from(count) - successes).abs() <= 1.0,
            "{name}: {count} writes for {successes} rotations"
        );
        assert_eq!(rotations(&collector, name, "failed").await, 0.0, "{name}");
    }
    for (metric, what) in [
        (
            "tether_unauthorized_responses_total",
            "requests answered 401",
        ),
        ("tether_relists_total", "relists"),
        ("tether_watch_errors_total", "failed watches"),
    ] {
        assert_eq!(collector.metric(metric, "").await?, 0.0, "{what}");
    }
    eprintln!(
        "{MEMBERS} members, {window:?}: {minted} rotations ({:.2}/s), {written} Secret writes \
         ({:.3} per rotation), {samples} samples all CredentialsAccepted, 0 401s, 0 relists",
        minted / window.as_secs_f64(),
        f64::from(written) / minted
    );
    Ok(())
}
