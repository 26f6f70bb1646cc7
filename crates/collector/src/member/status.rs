//! Member status: a member's health with its version and node summary, and the Karmada
//! `Cluster` status that follows from them.

use cluster_registry::karmada::{ClusterStatus, NodeSummary};
use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

use super::health::MemberHealth;
use crate::minting::MintState;

/// The type of the condition that says whether a member is usable; its reason is the health.
pub(crate) const READY_CONDITION: &str = "Ready";

/// The type of the condition that says whether the member accepts its credential.
pub(crate) const CREDENTIALS_VALID_CONDITION: &str = "CredentialsValid";

/// What the collector last observed of one member, with condition transition times.
///
/// Owned by whoever observes the member (its task, or the supervisor for a member without a
/// client) and published from there; nobody writes it back.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MemberStatus {
    health: MemberHealth,
    kubernetes_version: Option<String>,
    nodes: Option<NodeSummary>,
    /// The member's serving certificate is not verified (`--allow-insecure-members`).
    tls_unverified: bool,
    /// What its token chain says, when Tether mints its tokens.
    mint: MintState,
    ready_since: Timestamp,
    credentials_since: Timestamp,
}

impl Default for MemberStatus {
    fn default() -> Self {
        Self {
            health: MemberHealth::Unknown,
            kubernetes_version: None,
            nodes: None,
            tls_unverified: false,
            mint: MintState::Fine,
            ready_since: Timestamp::now(),
            credentials_since: Timestamp::now(),
        }
    }
}

impl MemberStatus {
    /// A status that has seen only `health`.
    #[cfg(test)]
    pub(crate) fn with_health(health: MemberHealth) -> Self {
        let mut status = Self::default();
        status.set_health(health);
        status
    }

    /// The latest health.
    pub(crate) fn health(&self) -> &MemberHealth {
        &self.health
    }

    /// Records a health; a condition's transition time moves only when its status does.
    pub(crate) fn set_health(&mut self, health: MemberHealth) {
        let now = Timestamp::now();
        if health.ready_status() != self.health.ready_status() {
            self.ready_since = now;
        }
        let credentials = self.credentials_valid_status();
        self.health = health;
        if self.credentials_valid_status() != credentials {
            self.credentials_since = now;
        }
    }

    /// Records what the member's token chain says.
    pub(crate) fn set_mint(&mut self, mint: MintState) {
        let credentials = self.credentials_valid_status();
        self.mint = mint;
        if self.credentials_valid_status() != credentials {
            self.credentials_since = Timestamp::now();
        }
    }

    /// What the member's token chain says.
    pub(crate) fn mint(&self) -> &MintState {
        &self.mint
    }

    /// `CredentialsValid`'s status: False while the token chain is broken, whatever the probe
    /// says, since the credential that works now will not for long.
    fn credentials_valid_status(&self) -> &'static str {
        match self.mint.reason() {
            Some(_) => "False",
            None => self.health.credentials_valid_status(),
        }
    }

    /// Records whether the member's serving certificate goes unverified; every condition
    /// message then says so.
    pub(crate) fn set_tls_unverified(&mut self, unverified: bool) {
        self.tls_unverified = unverified;
    }

    /// Records the member's Kubernetes version (from `/version`).
    pub(crate) fn set_kubernetes_version(&mut self, version: String) {
        self.kubernetes_version = Some(version);
    }

    /// The member's Kubernetes version, once known.
    pub(crate) fn kubernetes_version(&self) -> Option<&str> {
        self.kubernetes_version.as_deref()
    }

    /// Records the node summary: all Nodes, and those `Ready`.
    pub(crate) fn set_nodes(&mut self, total: i32, ready: i32) {
        self.nodes = Some(NodeSummary {
            total_num: Some(total),
            ready_num: Some(ready),
        });
    }

    /// Whether a write of `self` would tell the control plane more than a write of `before`
    /// did: a new health, version or node summary.
    pub(crate) fn differs_from(&self, before: &Self) -> bool {
        self.health != before.health
            || self.mint != before.mint
            || self.kubernetes_version != before.kubernetes_version
            || self.nodes != before.nodes
    }

    /// `Ready` and `CredentialsValid`, Karmada-style.
    pub(crate) fn conditions(&self) -> Vec<Condition> {
        let h = &self.health;
        let mut message = h.message();
        if self.tls_unverified {
            message.push_str(
                ". Warning: the member's serving certificate is not verified \
                 (insecureSkipTLSVerification, allowed by --allow-insecure-members)",
            );
        }
        let condition =
            |type_: &str, status: &str, reason: &str, message: String, since: Timestamp| {
                Condition {
                    type_: type_.to_owned(),
                    status: status.to_owned(),
                    reason: reason.to_owned(),
                    message,
                    last_transition_time: Time(since),
                    observed_generation: None,
                }
            };
        let (credentials_reason, credentials_message) =
            match (self.mint.reason(), self.mint.message()) {
                (Some(reason), Some(mint)) => (reason, format!("{mint}; {message}")),
                _ => (h.credentials_valid_reason(), message.clone()),
            };
        vec![
            condition(
                READY_CONDITION,
                h.ready_status(),
                h.reason(),
                message,
                self.ready_since,
            ),
            condition(
                CREDENTIALS_VALID_CONDITION,
                self.credentials_valid_status(),
                credentials_reason,
                credentials_message,
                self.credentials_since,
            ),
        ]
    }

    /// The Karmada `Cluster` status this describes.
    pub(crate) fn cluster_status(&self) -> ClusterStatus {
        ClusterStatus {
            kubernetes_version: self.kubernetes_version.clone(),
            conditions: self.conditions(),
            node_summary: self.nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut status = MemberStatus::with_health(MemberHealth::Healthy);
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
    fn cluster_status_is_karmada_shaped() {
        let mut status = MemberStatus::with_health(MemberHealth::Unauthorized);
        status.set_kubernetes_version("v1.36.5".into());
        status.set_nodes(3, 2);
        let written = serde_json::to_value(status.cluster_status()).unwrap();
        assert_eq!(written["kubernetesVersion"], "v1.36.5");
        let nodes = &written["nodeSummary"];
        assert_eq!(*nodes, json!({"totalNum": 3, "readyNum": 2}));
        assert_eq!(written["conditions"][1]["type"], "CredentialsValid");
        assert_eq!(written["conditions"][1]["reason"], "Unauthorized");
        assert_eq!(written["conditions"][1]["status"], "False");
        assert!(written["conditions"][0]["lastTransitionTime"].is_string());
    }

    #[test]
    fn an_unverified_member_says_so_in_every_condition() {
        let mut status = MemberStatus::with_health(MemberHealth::Healthy);
        assert!(!status.conditions()[0].message.contains("not verified"));
        status.set_tls_unverified(true);
        for Condition { message, .. } in status.conditions() {
            assert!(message.contains("not verified"), "{message}");
        }
    }

    #[test]
    fn a_broken_token_chain_makes_credentials_invalid_while_the_member_stays_ready() {
        let mut status = MemberStatus::with_health(MemberHealth::Healthy);
        let since = status.credentials_since;
        let before = status.clone();
        status.set_mint(MintState::Failed("the member refused (403)".into()));
        assert!(status.differs_from(&before));
        let said: Vec<_> = (status.conditions().into_iter())
            .map(|c| format!("{} {}: {}", c.status, c.reason, c.message))
            .collect();
        assert!(said[0].starts_with("True MemberReady: "), "{said:?}");
        let failed = "False RotationFailed: the member refused (403); ";
        assert!(said[1].starts_with(failed), "{said:?}");
        assert!(status.credentials_since >= since);
        status.set_mint(MintState::Expired("expired".into()));
        assert_eq!(status.conditions()[1].reason, "TokenExpired");
        status.set_mint(MintState::Fine);
        assert_eq!(status.conditions()[1].reason, "CredentialsAccepted");
    }

    #[test]
    fn a_new_version_or_node_count_is_worth_a_write() {
        let before = MemberStatus::with_health(MemberHealth::Healthy);
        let mut after = before.clone();
        assert!(!after.differs_from(&before));
        after.set_nodes(1, 1);
        assert!(after.differs_from(&before));
    }
}
