//! Who is in the shard group: each replica's own Lease, `tether-shard-<identity>`, renewed
//! every third of its duration; the live replicas are the Leases that are not expired.
//!
//! Expiry is judged the way client-go's leader election judges it, on this replica's own
//! clock: a Lease is live while its `resourceVersion` changed less than [`expiry`] ago (its
//! duration less two reads, so that its members have an owner again within the duration). A
//! Lease seen for the first time is dated by its `renewTime`, so a restarted replica does not
//! wait a whole duration to notice a replica that is long gone.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ListParams, ObjectMeta, PostParams},
};
use tokio::{sync::watch, time::Instant};

use super::view::{Member, ShardView};

/// The label every shard Lease carries; the group is its value.
pub(crate) const GROUP_LABEL: &str = "tether.io/shard-group";

/// The most shard Leases one read takes in.
const MAX_REPLICAS: u32 = 1000;

/// The prefix of a replica's Lease name.
pub(crate) const LEASE_PREFIX: &str = "tether-shard-";

/// How a replica takes part.
#[derive(Clone, Debug)]
pub(crate) struct MembershipConfig {
    pub(crate) namespace: String,
    pub(crate) group: String,
    pub(crate) identity: String,
    pub(crate) lease_duration: Duration,
    /// The UID of this replica's pod (named after its identity): the Lease is owned by the
    /// pod, so the garbage collector deletes it with the pod and Leases of gone pods do not
    /// pile up.
    pub(crate) pod_uid: Option<String>,
}

impl MembershipConfig {
    /// This replica's Lease name.
    pub(crate) fn lease_name(&self) -> String {
        format!("{LEASE_PREFIX}{}", self.identity)
    }

    /// How often the Lease is renewed: a third of its duration.
    fn renew_period(&self) -> Duration {
        self.lease_duration / 3
    }

    /// How often the group's Leases are read: at most a second, so a released or expired
    /// Lease is noticed within a second of it.
    pub(crate) fn poll_period(&self) -> Duration {
        self.renew_period().min(Duration::from_secs(1))
    }
}

/// Keeps this replica's Lease and publishes the group as it changes.
pub(crate) struct Membership {
    leases: Api<Lease>,
    config: MembershipConfig,
    /// When each Lease's `resourceVersion` was last seen to change, on this replica's clock.
    seen: BTreeMap<String, (String, Instant)>,
    /// When this replica last renewed its own Lease, and with which generation.
    renewed: Option<(Instant, i32)>,
    /// The view's `term`, and whether this replica was in the group at the last read.
    term: u64,
    joined: bool,
}

impl Membership {
    pub(crate) fn new(client: Client, config: MembershipConfig) -> Self {
        Self {
            leases: Api::namespaced(client, &config.namespace),
            config,
            seen: BTreeMap::new(),
            renewed: None,
            term: 0,
            joined: false,
        }
    }

    /// Renews and reads until `view` has no receiver left; every change is sent on `view`.
    pub(crate) async fn run(mut self, view: watch::Sender<ShardView>) {
        let mut tick = tokio::time::interval(self.config.poll_period());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = view.closed() => return,
                _ = tick.tick() => {}
            }
            // Read before renewing: a replica woken from a pause longer than its Lease sees
            // that it lapsed (and so rejoins with a new term) rather than renewing over it.
            self.publish(&view).await;
            let now = Instant::now();
            let due = self
                .renewed
                .is_none_or(|(at, _)| now.duration_since(at) >= self.config.renew_period());
            if due {
                match self.renew().await {
                    // Just (re)joined: the others see the Lease from their next read, so take
                    // the members at once rather than a read later.
                    Ok(()) if !self.joined => self.publish(&view).await,
                    Ok(()) => {}
                    Err(err) => {
                        tracing::warn!(error = %err, lease = %self.config.lease_name(), "renewing the shard Lease failed");
                    }
                }
            }
        }
    }

    /// Reads the group and sends the view if it changed.
    async fn publish(&mut self, view: &watch::Sender<ShardView>) {
        match self.read().await {
            Ok(next) => {
                view.send_if_modified(|current| {
                    let changed = *current != next;
                    if changed {
                        *current = next;
                    }
                    changed
                });
            }
            Err(err) => tracing::warn!(error = %err, "reading the shard Leases failed"),
        }
    }

    /// Creates this replica's Lease (a new generation) or renews it.
    async fn renew(&mut self) -> Result<(), kube::Error> {
        let name = self.config.lease_name();
        let now = MicroTime(Timestamp::now());
        let started = Instant::now();
        let existing = self.leases.get_opt(&name).await?;
        let generation = match (&self.renewed, &existing) {
            (Some((_, generation)), _) => *generation,
            // A new process is a new generation of this identity: fences written by the
            // previous one no longer count as this one's.
            (None, Some(lease)) => lease_transitions(lease) + 1,
            (None, None) => 1,
        };
        let mut lease = existing.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Lease::default()
        });
        lease
            .metadata
            .labels
            .get_or_insert_default()
            .insert(GROUP_LABEL.to_owned(), self.config.group.clone());
        if let Some(uid) = &self.config.pod_uid {
            lease.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Pod".to_owned(),
                name: self.config.identity.clone(),
                uid: uid.clone(),
                ..OwnerReference::default()
            }]);
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if self.renewed.is_none() {
            spec.acquire_time = Some(now.clone());
        }
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds =
            Some(i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX));
        spec.lease_transitions = Some(generation);
        spec.renew_time = Some(now);
        if lease.metadata.resource_version.is_some() {
            self.leases
                .replace(&name, &PostParams::default(), &lease)
                .await?;
        } else {
            self.leases.create(&PostParams::default(), &lease).await?;
        }
        self.renewed = Some((started, generation));
        Ok(())
    }

    /// The group as the Leases say now.
    async fn read(&mut self) -> Result<ShardView, kube::Error> {
        let selector = format!("{GROUP_LABEL}={}", self.config.group);
        // One page: a group of more replicas than this is not one Tether can be.
        let list = self
            .leases
            .list(&ListParams::default().labels(&selector).limit(MAX_REPLICAS))
            .await?;
        let now = Instant::now();
        let wall = Timestamp::now();
        let mut replicas = BTreeSet::new();
        let mut present = BTreeSet::new();
        for lease in list.items {
            let (Some(name), Some(version)) = (
                lease.metadata.name.clone(),
                lease.metadata.resource_version.clone(),
            ) else {
                continue;
            };
            let Some(spec) = &lease.spec else { continue };
            let Some(holder) = spec.holder_identity.clone() else {
                continue;
            };
            // Only a replica's own Lease counts for it: a Lease named for another identity
            // would let one replica appear as two.
            if name != format!("{LEASE_PREFIX}{holder}") {
                continue;
            }
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            );
            present.insert(name.clone());
            let changed = match self.seen.get(&name) {
                Some((seen, at)) if *seen == version => *at,
                _ => {
                    let age = spec.renew_time.as_ref().map_or(duration, |renewed| {
                        let age = wall.duration_since(renewed.0);
                        Duration::try_from(age).unwrap_or(Duration::ZERO)
                    });
                    let at = now.checked_sub(age.min(duration)).unwrap_or(now);
                    self.seen.insert(name.clone(), (version, at));
                    at
                }
            };
            if now.duration_since(changed) < expiry(duration, self.config.poll_period()) {
                replicas.insert(holder);
            }
        }
        self.seen.retain(|name, _| present.contains(name));
        // This replica is a member only while its own renewal is within the duration, by its
        // own clock: once it cannot renew, it must assume the others have taken over.
        let me = self
            .renewed
            .filter(|(at, _)| now.duration_since(*at) < self.config.lease_duration)
            .map(|(_, generation)| Member {
                identity: self.config.identity.clone(),
                generation,
            });
        match &me {
            Some(me) => replicas.insert(me.identity.clone()),
            None => replicas.remove(&self.config.identity),
        };
        if me.is_some() && !self.joined {
            self.term += 1;
        }
        self.joined = me.is_some();
        Ok(ShardView {
            replicas,
            me,
            term: self.term,
        })
    }

    /// Gives this replica's Lease up (no holder), so the others take its members over at once.
    /// The Lease itself stays for the next process of this identity, or until the garbage
    /// collector deletes it with its pod.
    pub(crate) async fn release(client: Client, config: &MembershipConfig, deadline: Duration) {
        let leases: Api<Lease> = Api::namespaced(client, &config.namespace);
        let name = config.lease_name();
        let release = async {
            let mut lease = leases.get(&name).await?;
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.renew_time = None;
            }
            leases.replace(&name, &PostParams::default(), &lease).await
        };
        match tokio::time::timeout(deadline, release).await {
            Ok(Ok(_)) => tracing::info!(lease = %name, "released the shard Lease"),
            Ok(Err(err)) => {
                tracing::warn!(lease = %name, error = %err, "releasing the shard Lease failed")
            }
            Err(_) => {
                tracing::warn!(lease = %name, ?deadline, "releasing the shard Lease timed out")
            }
        }
    }
}

/// How long after its last renewal another replica's Lease of `duration` counts as expired:
/// early enough that its members have a new owner within `duration` (two reads of `poll` are
/// left for noticing and starting them), late enough that a replica renewing every third of
/// it is never taken for dead (twice its renewal period). The replica itself stops writing
/// only at `duration`, and a takeover's claim waits two reads more, so the early expiry moves
/// watches, never writes, ahead of time.
fn expiry(duration: Duration, poll: Duration) -> Duration {
    duration.saturating_sub(poll * 2).max(duration * 2 / 3)
}

fn lease_transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.lease_transitions)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_expires_two_reads_early_but_never_within_two_renewals() {
        let second = Duration::from_secs(1);
        assert_eq!(
            expiry(Duration::from_secs(15), second),
            Duration::from_secs(13)
        );
        assert_eq!(
            expiry(Duration::from_secs(6), second),
            Duration::from_secs(4)
        );
        assert_eq!(
            expiry(Duration::from_secs(3), second),
            Duration::from_secs(2)
        );
    }
}
