//! The multi-cluster cache: every member's status and mirrored objects, for the read API.

use std::sync::Arc;

use dashmap::DashMap;

use crate::{
    http::{ClusterReader, ClusterSummary},
    informers::{MemberStores, node_summary},
    member_status::MemberStatus,
};

/// Members' statuses and stores. Cloning is cheap; readers copy out and hold no lock.
#[derive(Clone, Default)]
pub struct Mirror {
    members: Arc<DashMap<String, Entry>>,
}

#[derive(Default)]
struct Entry {
    status: MemberStatus,
    stores: Option<MemberStores>,
}

impl Mirror {
    /// Attaches a member's watch stores (replacing older ones after a client rebuild).
    pub fn set_stores(&self, member: &str, stores: MemberStores) {
        self.members.entry(member.to_owned()).or_default().stores = Some(stores);
    }

    /// Changes a member's status in place and returns the result.
    pub fn update_status(
        &self,
        member: &str,
        update: impl FnOnce(&mut MemberStatus),
    ) -> MemberStatus {
        let mut entry = self.members.entry(member.to_owned()).or_default();
        update(&mut entry.status);
        entry.status.clone()
    }

    /// A member's status.
    pub fn status(&self, member: &str) -> Option<MemberStatus> {
        self.members.get(member).map(|entry| entry.status.clone())
    }

    /// The node summary from a member's Node watch: (total, ready).
    pub fn node_summary(&self, member: &str) -> Option<(i32, i32)> {
        let entry = self.members.get(member)?;
        entry
            .stores
            .as_ref()
            .map(|stores| node_summary(&stores.nodes))
    }

    /// Forgets a member entirely.
    pub fn remove(&self, member: &str) {
        self.members.remove(member);
    }

    fn summary(name: &str, entry: &Entry) -> ClusterSummary {
        ClusterSummary {
            name: name.to_owned(),
            conditions: entry.status.conditions(),
            kubernetes_version: entry.status.kubernetes_version().map(str::to_owned),
            node_summary: entry.status.nodes(),
            resources: entry
                .stores
                .iter()
                .flat_map(|stores| {
                    stores
                        .resources
                        .iter()
                        .map(|(resource, _)| resource.to_string())
                })
                .collect(),
        }
    }
}

impl ClusterReader for Mirror {
    fn clusters(&self) -> Vec<ClusterSummary> {
        let mut all: Vec<_> = self
            .members
            .iter()
            .map(|entry| Self::summary(entry.key(), entry.value()))
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn cluster(&self, name: &str) -> Option<ClusterSummary> {
        self.members
            .get(name)
            .map(|entry| Self::summary(name, &entry))
    }

    fn objects(
        &self,
        name: &str,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Vec<serde_json::Value>> {
        let entry = self.members.get(name)?;
        let stores = entry.stores.as_ref()?;
        let (_, store) = stores
            .resources
            .iter()
            .find(|(mirrored, _)| mirrored.matches(group, version, resource))?;
        let mut objects: Vec<_> = store
            .state()
            .iter()
            .filter_map(|object| serde_json::to_value(object.as_ref()).ok())
            .collect();
        objects.sort_by_key(|o| {
            (
                o["metadata"]["namespace"].to_string(),
                o["metadata"]["name"].to_string(),
            )
        });
        Some(objects)
    }
}
