//! [`Ownership`]: which members this replica owns, and what changed when the group or the
//! members changed.

use std::collections::BTreeSet;

use super::{assignment::Assignment, map::ShardMap, view::ShardView};

/// The members this replica owns, kept current as members and replicas come and go.
#[derive(Default)]
pub(crate) struct Ownership {
    load_factor: f64,
    members: BTreeSet<String>,
    view: ShardView,
    assignment: Assignment,
    owned: BTreeSet<String>,
    map: ShardMap,
}

/// What one rebalance changed for this replica.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Moves {
    /// Members this replica owns now and did not before.
    pub(crate) gained: Vec<String>,
    /// Members it owned before and does not now.
    pub(crate) lost: Vec<String>,
    /// Of `gained`, those another replica owned before: moves, not first placements.
    pub(crate) taken_over: usize,
}

impl Ownership {
    pub(crate) fn new(load_factor: f64, map: ShardMap) -> Self {
        Self {
            load_factor,
            map,
            ..Self::default()
        }
    }

    /// Counts `member` in (it can be watched).
    pub(crate) fn insert(&mut self, member: &str) -> bool {
        self.members.insert(member.to_owned())
    }

    /// Counts `member` out (removed, or not Tether's to watch).
    pub(crate) fn remove(&mut self, member: &str) -> bool {
        self.members.remove(member)
    }

    /// Whether this replica owns `member` now.
    pub(crate) fn owns(&self, member: &str) -> bool {
        self.owned.contains(member)
    }

    /// How many members this replica owns.
    pub(crate) fn owned(&self) -> usize {
        self.owned.len()
    }

    /// The live replicas of the last rebalance.
    pub(crate) fn replicas(&self) -> usize {
        self.view.replicas.len()
    }

    /// Places every member again on the replicas of `view`. While this replica is not in the
    /// group (not yet joined, or its renewals lapsed), nothing changes: it keeps watching what
    /// it had, and its status writes stay fenced until it is back.
    pub(crate) fn rebalance(&mut self, view: &ShardView) -> Moves {
        let Some(me) = &view.me else {
            return Moves::default();
        };
        let assignment = Assignment::compute(&self.members, &view.replicas, self.load_factor);
        let owned: BTreeSet<String> = assignment
            .members_of(&me.identity)
            .map(str::to_owned)
            .collect();
        let gained: Vec<String> = owned.difference(&self.owned).cloned().collect();
        let lost: Vec<String> = self.owned.difference(&owned).cloned().collect();
        let taken_over = gained
            .iter()
            .filter(|m| {
                self.assignment
                    .owner(m)
                    .is_some_and(|before| before != me.identity)
            })
            .count();
        self.map.set(view.clone(), assignment.clone());
        self.view = view.clone();
        self.assignment = assignment;
        self.owned = owned;
        Moves {
            gained,
            lost,
            taken_over,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::map::Owner;

    #[test]
    fn two_replicas_split_the_members_and_one_takes_all_when_the_other_goes() {
        let (map_a, map_b) = (ShardMap::default(), ShardMap::default());
        let mut a = Ownership::new(0.25, map_a.clone());
        let mut b = Ownership::new(0.25, map_b);
        for i in 0..40 {
            a.insert(&format!("m{i}"));
            b.insert(&format!("m{i}"));
        }
        let first_a = a.rebalance(&ShardView::of("a", &["a", "b"]));
        let first_b = b.rebalance(&ShardView::of("b", &["a", "b"]));
        assert_eq!(first_a.gained.len() + first_b.gained.len(), 40);
        assert_eq!(
            first_a.taken_over + first_b.taken_over,
            0,
            "first placements"
        );
        for i in 0..40 {
            let m = format!("m{i}");
            assert!(a.owns(&m) != b.owns(&m), "{m} owned by exactly one");
        }
        let (b_member, _) = (0..40)
            .map(|i| format!("m{i}"))
            .filter(|m| b.owns(m))
            .map(|m| (m, ()))
            .next()
            .unwrap();
        assert_eq!(map_a.owner(&b_member), Owner::Replica("b".into()));

        let after = a.rebalance(&ShardView::of("a", &["a"]));
        assert_eq!(after.lost, Vec::<String>::new());
        assert_eq!(after.taken_over, first_b.gained.len());
        assert_eq!(a.owned(), 40);
        assert_eq!(map_a.owner(&b_member), Owner::Me);
    }

    #[test]
    fn nothing_changes_outside_the_group() {
        let mut a = Ownership::new(0.25, ShardMap::default());
        a.insert("m0");
        assert_eq!(a.rebalance(&ShardView::default()), Moves::default());
        assert!(!a.owns("m0"));
        a.rebalance(&ShardView::of("a", &["a"]));
        let lapsed = ShardView {
            me: None,
            ..ShardView::of("a", &["b"])
        };
        assert_eq!(a.rebalance(&lapsed), Moves::default());
        assert!(a.owns("m0"), "keeps watching while its Lease is in doubt");
    }
}
