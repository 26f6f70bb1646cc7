//! Whether a member currently accepts its credential, observable per member.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use crate::{Credential, CredentialKind};

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
    Unauthorized,
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
    /// The credential in use: its expiry in Unix seconds (0: none or not known yet) and its
    /// kind's index in [`CredentialKind::ALL`] plus one (0: not known yet).
    expiry_unix_seconds: AtomicU64,
    kind: AtomicU64,
    /// Whether the state is [`CredentialState::Valid`], written under the state's lock: every
    /// successful request reports `Valid`, and a repeat need not take that lock.
    valid: AtomicBool,
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

    /// When the credential last attached to a request expires, if it has an expiry.
    pub fn credential_expiry(&self) -> Option<SystemTime> {
        match self.counters.expiry_unix_seconds.load(Ordering::Relaxed) {
            0 => None,
            secs => Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
        }
    }

    /// The kind of the credential last attached to a request.
    pub fn credential_kind(&self) -> Option<CredentialKind> {
        let index = self.counters.kind.load(Ordering::Relaxed);
        CredentialKind::ALL
            .get(usize::try_from(index).ok()?.checked_sub(1)?)
            .copied()
    }

    /// Records the credential a request is about to carry: two relaxed stores, cheap enough
    /// for every request.
    pub fn using(&self, credential: &Credential) {
        let expiry = credential
            .expires_at()
            .and_then(|at| at.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs().max(1));
        let kind = CredentialKind::ALL
            .iter()
            .position(|k| *k == credential.kind())
            .map_or(0, |i| i as u64 + 1);
        // Stored only on a change: a store per request would bounce the line between cores.
        for (counter, value) in [
            (&self.counters.expiry_unix_seconds, expiry),
            (&self.counters.kind, kind),
        ] {
            if counter.load(Ordering::Relaxed) != value {
                counter.store(value, Ordering::Relaxed);
            }
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
        let valid = next == CredentialState::Valid;
        if valid && self.counters.valid.load(Ordering::Acquire) {
            return false;
        }
        self.state.send_if_modified(|current| {
            if *current == next {
                return false;
            }
            self.counters.valid.store(valid, Ordering::Release);
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
        let why = "same state must not wake subscribers";
        assert!(!rx.has_changed().unwrap(), "{why}");
        health.report(CredentialState::Unauthorized);
        assert_eq!(*rx.borrow_and_update(), CredentialState::Unauthorized);
        assert_eq!(health.current(), CredentialState::Unauthorized);
        health.report(CredentialState::Valid);
        let why = "a success after a rejection is reported, not taken for a repeat";
        assert_eq!(*rx.borrow_and_update(), CredentialState::Valid, "{why}");
    }
}
