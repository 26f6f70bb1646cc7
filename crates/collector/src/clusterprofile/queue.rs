//! What waits to be published: the latest of each member, and the members whose profile is to
//! be deleted.
//!
//! ## Memory usage
//! One entry per member the collector knows, replaced in place, and one name per member removed
//! since the writer last caught up; the writer drops the removals it will not make (while it
//! does not lead, the garbage collection on gaining leadership covers them).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::Notify;

use super::access::ProfileAccess;
use crate::member::status::MemberStatus;

/// The latest of one member: its access, once its definition was usable, and its status, once
/// observed. A member is published only once it has a status.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Latest {
    /// How to reach it; `None` while its definition is unusable.
    pub(crate) access: Option<Arc<ProfileAccess>>,
    /// What the collector last observed of it.
    pub(crate) status: Option<MemberStatus>,
}

#[derive(Default)]
struct State {
    members: BTreeMap<String, Latest>,
    removed: BTreeSet<String>,
}

/// Shared by the submitting side and the writer.
///
/// # Concurrent calls
/// Every call takes one lock, held only to copy or replace an entry (never across an `.await`);
/// a submitter never waits for the control plane.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    /// Rung on every change; a ring while the writer is busy is kept for its next wait.
    pub(crate) wake: Notify,
}

impl Queue {
    // Held only to copy or replace entries; a panic cannot leave one half-written.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes `member`'s latest with `change`; wakes the writer if that changed anything.
    fn update(&self, member: &str, change: impl FnOnce(&mut Latest)) {
        let mut state = self.state();
        let removed = state.removed.remove(member);
        let latest = state.members.entry(member.to_owned()).or_default();
        let before = latest.clone();
        change(latest);
        let changed = removed || *latest != before;
        drop(state);
        if changed {
            self.wake.notify_one();
        }
    }

    /// Records how `member` is reached (`None`: its definition is unusable).
    pub(crate) fn define(&self, member: &str, access: Option<ProfileAccess>) {
        self.update(member, |latest| latest.access = access.map(Arc::new));
    }

    /// Records what was last observed of `member`.
    pub(crate) fn submit(&self, member: &str, status: &MemberStatus) {
        self.update(member, |latest| {
            if latest.status.as_ref() != Some(status) {
                latest.status = Some(status.clone());
            }
        });
    }

    /// `member` is gone: its profile is to be deleted.
    pub(crate) fn forget(&self, member: &str) {
        let mut state = self.state();
        state.members.remove(member);
        state.removed.insert(member.to_owned());
        drop(state);
        self.wake.notify_one();
    }

    /// Every member with a status, as it is now.
    pub(crate) fn observed(&self) -> Vec<(String, Latest)> {
        self.state()
            .members
            .iter()
            .filter(|(_, latest)| latest.status.is_some())
            .map(|(member, latest)| (member.clone(), latest.clone()))
            .collect()
    }

    /// Every member known, with a status or not.
    pub(crate) fn members(&self) -> BTreeSet<String> {
        self.state().members.keys().cloned().collect()
    }

    /// Whether `member` is still known (not forgotten since).
    pub(crate) fn knows(&self, member: &str) -> bool {
        self.state().members.contains_key(member)
    }

    /// The members whose profile is to be deleted.
    pub(crate) fn removed(&self) -> Vec<String> {
        self.state().removed.iter().cloned().collect()
    }

    /// `member`'s profile is deleted, unless it came back meanwhile.
    pub(crate) fn deleted(&self, member: &str) {
        self.state().removed.remove(member);
    }

    /// Drops every pending deletion (a follower's: the next leader collects the garbage).
    pub(crate) fn drop_removals(&self) {
        self.state().removed.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::health::MemberHealth;
    use futures::FutureExt as _;

    fn rung(queue: &Queue) -> bool {
        queue.wake.notified().now_or_never().is_some()
    }

    #[test]
    fn only_the_latest_status_of_a_member_is_kept() {
        let queue = Queue::default();
        queue.submit("m1", &MemberStatus::with_health(MemberHealth::Unknown));
        queue.submit("m1", &MemberStatus::with_health(MemberHealth::Unauthorized));
        queue.submit("m2", &MemberStatus::with_health(MemberHealth::Healthy));
        let observed = queue.observed();
        assert_eq!(observed.len(), 2, "one entry per member");
        let m1 = observed[0].1.status.as_ref().map(MemberStatus::health);
        assert_eq!(m1, Some(&MemberHealth::Unauthorized));
    }

    #[test]
    fn a_member_is_published_once_it_has_a_status() {
        let queue = Queue::default();
        queue.define("m1", None);
        assert!(queue.observed().is_empty());
        assert_eq!(queue.members(), BTreeSet::from(["m1".to_owned()]));
    }

    #[test]
    fn the_writer_is_woken_by_changes_only() {
        let queue = Queue::default();
        let healthy = MemberStatus::with_health(MemberHealth::Healthy);
        queue.submit("m1", &healthy);
        assert!(rung(&queue));
        queue.submit("m1", &healthy);
        assert!(!rung(&queue), "the same status again is no change");
        queue.define("m1", None);
        assert!(!rung(&queue), "still no access");
        queue.forget("m1");
        assert!(rung(&queue), "a removal is work");
    }

    #[test]
    fn a_forgotten_member_is_deleted_unless_it_comes_back() {
        let queue = Queue::default();
        queue.submit("m1", &MemberStatus::with_health(MemberHealth::Healthy));
        queue.submit("m2", &MemberStatus::with_health(MemberHealth::Healthy));
        queue.forget("m1");
        queue.forget("m2");
        assert!(!queue.knows("m1"));
        assert_eq!(queue.observed().len(), 0);
        assert_eq!(queue.removed(), ["m1", "m2"]);
        // m2 is back before its deletion was made: it is published again, not deleted.
        queue.submit("m2", &MemberStatus::with_health(MemberHealth::Healthy));
        assert_eq!(queue.removed(), ["m1"]);
        queue.deleted("m1");
        assert!(queue.removed().is_empty());
        queue.forget("m3");
        queue.drop_removals();
        assert!(queue.removed().is_empty());
    }
}
