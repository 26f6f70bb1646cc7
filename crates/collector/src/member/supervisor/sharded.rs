//! The supervisor with sharding: every registry event is kept, but only the members this
//! replica owns get a task; a rebalance starts the gained members from their last event and
//! stops the lost ones.

use std::{collections::HashMap, time::Duration};

use cluster_registry::{InvalidReason, RegistryEvent};
use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};

use super::Supervisor;
use crate::shard::{Ownership, ShardView};

/// How long a change of the member set waits for more before members are placed again: a
/// burst of new members (a start, a bulk registration) costs one rebalance, not one each.
const MEMBER_CHANGE_DELAY: Duration = Duration::from_millis(200);

/// What the supervisor needs to shard: the group's view and the ownership it drives.
pub(crate) struct ShardGate {
    pub(crate) view: watch::Receiver<ShardView>,
    pub(crate) ownership: Ownership,
    /// The last event of every member Tether could watch, owned or not, to start a member
    /// from the moment this replica gains it.
    last_events: HashMap<String, RegistryEvent>,
}

impl ShardGate {
    pub(crate) fn new(view: watch::Receiver<ShardView>, ownership: Ownership) -> Self {
        Self {
            view,
            ownership,
            last_events: HashMap::new(),
        }
    }

    /// Records `event`; returns the member it is about and whether the set of members changed.
    fn record(&mut self, event: &RegistryEvent) -> Option<(String, bool)> {
        match event {
            RegistryEvent::Upserted { spec, .. } => {
                self.last_events.insert(spec.name.clone(), event.clone());
                Some((spec.name.clone(), self.ownership.insert(&spec.name)))
            }
            RegistryEvent::Invalid {
                name,
                reason: InvalidReason::PullMode,
            }
            | RegistryEvent::Removed(name) => {
                self.last_events.remove(name);
                Some((name.clone(), self.ownership.remove(name)))
            }
            RegistryEvent::Invalid { name, .. } => {
                self.last_events.insert(name.clone(), event.clone());
                Some((name.clone(), self.ownership.insert(name)))
            }
            RegistryEvent::CredentialsRotated { name, .. } => Some((name.clone(), false)),
            _ => None,
        }
    }
}

impl Supervisor {
    /// Applies registry events for the members this replica owns, and rebalances when the
    /// group or the member set changes, until the channel closes or the group's view ends.
    pub(crate) async fn run_sharded(
        mut self,
        mut events: mpsc::Receiver<RegistryEvent>,
        mut gate: ShardGate,
    ) {
        let mut rebalance_at: Option<Instant> = None;
        loop {
            let due = rebalance_at;
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { return };
                    match gate.record(&event) {
                        Some((member, changed)) => {
                            if changed {
                                rebalance_at.get_or_insert(Instant::now() + MEMBER_CHANGE_DELAY);
                            }
                            if gate.ownership.owns(&member) {
                                self.apply(event).await;
                            }
                        }
                        None => self.apply(event).await,
                    }
                }
                changed = gate.view.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    // A replica came or went: its members must not wait.
                    rebalance_at = Some(Instant::now());
                }
                () = sleep_until(due) => {
                    rebalance_at = None;
                    self.rebalance(&mut gate).await;
                }
            }
        }
    }

    async fn rebalance(&mut self, gate: &mut ShardGate) {
        let view = gate.view.borrow_and_update().clone();
        let moves = gate.ownership.rebalance(&view);
        let mut handed_over = 0;
        for member in &moves.lost {
            self.forget(member).await;
            if gate.last_events.contains_key(member) {
                handed_over += 1;
                tracing::info!(member = %member, "member moved to another replica");
            }
        }
        for member in &moves.gained {
            if let Some(event) = gate.last_events.get(member).cloned() {
                self.apply(event).await;
            }
        }
        if !moves.gained.is_empty() || !moves.lost.is_empty() {
            tracing::info!(
                owned = gate.ownership.owned(),
                replicas = gate.ownership.replicas(),
                gained = moves.gained.len(),
                lost = moves.lost.len(),
                "members placed again"
            );
        }
        let metrics = &self.context.metrics;
        if let Some(me) = &view.me {
            metrics.set_shard(&me.identity, gate.ownership.owned(), view.replicas.len());
        }
        metrics.record_shard_moves("in", moves.taken_over);
        metrics.record_shard_moves("out", handed_over);
    }
}

/// Sleeps until `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
