//! [`Liveness`]: which of the group's Leases are live, judged by this replica's clock and the
//! group's configured duration, never by what a Lease claims.
//!
//! Every field of a Lease is written by whoever can write Leases in the namespace, so none is
//! trusted for arithmetic: a Lease claiming `leaseDurationSeconds: 2147483647` would otherwise
//! stay live for decades after its replica died, and one claiming a second would be dropped
//! between two renewals. The group shares one duration (`--shard-lease-seconds`); a replica
//! configured otherwise is judged by this one's.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use tokio::time::Instant;

use super::{args::is_lease_identity, membership::LEASE_PREFIX, view::Member};

/// The most replicas a group holds. Beyond it, the replicas with the lowest identities are
/// kept and the rest ignored, so every replica drops the same ones; placing members costs
/// members × replicas, which this keeps bounded whatever Leases appear.
pub(crate) const MAX_GROUP: usize = 256;

/// When each Lease's `resourceVersion` was last seen to change, and how long Leases last.
pub(crate) struct Liveness {
    lease_duration: Duration,
    /// How long after its last change a Lease counts as expired ([`expiry`]).
    expiry: Duration,
    seen: BTreeMap<String, (String, Instant)>,
}

/// The live replicas of one read.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Live {
    /// The identities whose Leases are live, at most [`MAX_GROUP`].
    pub(crate) replicas: BTreeSet<String>,
    /// Live Leases ignored because the group was full.
    pub(crate) over_cap: usize,
}

impl Liveness {
    /// Judges Leases of `lease_duration`, read every `poll`.
    pub(crate) fn new(lease_duration: Duration, poll: Duration) -> Self {
        let expiry = expiry(lease_duration, poll);
        Self {
            lease_duration,
            expiry,
            seen: BTreeMap::new(),
        }
    }

    /// The live replicas among `leases`, read at `now` (monotonic) and `wall` (the clock
    /// `renewTime` is written on).
    pub(crate) fn judge(&mut self, leases: &[Lease], now: Instant, wall: Timestamp) -> Live {
        let duration = self.lease_duration;
        let mut replicas = BTreeSet::new();
        let mut present = BTreeSet::new();
        for lease in leases {
            let (Some(name), Some(version)) = (
                lease.metadata.name.as_ref(),
                lease.metadata.resource_version.as_ref(),
            ) else {
                continue;
            };
            let Some(spec) = &lease.spec else { continue };
            let Some(holder) = &spec.holder_identity else {
                continue;
            };
            // Only a replica's own Lease counts for it: a Lease named for another identity
            // would let one replica appear as two. Its holder must make a Lease name, as the
            // apiserver's check of the name ensures, before it reaches logs and redirects.
            if name.strip_prefix(LEASE_PREFIX) != Some(holder.as_str())
                || !is_lease_identity(holder)
            {
                continue;
            }
            present.insert(name.clone());
            let changed = match self.seen.get(name) {
                Some((seen, at)) if seen == version => *at,
                _ => {
                    // A renewTime in the future counts as now; one before the duration as
                    // expired. Either way only this replica's clock dates the Lease after.
                    let age = spec.renew_time.as_ref().map_or(duration, |renewed| {
                        Duration::try_from(wall.duration_since(renewed.0)).unwrap_or_default()
                    });
                    let at = now.checked_sub(age.min(duration)).unwrap_or(now);
                    self.seen.insert(name.clone(), (version.clone(), at));
                    at
                }
            };
            if now.saturating_duration_since(changed) < self.expiry {
                replicas.insert(holder.clone());
            }
        }
        self.seen.retain(|name, _| present.contains(name));
        let over_cap = cap(&mut replicas);
        Live { replicas, over_cap }
    }
}

impl Live {
    /// The group with this replica, `identity`, in it while it is a member (`me`) and out of
    /// it otherwise. A replica the full group leaves out is no member: the others place its
    /// members without it, so it must not write.
    pub(crate) fn with(mut self, identity: &str, me: Option<Member>) -> (Self, Option<Member>) {
        match &me {
            Some(me) => self.replicas.insert(me.identity.clone()),
            None => self.replicas.remove(identity),
        };
        self.over_cap = self.over_cap.saturating_add(cap(&mut self.replicas));
        let me = me.filter(|me| self.replicas.contains(&me.identity));
        (self, me)
    }
}

/// Keeps the [`MAX_GROUP`] lowest identities of `replicas`; how many it dropped.
fn cap(replicas: &mut BTreeSet<String>) -> usize {
    let Some(first_over) = replicas.iter().nth(MAX_GROUP).cloned() else {
        return 0;
    };
    replicas.split_off(&first_over).len()
}

/// How long after its last renewal another replica's Lease of `duration` counts as expired:
/// early enough that its members have a new owner within `duration` (two reads of `poll` are
/// left for noticing and starting them), late enough that a replica renewing every third of
/// it is never taken for dead (twice its renewal period). The replica itself stops writing
/// only at `duration`, and a takeover's claim waits two reads more, so the early expiry moves
/// watches, never writes, ahead of time.
pub(crate) fn expiry(duration: Duration, poll: Duration) -> Duration {
    duration
        .saturating_sub(poll.saturating_mul(2))
        .max(duration.saturating_mul(2) / 3)
}

#[cfg(test)]
mod tests;
