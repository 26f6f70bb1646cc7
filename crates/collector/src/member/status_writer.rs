//! Writes members' status back to the control plane: Karmada `Cluster` status and Events.

use cluster_registry::karmada::{Cluster, ClusterStatus};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client, Resource as _,
    api::{Patch, PatchParams},
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use serde::Serialize;
use tokio::sync::watch;

use super::{
    health::MemberHealth,
    status::{MemberStatus, READY_CONDITION},
};

/// Field manager for status patches, and the reporting controller of Events.
const MANAGER: &str = "tether-collector";

/// The merge patch of a `Cluster`'s status subresource.
#[derive(Debug, Serialize)]
struct StatusPatch {
    status: ClusterStatus,
}

/// Patches Karmada `Cluster` status and records an Event per transition.
///
/// With leader election, only the leader writes; [`is_leader`](Self::is_leader) says whether
/// this replica may.
#[derive(Clone)]
pub(crate) struct StatusWriter {
    clusters: Api<Cluster>,
    recorder: Recorder,
    leader: Option<watch::Receiver<bool>>,
}

impl StatusWriter {
    /// A writer over the control plane's `client`, reporting Events as `identity`, writing only
    /// while `leader` (if given) says this replica leads.
    pub(crate) fn new(
        client: Client,
        identity: String,
        leader: Option<watch::Receiver<bool>>,
    ) -> Self {
        let reporter = Reporter {
            controller: MANAGER.to_owned(),
            instance: Some(identity),
        };
        Self {
            clusters: Api::all(client.clone()),
            recorder: Recorder::new(client, reporter),
            leader,
        }
    }

    /// Whether this replica may write now (always, without leader election).
    pub(crate) fn is_leader(&self) -> bool {
        self.leader.as_ref().is_none_or(|leader| *leader.borrow())
    }

    /// Leadership changes, with leader election; `None` without (this replica always writes).
    pub(crate) fn leadership(&self) -> Option<watch::Receiver<bool>> {
        self.leader.clone()
    }

    /// Writes `status` and, if its health is a transition, records an Event. Returns whether
    /// the status was written; failures are logged, and the caller writes again later.
    ///
    /// `previous` is this replica's last view of the member. On the replica's first write
    /// since it became leader (`first_as_leader`), the transition is judged against the
    /// `Cluster`'s `Ready` reason instead (one GET): a transition it saw while following was
    /// written, and recorded, by no one.
    pub(crate) async fn publish(
        &self,
        member: &str,
        status: &MemberStatus,
        previous: &MemberHealth,
        first_as_leader: bool,
    ) -> bool {
        let next = status.health();
        let transition = if first_as_leader {
            match self.written_ready_reason(member).await {
                Ok(Some(written)) => (written != next.reason()).then_some(written),
                Ok(None) => Some(MemberHealth::Unknown.reason().to_owned()),
                Err(err) => {
                    tracing::warn!(member, error = %err, "reading Cluster status failed");
                    (previous != next).then(|| previous.reason().to_owned())
                }
            }
        } else {
            (previous != next).then(|| previous.reason().to_owned())
        };
        if let Err(err) = self.write(member, status).await {
            tracing::warn!(member, error = %err, "writing Cluster status failed");
            return false;
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
            .map(|c| c.reason))
    }

    async fn write(&self, member: &str, status: &MemberStatus) -> Result<(), kube::Error> {
        let patch = StatusPatch {
            status: status.cluster_status(),
        };
        let params = PatchParams {
            field_manager: Some(MANAGER.to_owned()),
            ..PatchParams::default()
        };
        self.clusters
            .patch_status(member, &params, &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    /// Records an Event on the member's `Cluster` for a change of health from the condition
    /// reason `previous`.
    async fn record_transition(
        &self,
        member: &str,
        previous: &str,
        next: &MemberHealth,
    ) -> Result<(), kube::Error> {
        let type_ = if *next == MemberHealth::Healthy {
            EventType::Normal
        } else {
            EventType::Warning
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
