//! [`ShardMap`]: the assignment this replica acts on, for whoever needs to ask who owns what
//! (the read API, the status writer's fence).

use std::sync::{Arc, PoisonError, RwLock};

use super::{assignment::Assignment, view::ShardView};

/// The current assignment and the view it was computed from. Cloning is cheap.
#[derive(Clone, Default)]
pub(crate) struct ShardMap {
    inner: Arc<RwLock<Current>>,
}

#[derive(Default)]
struct Current {
    view: ShardView,
    assignment: Arc<Assignment>,
}

/// Who owns a member, as this replica sees it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// This replica.
    Me,
    /// Another live replica.
    Replica(String),
    /// No one yet (the member is unknown, or no replica is live).
    Unassigned,
}

impl ShardMap {
    /// Replaces the assignment.
    pub(crate) fn set(&self, view: ShardView, assignment: Assignment) {
        let mut current = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        current.view = view;
        current.assignment = Arc::new(assignment);
    }

    /// Who owns `member`.
    pub(crate) fn owner(&self, member: &str) -> Owner {
        let current = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let me = current.view.me.as_ref().map(|me| me.identity.as_str());
        match current.assignment.owner(member) {
            Some(owner) if Some(owner) == me => Owner::Me,
            Some(owner) => Owner::Replica(owner.to_owned()),
            None => Owner::Unassigned,
        }
    }

    /// This replica's identity while it is in the group.
    pub(crate) fn me(&self) -> Option<String> {
        let current = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        current.view.me.as_ref().map(|me| me.identity.clone())
    }
}
