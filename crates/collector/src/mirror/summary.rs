//! What the read API shows of a member: its Karmada `Cluster` status and what is mirrored.

use cluster_registry::karmada::ClusterStatus;
use serde::Serialize;

/// One member as `/api/v1/clusters` lists it, in Karmada's `Cluster.status` vocabulary.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterSummary {
    /// The member's name.
    pub(crate) name: String,
    /// `conditions`, `kubernetesVersion` and `nodeSummary`, as written back to the control
    /// plane.
    #[serde(flatten)]
    pub(crate) status: ClusterStatus,
    /// The mirrored resources, as `group/version/resource` (`core` for the core group).
    pub(crate) resources: Vec<String>,
}
