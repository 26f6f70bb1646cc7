//! [`FakeSource`]: a credential source whose answer, pace and failures the test sets.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{ClientIdentity, Credential, CredentialKey, CredentialSource, SourceError};

/// What the fake Secret holds.
#[derive(Clone)]
enum Held {
    Token(String),
    Identity(ClientIdentity),
    Missing,
}

/// A [`CredentialSource`] standing in for a member's Secret.
///
/// It answers with what the test last put in it ([`set_token`](Self::set_token),
/// [`set_identity`](Self::set_identity), [`delete`](Self::delete)); the cache is not told of a
/// change, as it is not when a Secret changes before its watch event. Knobs, set before it is
/// shared: [`with_delay`](Self::with_delay) (a slow plugin), [`failing_first`](Self::failing_first)
/// (transient failures), [`gated`](Self::gated) (fetches wait for [`open_gate`](Self::open_gate)).
///
/// A fetch counts itself ([`fetches`](Self::fetches)), reads what the Secret holds, waits for
/// the gate and the delay, counts itself [`finished`](Self::finished), and then fails if a
/// failure is still due. So a gated fetch returns what the Secret held when it started.
pub struct FakeSource {
    held: watch::Sender<Held>,
    delay: Duration,
    failures: AtomicUsize,
    /// Whether the gate is open.
    gate: watch::Sender<bool>,
    fetches: AtomicUsize,
    finished: AtomicUsize,
}

impl FakeSource {
    fn holding(held: Held) -> Self {
        Self {
            held: watch::Sender::new(held),
            delay: Duration::ZERO,
            failures: AtomicUsize::new(0),
            gate: watch::Sender::new(true),
            fetches: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
        }
    }

    /// A Secret holding a bearer token (checked as a real one is, at each fetch).
    pub fn token(token: impl Into<String>) -> Self {
        Self::holding(Held::Token(token.into()))
    }

    /// A Secret holding a client certificate and key.
    pub fn identity(identity: ClientIdentity) -> Self {
        Self::holding(Held::Identity(identity))
    }

    /// No Secret: every fetch fails with [`SourceError::NotFound`].
    pub fn missing() -> Self {
        Self::holding(Held::Missing)
    }

    /// Each fetch takes `delay`, as a slow exec plugin does.
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The first `n` fetches fail transiently ([`SourceError::Read`]), after their delay.
    #[must_use]
    pub fn failing_first(self, n: usize) -> Self {
        self.failures.store(n, Ordering::SeqCst);
        self
    }

    /// Fetches wait until [`open_gate`](Self::open_gate), so a test can act while a load is
    /// in flight.
    #[must_use]
    pub fn gated(self) -> Self {
        self.gate.send_replace(false);
        self
    }

    /// Lets every waiting and later fetch through.
    pub fn open_gate(&self) {
        self.gate.send_replace(true);
    }

    /// The Secret now holds `token`.
    pub fn set_token(&self, token: impl Into<String>) {
        self.held.send_replace(Held::Token(token.into()));
    }

    /// The Secret now holds `identity`.
    pub fn set_identity(&self, identity: ClientIdentity) {
        self.held.send_replace(Held::Identity(identity));
    }

    /// The Secret is gone.
    pub fn delete(&self) {
        self.held.send_replace(Held::Missing);
    }

    /// Fetches started so far.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    /// Fetches that ran to their end (past the gate and the delay) so far.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl CredentialSource for FakeSource {
    async fn fetch(&self, key: &CredentialKey) -> Result<Credential, SourceError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let held = self.held.borrow().clone();
        // The sender lives as long as `self`: the wait ends only when the gate opens.
        let _ = self.gate.subscribe().wait_for(|open| *open).await;
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(SourceError::Read {
                key: key.clone(),
                source: Arc::new(std::io::Error::other("the source timed out")),
            });
        }
        match held {
            Held::Token(token) => Credential::from_token_bytes(token.as_bytes()),
            Held::Identity(identity) => Ok(Credential::from_identity(identity)),
            Held::Missing => Err(SourceError::NotFound { key: key.clone() }),
        }
    }
}
