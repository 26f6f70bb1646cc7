//! The multi-cluster view: every member's published status and its watch stores, for the read
//! API.

mod initial_list;
mod object_cap;
mod resource;
mod summary;

use std::sync::Arc;

use dashmap::DashMap;

pub(crate) use initial_list::{InitialList, with_fallback};
pub use object_cap::LIST_PAGE_SIZE;
pub(crate) use object_cap::capped_watch;
pub use resource::MirroredResource;
pub(crate) use summary::ClusterSummary;

use crate::{
    http::ClusterReader,
    member::{informers::MemberStores, status::MemberStatus},
};

/// Members' statuses and stores. Cloning is cheap.
///
/// Written one way: a member's status by whoever observes the member, its stores by its task.
/// Readers copy out and release the map's shard lock before doing any work (serializing
/// objects happens after the lock is gone).
#[derive(Clone, Default)]
pub(crate) struct Mirror {
    members: Arc<DashMap<String, Entry>>,
}

#[derive(Clone, Default)]
struct Entry {
    status: MemberStatus,
    stores: Option<MemberStores>,
}

impl Mirror {
    /// Attaches a member's watch stores (replacing older ones after a client rebuild).
    pub(crate) fn set_stores(&self, member: &str, stores: MemberStores) {
        self.members.entry(member.to_owned()).or_default().stores = Some(stores);
    }

    /// Publishes a member's status.
    pub(crate) fn publish(&self, member: &str, status: MemberStatus) {
        self.members.entry(member.to_owned()).or_default().status = status;
    }

    /// A member's last published status.
    pub(crate) fn status(&self, member: &str) -> Option<MemberStatus> {
        self.members.get(member).map(|entry| entry.status.clone())
    }

    /// Forgets a member entirely.
    pub(crate) fn remove(&self, member: &str) {
        self.members.remove(member);
    }
}

impl ClusterReader for Mirror {
    fn clusters(&self) -> Vec<ClusterSummary> {
        let mut entries: Vec<(String, Entry)> = (self.members.iter())
            .map(|entry| (entry.key().clone(), entry.value().clone()))
            .collect();
        entries.sort_by(|(a, _), (b, _)| a.cmp(b));
        entries.iter().map(summary).collect()
    }

    fn cluster(&self, name: &str) -> Option<ClusterSummary> {
        let entry = self.members.get(name)?.value().clone();
        Some(summary(&(name.to_owned(), entry)))
    }

    fn objects(&self, name: &str, resource: &MirroredResource) -> Option<Vec<serde_json::Value>> {
        let stores = self.members.get(name)?.stores.clone()?;
        let (_, store) = stores.resources.iter().find(|(r, _)| r == resource)?;
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

fn summary((name, entry): &(String, Entry)) -> ClusterSummary {
    ClusterSummary {
        name: name.clone(),
        status: entry.status.cluster_status(),
        resources: entry
            .stores
            .iter()
            .flat_map(|stores| stores.resources.iter().map(|(r, _)| r.to_string()))
            .collect(),
    }
}
