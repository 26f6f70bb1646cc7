//! Writes members' status back to the control plane: Karmada `Cluster` status and Events.
//!
//! Whoever observes a member submits its status and goes on: the writes happen in one task of
//! their own, so a control plane that is slow or frozen delays no probe and no registry event.
//! Only the latest status of each member waits to be written (memory is bounded by the member
//! count), and a write that fails is tried again.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use cluster_registry::karmada::Cluster;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client, Resource as _,
    api::{Patch, PatchParams},
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tokio::sync::{Notify, watch};

use super::{
    health::MemberHealth,
    leadership::{LeaderWrites, concurrently, write_while_leading},
    status::{MemberStatus, READY_CONDITION},
    status_fence::{FenceError, StatusFence},
};
use crate::shard::Shard;

/// Field manager for status patches, and the reporting controller of Events.
const MANAGER: &str = "tether-collector";

/// The handle members' observers submit statuses through. Cloning is cheap.
#[derive(Clone)]
pub(crate) struct StatusWriter {
    queue: Arc<Queue>,
}

/// The latest status submitted for each member, and the bell that wakes the writer.
#[derive(Default)]
struct Queue {
    latest: Mutex<BTreeMap<String, MemberStatus>>,
    wake: Notify,
}

impl Queue {
    // Held only to copy or replace entries; a panic cannot leave one half-written.
    fn latest(&self) -> MutexGuard<'_, BTreeMap<String, MemberStatus>> {
        self.latest.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl StatusWriter {
    /// A writer over the control plane's `client`, reporting Events as `identity`, writing only
    /// while `leader` (if given) says this replica leads, or with `shard`, only the members
    /// this replica owns and has claimed; and the future that writes. Nothing is written unless
    /// the future runs.
    pub(crate) fn new(
        client: Client,
        identity: String,
        leader: Option<watch::Receiver<bool>>,
        shard: Option<&Shard>,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let clusters: Api<Cluster> = Api::all(client.clone());
        // Each replica of a shard group writes as itself, so the Cluster's managedFields
        // say which replica wrote its status last.
        let fence = shard.map(|shard| {
            StatusFence::new(clusters.clone(), shard, format!("{MANAGER}.{identity}"))
        });
        let reporter = Reporter {
            controller: MANAGER.to_owned(),
            instance: Some(identity),
        };
        let queue = Arc::new(Queue::default());
        let writes = Writes {
            clusters,
            recorder: Recorder::new(client, reporter),
            queue: queue.clone(),
            written: BTreeMap::new(),
            fence,
        };
        (Self { queue }, write_while_leading(writes, leader))
    }

    /// Submits `member`'s status; it is written (with an Event if its reason changed) when this
    /// replica leads and the Cluster does not already say it. Never waits for the control plane.
    pub(crate) fn submit(&self, member: &str, status: &MemberStatus) {
        let mut latest = self.queue.latest();
        if latest.get(member) == Some(status) {
            return;
        }
        latest.insert(member.to_owned(), status.clone());
        drop(latest);
        self.queue.wake.notify_one();
    }

    /// Stops writing for `member`.
    pub(crate) fn forget(&self, member: &str) {
        self.queue.latest().remove(member);
    }
}

/// The writing side: what it wrote while leading, to write only what changed.
struct Writes {
    clusters: Api<Cluster>,
    recorder: Recorder,
    queue: Arc<Queue>,
    /// What this replica wrote since it last became leader (or gained the member).
    written: BTreeMap<String, MemberStatus>,
    /// With sharding: the claims status writes are fenced by.
    fence: Option<StatusFence>,
}

impl LeaderWrites for Writes {
    async fn woken(&mut self) {
        self.queue.wake.notified().await;
    }

    fn leadership_changed(&mut self) {
        self.written.clear();
    }

    /// Writes every submitted status that differs from what this replica wrote.
    async fn write_due(&mut self) {
        {
            // A member forgotten (removed, or moved to another replica) and seen again is
            // written, and claimed, afresh.
            let latest = self.queue.latest();
            self.written.retain(|member, _| latest.contains_key(member));
            if let Some(fence) = &self.fence {
                fence.retain(|member| latest.contains_key(member));
                if fence.rejoined() {
                    self.written.clear();
                }
            }
        }
        let due: Vec<(String, MemberStatus, Option<MemberHealth>)> = self
            .queue
            .latest()
            .iter()
            .filter(|(member, status)| {
                self.written
                    .get(*member)
                    .is_none_or(|written| status.differs_from(written))
            })
            .map(|(member, status)| {
                let previous = self.written.get(member).map(|w| w.health().clone());
                (member.clone(), status.clone(), previous)
            })
            .collect();
        let this = &*self;
        let done = concurrently(due, |(member, status, previous)| async move {
            let written = this.publish(&member, &status, previous.as_ref()).await;
            (written, member, status)
        })
        .await;
        for (written, member, status) in done {
            // Forgotten meanwhile: keep it forgotten.
            if written && self.queue.latest().contains_key(&member) {
                self.written.insert(member, status);
            }
        }
    }
}

impl Writes {
    /// Writes `status` and, if its reason changed, records an Event. Returns whether the status
    /// was written. `previous` is what this replica last wrote; without it (the first write
    /// since it became leader) the transition is judged against the `Cluster`'s `Ready` reason
    /// (one GET): a transition it saw while following was written, and recorded, by no one.
    async fn publish(
        &self,
        member: &str,
        status: &MemberStatus,
        previous: Option<&MemberHealth>,
    ) -> bool {
        let next = status.health();
        let transition = match previous {
            Some(previous) => {
                (previous.reason() != next.reason()).then(|| previous.reason().to_owned())
            }
            None => match self.written_ready_reason(member).await {
                Ok(Some(written)) => (written != next.reason()).then_some(written),
                Ok(None) => Some(MemberHealth::Unknown.reason().to_owned()),
                Err(err) => {
                    tracing::warn!(member, error = %err, "reading Cluster status failed");
                    None
                }
            },
        };
        match self.write(member, status).await {
            Ok(()) => {}
            Err(err @ (FenceError::NotOwner | FenceError::ClaimedBy { .. })) => {
                tracing::info!(member, reason = %err, "not writing Cluster status: fenced");
                return false;
            }
            Err(err) => {
                tracing::warn!(member, error = %err, "writing Cluster status failed");
                return false;
            }
        }
        if let Some(from) = transition
            && let Err(err) = self.record_transition(member, &from, next).await
        {
            tracing::warn!(member, error = %err, "recording Event failed");
        }
        true
    }

    /// The reason of the `Ready` condition the member's `Cluster` holds now, if any.
    async fn written_ready_reason(&self, member: &str) -> Result<Option<String>, kube::Error> {
        let cluster = self.clusters.get(member).await?;
        Ok(cluster
            .status
            .into_iter()
            .flat_map(|status| status.conditions)
            .find(|c| c.type_ == READY_CONDITION)
            // Anyone who can write the Cluster's status wrote this; it reaches an Event.
            .map(|c| member_client::text::Text::new(&c.reason).to_string()))
    }

    async fn write(&self, member: &str, status: &MemberStatus) -> Result<(), FenceError> {
        if let Some(fence) = &self.fence {
            return fence.write(member, &status.cluster_status()).await;
        }
        let patch = serde_json::json!({ "status": status.cluster_status() });
        let params = PatchParams {
            field_manager: Some(MANAGER.to_owned()),
            ..PatchParams::default()
        };
        self.clusters
            .patch_status(member, &params, &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(FenceError::from)
    }

    /// Records an Event on the member's `Cluster` for a change of health from the condition
    /// reason `previous`: a Warning when the member is not Ready, else Normal.
    async fn record_transition(
        &self,
        member: &str,
        previous: &str,
        next: &MemberHealth,
    ) -> Result<(), kube::Error> {
        let type_ = if next.ready_status() == "False" {
            EventType::Warning
        } else {
            EventType::Normal
        };
        let event = Event {
            type_,
            reason: next.reason().to_owned(),
            note: Some(format!("{} (was {previous})", next.message())),
            action: "Probe".to_owned(),
            secondary: None,
        };
        let reference = ObjectReference {
            api_version: Some(Cluster::api_version(&()).into_owned()),
            kind: Some(Cluster::kind(&()).into_owned()),
            name: Some(member.to_owned()),
            ..ObjectReference::default()
        };
        self.recorder.publish(&event, &reference).await
    }
}

#[cfg(test)]
mod tests;
