//! [`Pending`]: one client's requests still waiting for their response headers, and the one
//! timer that fails those past their deadline.
//!
//! NB: a tokio timer per request is what this replaces. With no earlier timer pending, each
//! registration wakes the thread parked in the I/O driver (a syscall and a thread switch per
//! request), which showed as several percent of a loopback GET once the machine was busy.
//! Here a request costs two uncontended lock operations, and the timer is one sleeping task
//! per client, alive only while requests wait.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError, Weak,
        atomic::{AtomicBool, Ordering},
    },
    task::Waker,
    time::Duration,
};

use futures::task::AtomicWaker;
// tokio's clock, not std's: a paused test clock moves it.
use tokio::{task::JoinHandle, time::Instant};

/// How finely deadlines are checked: a request fails between its deadline and a tenth of it
/// later, and never more than a second late.
fn tick_for(deadline: Duration) -> Duration {
    (deadline / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The waiting requests of one client (all clones of one service share it).
#[derive(Debug)]
pub(super) struct Pending {
    deadline: Duration,
    tick: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// By registration order, which is start order: the ones past their deadline are first.
    waiting: BTreeMap<u64, Arc<Waiting>>,
    /// The task that expires requests; `None` once it has found nothing waiting.
    ticker: Option<JoinHandle<()>>,
}

/// One request's side of the registration.
#[derive(Debug)]
pub(super) struct Waiting {
    started: Instant,
    expired: AtomicBool,
    waker: AtomicWaker,
}

impl Waiting {
    /// Whether the ticker failed this request.
    pub(super) fn expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }

    /// The task to wake when the request expires.
    pub(super) fn wake_with(&self, waker: &Waker) {
        self.waker.register(waker);
    }
}

/// A request's place in [`Pending`]; dropping it (the response came, or the caller gave up)
/// takes the request out.
#[derive(Debug)]
pub(super) struct Registration {
    pending: Arc<Pending>,
    id: u64,
    waiting: Arc<Waiting>,
}

impl Registration {
    pub(super) fn waiting(&self) -> &Waiting {
        &self.waiting
    }

    /// The deadline it is held to.
    pub(super) fn deadline(&self) -> Duration {
        self.pending.deadline
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.pending.lock().waiting.remove(&self.id);
    }
}

impl Pending {
    pub(super) fn new(deadline: Duration) -> Self {
        Self {
            deadline,
            tick: tick_for(deadline),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing under this lock can panic halfway through a change.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the clock of a request that `waker`'s task waits on, and the ticker if none runs
    /// (or the runtime it ran on has gone).
    pub(super) fn register(self: &Arc<Self>, waker: &Waker) -> Registration {
        let waiting = Arc::new(Waiting {
            started: Instant::now(),
            expired: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        waiting.waker.register(waker);
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.waiting.insert(id, Arc::clone(&waiting));
        if state.ticker.as_ref().is_none_or(JoinHandle::is_finished) {
            state.ticker = Some(tokio::spawn(tick(Arc::downgrade(self))));
        }
        drop(state);
        Registration {
            pending: Arc::clone(self),
            id,
            waiting,
        }
    }

    /// Fails and wakes every request started `deadline` or longer before `now`. Returns
    /// whether any request is still waiting; if none is, the ticker is to stop.
    fn expire(&self, now: Instant) -> bool {
        let mut state = self.lock();
        while let Some(first) = state.waiting.first_entry() {
            if now.saturating_duration_since(first.get().started) < self.deadline {
                break;
            }
            let waiting = first.remove();
            waiting.expired.store(true, Ordering::Release);
            waiting.waker.wake();
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
    loop {
        let Some(period) = pending.upgrade().map(|p| p.tick) else {
            return;
        };
        tokio::time::sleep(period).await;
        let Some(pending) = pending.upgrade() else {
            return;
        };
        if !pending.expire(Instant::now()) {
            return;
        }
    }
}
