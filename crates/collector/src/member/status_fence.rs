//! [`StatusFence`]: with sharding, a `Cluster`'s status is written only by the replica that
//! holds its claim, and only over the `resourceVersion` that replica last saw.
//!
//! The claim is a condition in the status itself, [`OWNER_CONDITION`], whose message is
//! `<identity>/<generation>/<epoch>`: written in the same request as the status, so claim and
//! write cannot come apart, and needing no grant beyond the status subresource. A replica that
//! takes a member over writes the next epoch. Every write carries the `resourceVersion` of the
//! replica's own last write, so once a new owner has written, the old owner's next write is
//! refused with 409, even if it has not yet noticed the move: it reads the `Cluster`, sees the
//! other claim, and stops writing that member. It takes it back only if it still owns it after
//! its view of the group had time to settle, which is when views that disagreed agree again.

use std::{
    collections::BTreeMap,
    sync::{
        Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use cluster_registry::karmada::{Cluster, ClusterStatus};
use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::json;
use tokio::{sync::watch, time::Instant};

use crate::shard::{Owner, Shard, ShardMap, ShardView};

/// The condition type of a shard claim.
pub(crate) const OWNER_CONDITION: &str = "TetherShardOwner";

/// Why a status was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FenceError {
    /// This replica is not in the group (its Lease lapsed) or does not own the member.
    #[error("this replica does not own the member now")]
    NotOwner,
    /// Another replica holds the claim; this one waits before taking it over.
    // The claim is read back from the Cluster's status, anyone's to write: it is logged as
    // `Text`, bounded and without control characters.
    #[error(
        "replica {} holds the member's claim",
        member_client::text::Text::new(owner)
    )]
    ClaimedBy {
        /// The other claim, `<identity>/<generation>`.
        owner: String,
    },
    /// The control plane failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// A claim as a `Cluster` carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Claim {
    /// `<identity>/<generation>`.
    owner: String,
    epoch: u64,
    since: Time,
}

impl Claim {
    fn of(cluster: &Cluster) -> Option<Self> {
        let condition = cluster
            .status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == OWNER_CONDITION)?;
        let (owner, epoch) = condition.message.rsplit_once('/')?;
        Some(Self {
            owner: owner.to_owned(),
            epoch: epoch.parse().ok()?,
            since: condition.last_transition_time.clone(),
        })
    }

    fn condition(&self) -> Condition {
        Condition {
            type_: OWNER_CONDITION.to_owned(),
            status: "True".to_owned(),
            reason: "Claimed".to_owned(),
            message: format!("{}/{}", self.owner, self.epoch),
            last_transition_time: self.since.clone(),
            observed_generation: None,
        }
    }
}

/// What the fence knows of each member it writes.
pub(crate) struct StatusFence {
    clusters: Api<Cluster>,
    view: watch::Receiver<ShardView>,
    map: ShardMap,
    /// This replica's claim of each member it wrote, with the `resourceVersion` it wrote.
    claims: Mutex<BTreeMap<String, (String, Claim)>>,
    /// When another replica's claim was first seen, per member, until this one takes over.
    fenced_out: Mutex<BTreeMap<String, Instant>>,
    settle: Duration,
    manager: String,
    /// The view's term when the writer last asked [`rejoined`](Self::rejoined).
    term: AtomicU64,
}

impl StatusFence {
    pub(crate) fn new(clusters: Api<Cluster>, shard: &Shard, manager: String) -> Self {
        Self::from_parts(
            clusters,
            shard.view.clone(),
            shard.map.clone(),
            shard.settle(),
            manager,
        )
    }

    fn from_parts(
        clusters: Api<Cluster>,
        view: watch::Receiver<ShardView>,
        map: ShardMap,
        settle: Duration,
        manager: String,
    ) -> Self {
        Self {
            clusters,
            view,
            map,
            claims: Mutex::default(),
            fenced_out: Mutex::default(),
            settle,
            manager,
            term: AtomicU64::new(0),
        }
    }

    /// Whether this replica (re)joined the group since the last call: then every claim is
    /// forgotten, and the writer should write everything again.
    pub(crate) fn rejoined(&self) -> bool {
        let term = self.view.borrow().term;
        let rejoined = self.term.swap(term, Ordering::Relaxed) != term;
        if rejoined {
            self.claims().clear();
        }
        rejoined
    }

    /// Forgets every member not in `keep`: a member regained later is claimed afresh.
    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.claims().retain(|member, _| keep(member));
        self.fenced_out_since().retain(|member, _| keep(member));
    }

    // Held only to read or replace an entry; never across an `.await`.
    fn claims(&self) -> MutexGuard<'_, BTreeMap<String, (String, Claim)>> {
        self.claims.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fenced_out_since(&self) -> MutexGuard<'_, BTreeMap<String, Instant>> {
        self.fenced_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `status` into `member`'s `Cluster` if this replica owns it and its claim holds.
    pub(crate) async fn write(
        &self,
        member: &str,
        status: &ClusterStatus,
    ) -> Result<(), FenceError> {
        let owner = self.owner(member)?;
        for _ in 0..2 {
            let held = self.claims().get(member).cloned();
            let (version, claim) = match held {
                Some(held) => held,
                None => self.claim(member, &owner).await?,
            };
            let mut status = status.clone();
            status.conditions.retain(|c| c.type_ != OWNER_CONDITION);
            status.conditions.push(claim.condition());
            let patch = json!({
                "metadata": { "resourceVersion": version },
                "status": status,
            });
            match self
                .clusters
                .patch_status(member, &self.params(), &Patch::Merge(&patch))
                .await
            {
                Ok(written) => {
                    self.hold(member, &written, claim);
                    return Ok(());
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    // Someone wrote the Cluster since: whose claim stands now?
                    self.claims().remove(member);
                    let current = self.clusters.get(member).await?;
                    match Claim::of(&current) {
                        Some(now) if now.owner == owner => self.hold(member, &current, now),
                        Some(now) => return Err(self.fence_out(member, now.owner)),
                        // Someone else's write without a claim (Karmada's own, say): again.
                        None => {}
                    }
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(FenceError::NotOwner)
    }

    /// This replica's `<identity>/<generation>`, if it may write `member` now.
    fn owner(&self, member: &str) -> Result<String, FenceError> {
        let me = self.view.borrow().me.clone().ok_or(FenceError::NotOwner)?;
        if self.map.owner(member) != Owner::Me {
            return Err(FenceError::NotOwner);
        }
        Ok(me.fence())
    }

    /// The claim this replica writes `member` under, and the `resourceVersion` to write over.
    async fn claim(&self, member: &str, owner: &str) -> Result<(String, Claim), FenceError> {
        let current = self.clusters.get(member).await?;
        let version = current.resource_version().unwrap_or_default();
        let epoch = match Claim::of(&current) {
            Some(claim) if claim.owner == owner => return Ok((version, claim)),
            Some(claim) => {
                // Another claim: take it over only once the views had time to agree.
                let seen = *self
                    .fenced_out_since()
                    .entry(member.to_owned())
                    .or_insert_with(Instant::now);
                if seen.elapsed() < self.settle {
                    return Err(FenceError::ClaimedBy { owner: claim.owner });
                }
                // The epoch is read back from the Cluster, anyone's to forge.
                claim.epoch.saturating_add(1)
            }
            None => 1,
        };
        tracing::info!(member, owner, epoch, "taking the member's claim");
        self.fenced_out_since().remove(member);
        let claim = Claim {
            owner: owner.to_owned(),
            epoch,
            since: Time(Timestamp::now()),
        };
        Ok((version, claim))
    }

    fn fence_out(&self, member: &str, owner: String) -> FenceError {
        self.fenced_out_since()
            .entry(member.to_owned())
            .or_insert_with(Instant::now);
        FenceError::ClaimedBy { owner }
    }

    fn hold(&self, member: &str, cluster: &Cluster, claim: Claim) {
        let version = cluster.resource_version().unwrap_or_default();
        self.claims().insert(member.to_owned(), (version, claim));
    }

    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.manager.clone()),
            ..PatchParams::default()
        }
    }
}

#[cfg(test)]
mod tests;
