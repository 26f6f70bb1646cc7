//! Whether a member currently accepts its credential, observable per member.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use tokio::sync::watch;

/// What the last decided request said about a member's credential.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CredentialState {
    /// No request has been decided yet.
    #[default]
    Unknown,
    /// The member answered a request with a 2xx.
    Valid,
    /// The member answered 401 to the token, and again (or to the same token) after a refresh:
    /// the credential is dead until its Secret changes.
    Rejected,
    /// The credential source has no usable credential (Secret missing, token empty, …).
    Unavailable {
        /// Why, as the source put it. Never contains the token.
        reason: String,
    },
}

/// The sending side of one member's [`CredentialState`], shared by its client's layers.
///
/// Subscribers are woken only when the state changes, not on every request.
///
/// ```
/// use member_client::{CredentialHealth, CredentialState};
/// let health = CredentialHealth::new();
/// let mut changes = health.subscribe();
/// assert_eq!(*changes.borrow_and_update(), CredentialState::Unknown);
/// ```
#[derive(Clone, Debug)]
pub struct CredentialHealth {
    state: Arc<watch::Sender<CredentialState>>,
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    unauthorized: AtomicU64,
    retries: AtomicU64,
}

/// Counters of one member's auth traffic, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CredentialStats {
    /// 401 responses received, before and after refreshes.
    pub unauthorized_responses: u64,
    /// Requests sent a second time after a 401 with a refreshed token.
    pub retries: u64,
}

impl CredentialHealth {
    /// A handle in state [`CredentialState::Unknown`].
    pub fn new() -> Self {
        Self {
            state: Arc::new(watch::Sender::new(CredentialState::Unknown)),
            counters: Arc::default(),
        }
    }

    /// The state now.
    pub fn current(&self) -> CredentialState {
        self.state.borrow().clone()
    }

    /// A receiver that sees every change from now on.
    pub fn subscribe(&self) -> watch::Receiver<CredentialState> {
        self.state.subscribe()
    }

    /// The member's auth counters so far.
    pub fn stats(&self) -> CredentialStats {
        CredentialStats {
            unauthorized_responses: self.counters.unauthorized.load(Ordering::Relaxed),
            retries: self.counters.retries.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn count_unauthorized(&self) {
        self.counters.unauthorized.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_retry(&self) {
        self.counters.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Records `next`, waking subscribers only if it differs from the current state. Returns
    /// whether it changed, so that callers log transitions rather than every request.
    pub fn report(&self, next: CredentialState) -> bool {
        self.state.send_if_modified(|current| {
            if *current == next {
                return false;
            }
            tracing::debug!(from = ?current, to = ?next, "credential state changed");
            *current = next;
            true
        })
    }
}

impl Default for CredentialHealth {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_see_changes_but_not_repeats() {
        let health = CredentialHealth::new();
        let mut rx = health.subscribe();
        rx.borrow_and_update();
        health.report(CredentialState::Valid);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), CredentialState::Valid);
        health.report(CredentialState::Valid);
        assert!(
            !rx.has_changed().unwrap(),
            "same state must not wake subscribers"
        );
        health.report(CredentialState::Rejected);
        assert_eq!(*rx.borrow_and_update(), CredentialState::Rejected);
        assert_eq!(health.current(), CredentialState::Rejected);
    }
}
