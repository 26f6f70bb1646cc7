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
    /// What starts each member Tether could watch, owned or not, the moment this replica
    /// gains it: its last definition and, if its credential is unusable since, that event
    /// too (at most two per member).
    last_events: HashMap<String, Vec<RegistryEvent>>,
    /// Members moved to another replica and still watched here until the deadline, so that
    /// they are not unwatched while the new owner starts them (nothing is written for them).
    releasing: HashMap<String, Instant>,
    /// How long a moved member stays watched here: one renewal of the Lease.
    handover: Duration,
}

impl ShardGate {
    pub(crate) fn new(
        view: watch::Receiver<ShardView>,
        ownership: Ownership,
        handover: Duration,
    ) -> Self {
        Self {
            view,
            ownership,
            last_events: HashMap::new(),
            releasing: HashMap::new(),
            handover,
        }
    }

    /// The earliest deadline of a member still being handed over.
    fn next_release(&self) -> Option<Instant> {
        self.releasing.values().min().copied()
    }

    /// Records `event`; returns the member it is about and whether the set of members changed.
    fn record(&mut self, event: &RegistryEvent) -> Option<(String, bool)> {
        match event {
            RegistryEvent::Upserted { spec, .. } => {
                self.last_events
                    .insert(spec.name.clone(), vec![event.clone()]);
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
            RegistryEvent::Invalid { name, reason } => {
                let events = self.last_events.entry(name.clone()).or_default();
                // An unusable credential leaves the definition standing (its task keeps its
                // watches for when the Secret is fixed); an unusable definition replaces it.
                events.retain(|e| {
                    reason.is_credential() && matches!(e, RegistryEvent::Upserted { .. })
                });
                events.push(event.clone());
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
            let release = gate.next_release();
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
                () = sleep_until(release) => self.release_due(&mut gate).await,
            }
        }
    }

    async fn rebalance(&mut self, gate: &mut ShardGate) {
        let view = gate.view.borrow_and_update().clone();
        let moves = gate.ownership.rebalance(&view);
        let mut handed_over = 0;
        for member in &moves.lost {
            if gate.last_events.contains_key(member) {
                // Moved, not removed: keep watching it for one renewal while the new owner
                // starts it; the status writer already writes nothing for it.
                handed_over += 1;
                gate.releasing
                    .insert(member.clone(), Instant::now() + gate.handover);
                tracing::info!(member = %member, "member moved to another replica");
            } else {
                self.forget(member).await;
            }
        }
        for member in &moves.gained {
            // Still watched if it was being handed over: its last events bring the running
            // task up to date (a definition unchanged keeps its client and watches).
            gate.releasing.remove(member);
            for event in gate.last_events.get(member).cloned().unwrap_or_default() {
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

    /// Stops the members whose handover grace is over.
    async fn release_due(&mut self, gate: &mut ShardGate) {
        let now = Instant::now();
        let due: Vec<_> = gate.releasing.extract_if(|_, at| *at <= now).collect();
        for (member, _) in due {
            if !gate.ownership.owns(&member) {
                self.forget(&member).await;
            }
        }
    }
}

/// Sleeps until `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
