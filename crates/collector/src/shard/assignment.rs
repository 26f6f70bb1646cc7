//! Which replica owns which member: rendezvous hashing with bounded loads.
//!
//! Every replica computes the same [`Assignment`] from the same two sets (members and live
//! replicas), so there is nothing to agree on beyond the Leases. Each member ranks the replicas
//! by a hash of (member, replica) and takes the best-ranked one that still has room; room is
//! `⌈(1 + ε) · members / replicas⌉`. Members are placed in the order of a hash of their name
//! alone, so adding or removing one replica disturbs only the members whose first choice it
//! was, plus the few the load bound pushes on. Rendezvous rather than a ring of virtual nodes:
//! no ring to build or tune, and the moves measured by `hack/bench.sh --sharded` stay within a
//! few percent of the ideal `1/N` (see the book's docs/src/features/sharding.md).

use std::collections::{BTreeMap, BTreeSet};

use ring::digest::{SHA256, digest};

/// Members placed on each replica, and the bound that held while placing them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Assignment {
    owners: BTreeMap<String, String>,
    capacity: usize,
}

impl Assignment {
    /// Places every member of `members` on one of `replicas` with load factor `epsilon`
    /// (`0.25`: no replica holds more than 1.25 × its fair share). No replicas: no owners.
    pub(crate) fn compute(
        members: &BTreeSet<String>,
        replicas: &BTreeSet<String>,
        epsilon: f64,
    ) -> Self {
        if replicas.is_empty() {
            return Self::default();
        }
        let capacity = capacity(members.len(), replicas.len(), epsilon);
        let mut order: Vec<(u64, &String)> = members.iter().map(|m| (score(m, ""), m)).collect();
        order.sort_unstable();
        let mut load: BTreeMap<&String, usize> = replicas.iter().map(|r| (r, 0)).collect();
        let mut owners = BTreeMap::new();
        let mut ranked: Vec<(u64, &String)> = Vec::with_capacity(replicas.len());
        for (_, member) in order {
            ranked.clear();
            ranked.extend(replicas.iter().map(|r| (score(member, r), r)));
            // Highest score first; ties (astronomically rare) by name, so all agree.
            ranked.sort_unstable_by(|a, b| b.cmp(a));
            let chosen = ranked
                .iter()
                .map(|(_, replica)| *replica)
                .find(|replica| load.get(replica).is_some_and(|n| *n < capacity));
            // The capacity times the replica count covers every member, so one always has room.
            if let Some(replica) = chosen {
                if let Some(n) = load.get_mut(replica) {
                    *n += 1;
                }
                owners.insert(member.clone(), replica.clone());
            }
        }
        Self { owners, capacity }
    }

    /// The replica that owns `member`, if it is placed.
    pub(crate) fn owner(&self, member: &str) -> Option<&str> {
        self.owners.get(member).map(String::as_str)
    }

    /// The members `replica` owns.
    pub(crate) fn members_of<'a>(&'a self, replica: &'a str) -> impl Iterator<Item = &'a str> {
        self.owners
            .iter()
            .filter(move |(_, owner)| owner.as_str() == replica)
            .map(|(member, _)| member.as_str())
    }

    /// The most members any replica may hold.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(test)]
    /// How many members changed owner from `before` to `self` (members in only one of them
    /// do not count: they were added or removed, not moved).
    pub(crate) fn moves_from(&self, before: &Self) -> usize {
        self.owners
            .iter()
            .filter(|(member, owner)| before.owner(member).is_some_and(|b| b != owner.as_str()))
            .count()
    }
}

/// `⌈(1 + ε) · members / replicas⌉`, and at least 1.
fn capacity(members: usize, replicas: usize, epsilon: f64) -> usize {
    // Exact in integers for the ε the CLI accepts (two decimals): ε = k / 100.
    let hundredths = (epsilon * 100.0).round().clamp(0.0, 10_000.0) as usize;
    let numerator = members.saturating_mul(100 + hundredths);
    numerator.div_ceil(replicas.saturating_mul(100)).max(1)
}

/// A stable 64-bit score of (member, replica): the same on every replica, build and platform.
fn score(member: &str, replica: &str) -> u64 {
    let mut input = Vec::with_capacity(member.len() + replica.len() + 1);
    input.extend_from_slice(member.as_bytes());
    // Names cannot contain NUL, so ("ab", "c") and ("a", "bc") differ.
    input.push(0);
    input.extend_from_slice(replica.as_bytes());
    let hash = digest(&SHA256, &input);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_ref()[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn names(prefix: &str, n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    #[rstest]
    #[case(60, 3)]
    #[case(60, 2)]
    #[case(1000, 4)]
    #[case(7, 5)]
    fn every_member_is_placed_within_the_bound(#[case] members: usize, #[case] replicas: usize) {
        let members = names("member-", members);
        let replicas = names("replica-", replicas);
        let assignment = Assignment::compute(&members, &replicas, 0.25);
        let bound = (1.25 * members.len() as f64 / replicas.len() as f64).ceil() as usize;
        assert_eq!(assignment.capacity(), bound);
        for member in &members {
            assert!(assignment.owner(member).is_some(), "{member} unplaced");
        }
        for replica in &replicas {
            let held = assignment.members_of(replica).count();
            assert!(held <= bound, "{replica} holds {held} > {bound}");
        }
    }

    #[test]
    fn every_replica_computes_the_same_assignment() {
        let members = names("m", 500);
        let a = Assignment::compute(&members, &names("r", 4), 0.25);
        let b = Assignment::compute(&members, &names("r", 4), 0.25);
        assert_eq!(a, b);
    }

    #[test]
    fn losing_one_of_four_replicas_moves_about_a_quarter() {
        let members = names("cluster-", 4000);
        let four = names("tether-", 4);
        let mut three = four.clone();
        three.remove("tether-2");
        let before = Assignment::compute(&members, &four, 0.25);
        let after = Assignment::compute(&members, &three, 0.25);
        let lost = before.members_of("tether-2").count();
        let moved = after.moves_from(&before);
        // Each of tether-2's members must move; the load bound may push a few more.
        assert!(moved >= lost, "{moved} moved, {lost} had to");
        assert!(
            moved as f64 <= 1.15 * lost as f64,
            "{moved} moved for {lost} orphaned"
        );
    }

    #[test]
    fn adding_a_fifth_replica_moves_about_a_fifth() {
        let members = names("cluster-", 4000);
        let four = names("tether-", 4);
        let five = names("tether-", 5);
        let before = Assignment::compute(&members, &four, 0.25);
        let after = Assignment::compute(&members, &five, 0.25);
        let moved = after.moves_from(&before);
        let ideal = members.len() / 5;
        eprintln!("4 → 5 replicas: moved {moved}, ideal {ideal}");
        assert!(
            moved as f64 <= 1.15 * ideal as f64,
            "{moved} moved, ideal {ideal}"
        );
        assert!(after.members_of("tether-4").count() as f64 >= 0.8 * ideal as f64);
    }

    #[test]
    fn modulo_hashing_moves_most_members_where_rendezvous_moves_one_share() {
        // Argo CD's `legacy` sharding: a hash of the member modulo the replica count.
        let modulo = |member: &str, replicas: u64| score(member, "") % replicas;
        let members = names("cluster-", 4000);
        let moved_modulo = members
            .iter()
            .filter(|m| modulo(m, 4) != modulo(m, 3))
            .count();
        let four = names("tether-", 4);
        let mut three = four.clone();
        three.remove("tether-3");
        let before = Assignment::compute(&members, &four, 0.25);
        let moved = Assignment::compute(&members, &three, 0.25).moves_from(&before);
        assert!(
            moved_modulo as f64 > 0.7 * members.len() as f64,
            "modulo moved {moved_modulo}"
        );
        assert!(
            moved * 2 < moved_modulo,
            "{moved} against modulo's {moved_modulo}"
        );
        let orphaned = before.members_of("tether-3").count();
        eprintln!(
            "4 → 3 replicas, {} members: rendezvous with bounded loads moved {moved} \
             ({orphaned} had to), modulo {moved_modulo}",
            members.len()
        );
    }

    #[test]
    fn no_replicas_own_nothing() {
        let assignment = Assignment::compute(&names("m", 3), &BTreeSet::new(), 0.25);
        assert_eq!(assignment.owner("m0"), None);
    }

    #[test]
    fn the_capacity_is_exact_for_two_decimals() {
        assert_eq!(capacity(60, 3, 0.25), 25);
        assert_eq!(capacity(60, 2, 0.25), 38);
        assert_eq!(capacity(0, 3, 0.25), 1);
        assert_eq!(capacity(10_000, 4, 0.1), 2750);
    }
}
