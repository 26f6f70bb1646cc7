//! Three sharded collector replicas over 60 members: each member is served and written by
//! exactly one replica within the load bound; a frozen replica that lost its members without
//! noticing overwrites no one's status; a SIGKILLed replica's members are taken over within
//! its Lease duration; no status is ever written by a replica that does not hold the member's
//! claim (checked from the `Cluster`s' own `managedFields`); and each replica keeps in memory
//! the credentials of its own members only.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use e2e::{
    collector_run::process_metric as metric,
    shard_plane::{ShardPlane, served},
};
use testkit::{CollectorProcess, StatusWriters, eventually};

const MEMBERS: usize = 60;
const LEASE_SECONDS: u64 = 6;
const IDENTITIES: [&str; 3] = ["shard-a", "shard-b", "shard-c"];
const LIMIT: Duration = Duration::from_secs(90);

/// Who serves each member, if every member is served by exactly one of `replicas`.
async fn partition(replicas: &[(&str, &CollectorProcess)]) -> Option<BTreeMap<String, String>> {
    let mut owners = BTreeMap::new();
    for (identity, replica) in replicas {
        for member in served(replica).await.ok()? {
            if owners.insert(member, (*identity).to_owned()).is_some() {
                return None;
            }
        }
    }
    (owners.len() == MEMBERS).then_some(owners)
}

/// Whether every member's status was last written by the replica that serves it.
fn written_by_owners(writers: &StatusWriters, owners: &BTreeMap<String, String>) -> bool {
    owners
        .iter()
        .all(|(member, owner)| writers.last_write(member).is_some_and(|(_, w)| w == *owner))
}

/// Whether `replicas` [`partition`] the members and each owner wrote its members' status.
async fn settled(replicas: &[(&str, &CollectorProcess)], writers: &StatusWriters) -> bool {
    partition(replicas)
        .await
        .is_some_and(|owners| written_by_owners(writers, &owners))
}

/// Whether each of `replicas` keeps in memory the credentials of exactly the members it
/// serves in `owners` (its share, not the fleet's).
async fn credentials_held_are_shares(
    replicas: &[(&str, &CollectorProcess)],
    owners: &BTreeMap<String, String>,
) -> bool {
    for (identity, replica) in replicas {
        let share = members_of(owners, identity).len() as f64;
        let held = metric(replica, "tether_member_credentials_held", "").await;
        if held.ok() != Some(share) {
            return false;
        }
    }
    true
}

/// The members `identity` serves.
fn members_of(owners: &BTreeMap<String, String>, identity: &str) -> BTreeSet<String> {
    owners
        .iter()
        .filter(|(_, o)| *o == identity)
        .map(|(m, _)| m.clone())
        .collect()
}

#[tokio::test]
async fn three_replicas_share_sixty_members_through_a_freeze_and_a_kill() -> anyhow::Result<()> {
    let plane = ShardPlane::start(1, MEMBERS).await?;
    let writers = StatusWriters::start(plane.karmada.client().clone());
    let flags = ["--probe-period", "2", "--request-timeout", "2"];
    let a = plane.replica(IDENTITIES[0], LEASE_SECONDS, &flags).await?;
    let b = plane.replica(IDENTITIES[1], LEASE_SECONDS, &flags).await?;
    let c = plane.replica(IDENTITIES[2], LEASE_SECONDS, &flags).await?;
    let all = [
        (IDENTITIES[0], &a),
        (IDENTITIES[1], &b),
        (IDENTITIES[2], &c),
    ];

    // Each member is served by one replica, which wrote its status; no replica over the bound.
    let shared = "three replicas share the members";
    eventually(shared, LIMIT, || settled(&all, &writers)).await?;
    let owners = partition(&all).await.unwrap();
    let bound = (1.25 * MEMBERS as f64 / 3.0).ceil() as usize;
    for identity in IDENTITIES {
        let held = members_of(&owners, identity).len();
        assert!(
            held > 0 && held <= bound,
            "{identity} holds {held}, bound {bound}"
        );
        let replica = all.iter().find(|(i, _)| *i == identity).unwrap().1;
        let label = format!("replica=\"{identity}\"");
        let counted = metric(replica, "tether_shard_members", &label).await?;
        assert_eq!(counted, held as f64);
    }
    // Each replica keeps its own members' credentials, and no other member's.
    let shares = "each replica holds only its share of the credentials";
    eventually(shares, LIMIT, || credentials_held_are_shares(&all, &owners)).await?;
    for member in &plane.members {
        let ready = plane.karmada.condition(member, "Ready").await?;
        assert_eq!(ready.map(|(s, _)| s).as_deref(), Some("True"), "{member}");
    }
    // A replica sends a member it does not own to its owner.
    let (elsewhere, owner) = owners.iter().find(|(_, o)| *o != IDENTITIES[0]).unwrap();
    let (status, body) = a.get(&format!("/api/v1/clusters/{elsewhere}")).await?;
    assert_eq!(status, 421, "{body}");
    assert!(body.contains(owner.as_str()), "{body}");

    // Freeze shard-c past its Lease: the others take its members over and claim them. Woken,
    // shard-c still believes it owns them; its writes must be refused, not land.
    let c_members = members_of(&owners, IDENTITIES[2]);
    c.pause()?;
    let two = [(IDENTITIES[0], &a), (IDENTITIES[1], &b)];
    let taken = "shard-a and shard-b take the frozen replica's members";
    eventually(taken, LIMIT, || settled(&two, &writers)).await?;
    c.resume()?;
    eventually("shard-c is back with its members", LIMIT, || async {
        partition(&all).await.is_some_and(|owners| {
            owners.values().any(|o| o == IDENTITIES[2]) && written_by_owners(&writers, &owners)
        })
    })
    .await?;

    // SIGKILL shard-c: its members must have an owner again within its Lease duration (the
    // bound allows 2 s more for a loaded machine, where starting the watches takes longer).
    let c_members_now = members_of(&partition(&all).await.unwrap(), IDENTITIES[2]);
    let killed = Instant::now();
    drop(c);
    let taken = "shard-a and shard-b take the killed replica's members";
    eventually(taken, LIMIT, || async { partition(&two).await.is_some() }).await?;
    let without_owner = killed.elapsed();
    let written = "the new owners write the status";
    eventually(written, LIMIT, || settled(&two, &writers)).await?;
    let bound_two = (1.25 * MEMBERS as f64 / 2.0).ceil() as usize;
    let owners = partition(&two).await.unwrap();
    for (identity, _) in two {
        let held = members_of(&owners, identity).len();
        assert!(
            held <= bound_two,
            "{identity} holds {held}, bound {bound_two}"
        );
    }
    // The new owners read the credentials they took over; the shares are exact again.
    let shares = "the survivors hold the credentials of their new shares";
    eventually(shares, LIMIT, || credentials_held_are_shares(&two, &owners)).await?;
    assert!(
        without_owner <= Duration::from_secs(LEASE_SECONDS + 2),
        "the killed replica's members went {without_owner:?} without an owner (Lease {LEASE_SECONDS} s)"
    );
    let moved_in = metric(&a, "tether_shard_moves_total", "direction=\"in\"").await?
        + metric(&b, "tether_shard_moves_total", "direction=\"in\"").await?;
    assert!(
        moved_in >= (c_members.len() + c_members_now.len()) as f64,
        "{moved_in} members moved in for two takeovers of {} and {}",
        c_members.len(),
        c_members_now.len()
    );

    let double = writers.double_writes();
    assert!(
        double.is_empty(),
        "status written without the claim: {double:?}"
    );
    let writes = writers.writes();
    assert!(
        writes.contains_key(IDENTITIES[2]),
        "shard-c wrote nothing: {writes:?}"
    );
    eprintln!(
        "sharding: {MEMBERS} members over 3 replicas, {} of shard-c's taken over {without_owner:?} \
         after its SIGKILL (Lease {LEASE_SECONDS} s); status writes per replica {writes:?}; \
         0 double writes",
        c_members_now.len()
    );
    Ok(())
}
