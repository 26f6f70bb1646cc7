//! [`Pending`]: one client's requests still waiting for their response headers, and the one
//! timer that fails those past their deadline.
//!
//! NB: a tokio timer per request is what this replaces. With no earlier timer pending, each
//! registration wakes the thread parked in the I/O driver (a syscall and a thread switch per
//! request), which showed as several percent of a loopback GET once the machine was busy.
//! Here a request that waits costs two short critical sections on a slab (no allocation once
//! it has grown, no clock read: a request is timed in ticks), and the timer is one task per
//! client, alive only while requests wait.

use std::{
    sync::{
        Arc, Mutex, MutexGuard, PoisonError, Weak,
        atomic::{AtomicU64, Ordering},
    },
    task::Waker,
    time::Duration,
};

use slab::Slab;
// tokio's clock, not std's: a paused test clock moves it.
use tokio::{
    task::JoinHandle,
    time::{Instant, MissedTickBehavior},
};

/// How finely deadlines are checked. A request is registered somewhere within a tick and
/// fails on the second tick after its deadline at the latest: between its deadline and a
/// tenth of it later, at most 1 s late (10 ms for deadlines under 100 ms).
fn tick_for(deadline: Duration) -> Duration {
    (deadline / 20).clamp(Duration::from_millis(5), Duration::from_millis(500))
}

/// The waiting requests of one client (all clones of one service share it).
#[derive(Debug)]
pub(super) struct Pending {
    deadline: Duration,
    tick: Duration,
    /// Ticks after which a request has waited at least `deadline`, counted from the tick it
    /// was registered in.
    ticks_to_expire: u64,
    /// Ticks counted so far by the ticker.
    ticks: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    waiting: Slab<Waiting>,
    /// The task that expires requests; `None` once it has found nothing waiting.
    ticker: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Waiting {
    /// The tick count when the request was registered.
    since: u64,
    expired: bool,
    waker: Waker,
}

/// A request's place in [`Pending`]; dropping it (the response came, or the caller gave up)
/// takes the request out.
#[derive(Debug)]
pub(super) struct Registration {
    pending: Arc<Pending>,
    key: usize,
}

impl Registration {
    /// Whether the request has expired; if not, `waker`'s task is the one to wake when it
    /// does. One step under the lock, so an expiry in between is not lost.
    pub(super) fn expired(&self, waker: &Waker) -> bool {
        let mut state = self.pending.lock();
        let Some(waiting) = state.waiting.get_mut(self.key) else {
            return false;
        };
        if !waiting.expired && !waiting.waker.will_wake(waker) {
            waiting.waker.clone_from(waker);
        }
        waiting.expired
    }

    /// The deadline it is held to.
    pub(super) fn deadline(&self) -> Duration {
        self.pending.deadline
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.pending.lock().waiting.try_remove(self.key);
    }
}

impl Pending {
    pub(super) fn new(deadline: Duration) -> Self {
        let tick = tick_for(deadline);
        let whole_ticks = deadline.as_nanos().div_ceil(tick.as_nanos().max(1));
        Self {
            deadline,
            tick,
            // One more than the deadline spans: the tick it was registered in was partly over.
            ticks_to_expire: u64::try_from(whole_ticks)
                .unwrap_or(u64::MAX)
                .saturating_add(1),
            ticks: AtomicU64::new(0),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under this lock can panic halfway through a change.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the clock of a request that `waker`'s task waits on, and the ticker if none runs
    /// (or the runtime it ran on has gone).
    pub(super) fn register(self: Arc<Self>, waker: &Waker) -> Registration {
        let mut state = self.lock();
        let key = state.waiting.insert(Waiting {
            since: self.ticks.load(Ordering::Acquire),
            expired: false,
            waker: waker.clone(),
        });
        if state.ticker.as_ref().is_none_or(JoinHandle::is_finished) {
            state.ticker = Some(tokio::spawn(tick(Arc::downgrade(&self))));
        }
        drop(state);
        Registration { pending: self, key }
    }

    /// Counts a tick, then fails and wakes every request that has waited `ticks_to_expire`
    /// ticks. Returns whether any request is still waiting; if none is, the ticker is to stop.
    fn expire(&self) -> bool {
        let now = self.ticks.fetch_add(1, Ordering::AcqRel) + 1;
        let mut state = self.lock();
        for (_, waiting) in &mut state.waiting {
            if !waiting.expired && now.saturating_sub(waiting.since) >= self.ticks_to_expire {
                waiting.expired = true;
                waiting.waker.wake_by_ref();
            }
        }
        if state.waiting.is_empty() {
            state.ticker = None;
            return false;
        }
        true
    }

    /// Requests waiting now (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Whether a ticker runs (tests).
    #[cfg(test)]
    pub(super) fn ticking(&self) -> bool {
        self.lock()
            .ticker
            .as_ref()
            .is_some_and(|ticker| !ticker.is_finished())
    }
}

/// Every tick, expires what is due; stops once nothing waits or the client is gone.
async fn tick(pending: Weak<Pending>) {
    let Some(period) = pending.upgrade().map(|p| p.tick) else {
        return;
    };
    // NB: a late tick delays the next ones rather than firing the missed ones at once, so
    // that ticks are never closer than a period: a request registered while the ticker lags
    // would otherwise count the catch-up as time waited, and fail early.
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(pending) = pending.upgrade() else {
            return;
        };
        if !pending.expire() {
            return;
        }
    }
}
