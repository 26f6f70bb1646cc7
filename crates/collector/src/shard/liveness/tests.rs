//! Liveness against forged Leases: every field a Lease carries is anyone's to write.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::{SignedDuration, Timestamp},
};
use kube::api::ObjectMeta;
use proptest::prelude::*;
use tokio::time::Instant;

use super::{Live, Liveness, MAX_GROUP, expiry};
use crate::shard::{membership::next_generation, view::Member};

const SECOND: Duration = Duration::from_secs(1);

/// The group's configured duration in these tests, `--shard-lease-seconds 15`.
fn liveness() -> Liveness {
    Liveness::new(Duration::from_secs(15), SECOND)
}

/// `holder`'s own Lease, renewed `ago` before `wall`, claiming `claimed` seconds.
fn lease(holder: &str, ago: Duration, claimed: Option<i32>, wall: Timestamp) -> Lease {
    let renewed = wall
        .checked_sub(SignedDuration::try_from(ago).unwrap())
        .unwrap();
    Lease {
        metadata: ObjectMeta {
            name: Some(format!("tether-shard-{holder}")),
            resource_version: Some("1".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: claimed,
            renew_time: Some(MicroTime(renewed)),
            ..LeaseSpec::default()
        }),
    }
}

/// A monotonic "now" with room before it for Leases dated in the past.
fn now() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

fn live(leases: &[Lease]) -> Live {
    liveness().judge(leases, now(), Timestamp::now())
}

#[rstest::rstest]
#[case::claiming_decades_expires_after_it(60, i32::MAX, false)]
#[case::claiming_one_second_lives_for_it(5, 1, true)]
fn a_lease_lives_for_the_groups_duration_whatever_it_claims(
    #[case] renewed_ago: u64,
    #[case] claimed: i32,
    #[case] lives: bool,
) {
    let wall = Timestamp::now();
    let forged = lease(
        "peer",
        Duration::from_secs(renewed_ago),
        Some(claimed),
        wall,
    );
    let judged = liveness().judge(&[forged], now(), wall);
    assert_eq!(judged.replicas.contains("peer"), lives, "{judged:?}");
}

#[test]
fn a_lease_stays_live_until_the_groups_expiry_on_this_replicas_clock() {
    let wall = Timestamp::now();
    let mut liveness = liveness();
    let start = now();
    let forged = [lease("peer", Duration::ZERO, Some(i32::MAX), wall)];
    assert_eq!(liveness.judge(&forged, start, wall).replicas.len(), 1);
    let expired = start + expiry(Duration::from_secs(15), SECOND);
    assert!(liveness.judge(&forged, expired, wall).replicas.is_empty());
}

#[test]
fn forged_durations_and_times_never_panic() {
    let wall = Timestamp::now();
    let mut leases = Vec::new();
    for (i, claimed) in [None, Some(0), Some(-1), Some(i32::MIN), Some(i32::MAX)]
        .into_iter()
        .enumerate()
    {
        for (j, renewed) in [None, Some(Timestamp::MIN), Some(Timestamp::MAX)]
            .into_iter()
            .enumerate()
        {
            let mut forged = lease(&format!("r{i}-{j}"), Duration::ZERO, claimed, wall);
            if let Some(spec) = forged.spec.as_mut() {
                spec.renew_time = renewed.map(MicroTime);
                spec.lease_transitions = Some(i32::MAX);
            }
            leases.push(forged);
        }
    }
    let judged = liveness().judge(&leases, now(), wall);
    // A renewTime in the future counts as now; none, or one at the dawn of time, as expired.
    let expected: std::collections::BTreeSet<String> = (0..5).map(|i| format!("r{i}-2")).collect();
    assert_eq!(judged.replicas, expected);
}

#[test]
fn a_lease_named_for_another_identity_does_not_count() {
    let wall = Timestamp::now();
    let mut twin = lease("a", Duration::ZERO, Some(15), wall);
    twin.metadata.name = Some("tether-shard-b".to_owned());
    assert!(live(&[twin]).replicas.is_empty());
}

#[test]
fn the_group_keeps_the_lowest_identities_up_to_its_cap() {
    let wall = Timestamp::now();
    let leases: Vec<Lease> = (0..MAX_GROUP + 44)
        .map(|i| lease(&format!("r{i:04}"), Duration::ZERO, Some(15), wall))
        .collect();
    let judged = liveness().judge(&leases, now(), wall);
    assert_eq!(judged.replicas.len(), MAX_GROUP);
    assert_eq!(judged.over_cap, 44);
    let kept: Vec<&String> = judged.replicas.iter().collect();
    assert_eq!(kept.first().map(|s| s.as_str()), Some("r0000"));
    assert_eq!(kept.last().map(|s| s.as_str()), Some("r0255"));
}

#[test]
fn a_replica_the_full_group_leaves_out_is_no_member() {
    let wall = Timestamp::now();
    let leases: Vec<Lease> = (0..MAX_GROUP)
        .map(|i| lease(&format!("a{i:04}"), Duration::ZERO, Some(15), wall))
        .collect();
    let me = |identity: &str| Member {
        identity: identity.to_owned(),
        generation: 1,
    };
    let (group, left_out) = liveness()
        .judge(&leases, now(), wall)
        .with("z", Some(me("z")));
    assert_eq!(left_out, None);
    assert_eq!(group.over_cap, 1);
    assert!(!group.replicas.contains("z"));
    let (group, kept) = liveness()
        .judge(&leases, now(), wall)
        .with("0", Some(me("0")));
    assert_eq!(kept, Some(me("0")));
    assert_eq!(group.replicas.len(), MAX_GROUP);
    assert!(!group.replicas.contains("a0255"));
}

#[test]
fn a_forged_transition_count_saturates() {
    let wall = Timestamp::now();
    let mut forged = lease("a", Duration::ZERO, Some(15), wall);
    for (recorded, next) in [
        (None, 1),
        (Some(0), 1),
        (Some(6), 7),
        (Some(-5), 1),
        (Some(i32::MIN), 1),
        (Some(i32::MAX), i32::MAX),
    ] {
        if let Some(spec) = forged.spec.as_mut() {
            spec.lease_transitions = recorded;
        }
        assert_eq!(next_generation(&forged), next, "{recorded:?}");
    }
}

#[test]
fn a_lease_expires_two_reads_early_but_never_within_two_renewals() {
    for (lease_seconds, expires_after) in [(15, 13), (6, 4), (3, 2)] {
        assert_eq!(
            expiry(Duration::from_secs(lease_seconds), SECOND),
            Duration::from_secs(expires_after)
        );
    }
    assert!(expiry(Duration::MAX, Duration::MAX) >= Duration::MAX / 3);
}

fn any_lease() -> impl Strategy<Value = Lease> {
    (
        prop::option::of("[a-c]{0,2}|[a-c]\n\u{1b}|-"),
        prop::option::of("tether-shard-([a-c]{0,2}|[a-c]\n\u{1b}|-)"),
        prop::option::of("[0-9]{1,2}"),
        prop::option::of(any::<i32>()),
        prop::option::of(any::<i32>()),
        prop::option::of(any::<i64>()),
        any::<bool>(),
    )
        .prop_map(
            |(holder, name, version, claimed, transitions, renewed, has_spec)| Lease {
                metadata: ObjectMeta {
                    name,
                    resource_version: version,
                    ..ObjectMeta::default()
                },
                spec: has_spec.then(|| LeaseSpec {
                    holder_identity: holder,
                    lease_duration_seconds: claimed,
                    lease_transitions: transitions,
                    renew_time: renewed.map(|s| {
                        MicroTime(
                            Timestamp::from_second(
                                s.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second()),
                            )
                            .unwrap_or(Timestamp::UNIX_EPOCH),
                        )
                    }),
                    ..LeaseSpec::default()
                }),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any Leases, read any number of times at any times: no panic, only holders of their own
    /// Lease are live, never more than the cap, and nothing is remembered of Leases gone.
    #[test]
    fn forged_leases_never_panic_and_stay_bounded(
        reads in prop::collection::vec(
            (prop::collection::vec(any_lease(), 0..12), 0u64..100_000),
            1..4,
        ),
    ) {
        let mut liveness = liveness();
        let start = now();
        for (leases, later_ms) in reads {
            let judged = liveness.judge(
                &leases,
                start + Duration::from_millis(later_ms),
                Timestamp::now(),
            );
            prop_assert!(judged.replicas.len() <= MAX_GROUP);
            for replica in &judged.replicas {
                prop_assert!(crate::shard::args::is_lease_identity(replica), "{:?}", replica);
                let own = format!("tether-shard-{replica}");
                prop_assert!(leases.iter().any(|l| l.metadata.name.as_deref() == Some(&own)));
            }
            prop_assert!(liveness.seen.len() <= leases.len());
            for lease in &leases {
                let next = next_generation(lease);
                prop_assert!(next >= 1);
            }
        }
    }
}
