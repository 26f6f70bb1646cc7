//! One member's observed status: health, version, node summary, and the conditions that follow.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::{
    http::{ConditionSummary, NodeSummary},
    member_health::MemberHealth,
};

/// The type of the condition that says whether a member is usable; its reason is the health.
pub const READY_CONDITION: &str = "Ready";

/// What the collector last observed of one member, with condition transition times.
#[derive(Clone, Debug)]
pub struct MemberStatus {
    health: MemberHealth,
    kubernetes_version: Option<String>,
    nodes: Option<NodeSummary>,
    ready_since: Timestamp,
    credentials_since: Timestamp,
}

impl Default for MemberStatus {
    fn default() -> Self {
        Self {
            health: MemberHealth::Unknown,
            kubernetes_version: None,
            nodes: None,
            ready_since: Timestamp::now(),
            credentials_since: Timestamp::now(),
        }
    }
}

impl MemberStatus {
    /// The last probe's outcome.
    pub fn health(&self) -> &MemberHealth {
        &self.health
    }

    /// Records a probe outcome; a condition's transition time moves only when its status does.
    pub fn set_health(&mut self, health: MemberHealth) {
        let now = Timestamp::now();
        if health.ready_status() != self.health.ready_status() {
            self.ready_since = now;
        }
        if health.credentials_valid_status() != self.health.credentials_valid_status() {
            self.credentials_since = now;
        }
        self.health = health;
    }

    /// Records the member's Kubernetes version (from `/version`).
    pub fn set_kubernetes_version(&mut self, version: String) {
        self.kubernetes_version = Some(version);
    }

    /// The member's Kubernetes version, once known.
    pub fn kubernetes_version(&self) -> Option<&str> {
        self.kubernetes_version.as_deref()
    }

    /// Records the node summary.
    pub fn set_nodes(&mut self, total: i32, ready: i32) {
        self.nodes = Some(NodeSummary {
            total_num: total,
            ready_num: ready,
        });
    }

    /// The node summary, once the Node watch has listed.
    pub fn nodes(&self) -> Option<NodeSummary> {
        self.nodes
    }

    /// `Ready` and `CredentialsValid`, Karmada-style.
    pub fn conditions(&self) -> Vec<ConditionSummary> {
        let h = &self.health;
        vec![
            ConditionSummary {
                r#type: READY_CONDITION.to_owned(),
                status: h.ready_status().to_owned(),
                reason: h.reason().to_owned(),
                message: h.message(),
                last_transition_time: Some(self.ready_since.to_string()),
            },
            ConditionSummary {
                r#type: "CredentialsValid".to_owned(),
                status: h.credentials_valid_status().to_owned(),
                reason: h.credentials_valid_reason().to_owned(),
                message: h.message(),
                last_transition_time: Some(self.credentials_since.to_string()),
            },
        ]
    }

    /// The merge patch for a Karmada `Cluster`'s status subresource.
    pub fn status_patch(&self) -> Value {
        let mut status = json!({ "conditions": self.conditions() });
        if let Some(version) = &self.kubernetes_version {
            status["kubernetesVersion"] = json!(version);
        }
        if let Some(nodes) = self.nodes {
            status["nodeSummary"] = json!(nodes);
        }
        json!({ "status": status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut status = MemberStatus::default();
        status.set_health(MemberHealth::Healthy);
        let ready_since = status.ready_since;
        status.set_health(MemberHealth::Healthy);
        assert_eq!(status.ready_since, ready_since);
        status.set_health(MemberHealth::Unreachable("down".into()));
        assert!(status.ready_since >= ready_since);
        let conditions = status.conditions();
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[0].reason, "Unreachable");
        assert_eq!(conditions[1].status, "Unknown");
    }

    #[test]
    fn patch_is_karmada_shaped() {
        let mut status = MemberStatus::default();
        status.set_health(MemberHealth::Unauthorized);
        status.set_kubernetes_version("v1.36.5".into());
        status.set_nodes(3, 2);
        let patch = status.status_patch();
        assert_eq!(patch["status"]["kubernetesVersion"], "v1.36.5");
        assert_eq!(patch["status"]["nodeSummary"]["totalNum"], 3);
        assert_eq!(patch["status"]["nodeSummary"]["readyNum"], 2);
        assert_eq!(patch["status"]["conditions"][1]["type"], "CredentialsValid");
        assert_eq!(patch["status"]["conditions"][1]["reason"], "Unauthorized");
        assert_eq!(patch["status"]["conditions"][1]["status"], "False");
    }
}
