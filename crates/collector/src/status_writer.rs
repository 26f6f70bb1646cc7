//! Writes members' status back to the control plane: Karmada `Cluster` status and Events.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tokio::sync::watch;

use crate::{member_health::MemberHealth, member_status::MemberStatus};

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

    /// Records an Event on the member's `Cluster` for a change of health.
    ///
    /// # Errors
    /// The control plane's error.
    pub async fn record_transition(
        &self,
        member: &str,
        previous: &MemberHealth,
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
            note: Some(format!("{} (was {})", next.message(), previous.reason())),
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
