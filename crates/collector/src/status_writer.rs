//! Writes members' status back to the control plane: Karmada `Cluster` status and Events.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tokio::sync::watch;

use crate::{
    member_health::MemberHealth,
    member_status::{MemberStatus, READY_CONDITION},
};

/// Field manager for status patches, and the reporting controller of Events.
pub const MANAGER: &str = "tether-collector";

/// Patches `cluster.karmada.io/v1alpha1` `Cluster` status and records an Event per transition.
///
/// With leader election, only the leader writes; [`is_leader`](Self::is_leader) says whether
/// this replica may.
#[derive(Clone)]
pub struct StatusWriter {
    clusters: Api<DynamicObject>,
    recorder: Recorder,
    leader: Option<watch::Receiver<bool>>,
}

impl StatusWriter {
    /// A writer over the control plane's `client`, reporting Events as `identity`, writing only
    /// while `leader` (if given) says this replica leads.
    pub fn new(client: Client, identity: String, leader: Option<watch::Receiver<bool>>) -> Self {
        let resource = ApiResource {
            group: "cluster.karmada.io".to_owned(),
            version: "v1alpha1".to_owned(),
            api_version: "cluster.karmada.io/v1alpha1".to_owned(),
            kind: "Cluster".to_owned(),
            plural: "clusters".to_owned(),
        };
        let reporter = Reporter {
            controller: MANAGER.to_owned(),
            instance: Some(identity),
        };
        Self {
            clusters: Api::all_with(client.clone(), &resource),
            recorder: Recorder::new(client, reporter),
            leader,
        }
    }

    /// Whether this replica may write now (always, without leader election).
    pub fn is_leader(&self) -> bool {
        self.leader.as_ref().is_none_or(|leader| *leader.borrow())
    }

    /// Leadership changes, with leader election; `None` without (this replica always writes).
    pub fn leadership(&self) -> Option<watch::Receiver<bool>> {
        self.leader.clone()
    }

    /// Writes `status` and, if its health is a transition, records an Event. Returns whether
    /// the status was written; failures are logged, and the caller writes again later.
    ///
    /// `previous` is this replica's last view of the member. On the replica's first write
    /// since it became leader (`first_as_leader`), the transition is judged against the
    /// `Cluster`'s `Ready` reason instead (one GET).
    pub async fn publish(
        &self,
        member: &str,
        status: &MemberStatus,
        previous: &MemberHealth,
        first_as_leader: bool,
    ) -> bool {
        let transition = self
            .transition_from(member, previous, status.health(), first_as_leader)
            .await;
        if let Err(err) = self.write(member, status).await {
            tracing::warn!(member, error = %err, "writing Cluster status failed");
            return false;
        }
        if let Some(from) = transition
            && let Err(err) = self.record_transition(member, &from, status.health()).await
        {
            tracing::warn!(member, error = %err, "recording Event failed");
        }
        true
    }

    /// The reason an Event for writing `next` should give as the one before, or `None` when
    /// writing `next` is no transition.
    ///
    /// `previous` is this replica's own last view, which is what the Cluster says as long as
    /// this replica has been writing. On its first write since it became leader
    /// (`first_as_leader`) the Cluster's `Ready` reason is read instead: a transition it saw
    /// while following was written, and recorded, by no one.
    async fn transition_from(
        &self,
        member: &str,
        previous: &MemberHealth,
        next: &MemberHealth,
        first_as_leader: bool,
    ) -> Option<String> {
        let local = || (previous != next).then(|| previous.reason().to_owned());
        if !first_as_leader {
            return local();
        }
        match self.written_ready_reason(member).await {
            Ok(Some(written)) => (written != next.reason()).then_some(written),
            Ok(None) => Some(MemberHealth::Unknown.reason().to_owned()),
            Err(err) => {
                tracing::warn!(member, error = %err, "reading Cluster status failed");
                local()
            }
        }
    }

    /// The reason of the `Ready` condition the member's `Cluster` holds now, if any.
    async fn written_ready_reason(&self, member: &str) -> Result<Option<String>, kube::Error> {
        let cluster = self.clusters.get(member).await?;
        let conditions = cluster.data.pointer("/status/conditions");
        Ok(conditions
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(READY_CONDITION))
            .and_then(|c| c.get("reason")?.as_str())
            .map(str::to_owned))
    }

    /// Writes `status` into the member's `Cluster`.
    ///
    /// # Errors
    /// The control plane's error (the Cluster was deleted, the collector may not patch it, …).
    pub async fn write(&self, member: &str, status: &MemberStatus) -> Result<(), kube::Error> {
        self.clusters
            .patch_status(
                member,
                &PatchParams {
                    field_manager: Some(MANAGER.to_owned()),
                    ..PatchParams::default()
                },
                &Patch::Merge(status.status_patch()),
            )
            .await
            .map(drop)
    }

    /// Records an Event on the member's `Cluster` for a change of health from the condition
    /// reason `previous`.
    ///
    /// # Errors
    /// The control plane's error.
    pub async fn record_transition(
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
            api_version: Some("cluster.karmada.io/v1alpha1".to_owned()),
            kind: Some("Cluster".to_owned()),
            name: Some(member.to_owned()),
            ..ObjectReference::default()
        };
        self.recorder.publish(&event, &reference).await
    }
}
