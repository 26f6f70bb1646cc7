//! The collector's readiness, as `/readyz` reports it: the state the control-plane credential
//! decides (see the control plane's credential guard), and blockers other parts raise.

pub(crate) mod sources;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

/// Whether the collector should receive traffic, as `/readyz` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum ReadyState {
    /// Nothing has decided yet, e.g. the control-plane credential has not been used.
    #[default]
    Starting,
    /// Serving.
    Ready,
    /// Not serving, for `reason` (shown by `/readyz`; never contains a token).
    NotReady {
        /// Why, in words an operator can act on.
        reason: String,
    },
}

/// The collector's readiness: the state its own credential decides, and blockers other parts
/// raise (a source of member definitions that cannot list, say).
///
/// [`state`](Self::state) is `NotReady` for the credential's reason if it has one, else for
/// the first blocker's, else the credential's state.
///
/// # Concurrent calls
/// Cloning is cheap (one `Arc`); every clone sets and reads the same state. A new handle is
/// [`ReadyState::Starting`], with no blockers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Readiness {
    inputs: Arc<Mutex<Inputs>>,
}

#[derive(Debug, Default)]
struct Inputs {
    credential: ReadyState,
    blockers: BTreeMap<&'static str, String>,
}

impl Readiness {
    /// Sets the credential's state to [`ReadyState::Ready`].
    pub(crate) fn mark_ready(&self) {
        self.set_credential(ReadyState::Ready);
    }

    /// Sets the credential's state to [`ReadyState::NotReady`] with `reason`.
    pub(crate) fn mark_not_ready(&self, reason: impl Into<String>) {
        self.set_credential(ReadyState::NotReady {
            reason: reason.into(),
        });
    }

    /// Keeps the collector not ready for `reason` until [`unblock`](Self::unblock)`(input)`;
    /// a second call for `input` replaces its reason.
    pub(crate) fn block(&self, input: &'static str, reason: impl Into<String>) {
        self.inputs().blockers.insert(input, reason.into());
    }

    /// Lifts `input`'s blocker, if any.
    pub(crate) fn unblock(&self, input: &'static str) {
        self.inputs().blockers.remove(input);
    }

    /// The state now.
    pub(crate) fn state(&self) -> ReadyState {
        let inputs = self.inputs();
        match (&inputs.credential, inputs.blockers.values().next()) {
            (not_ready @ ReadyState::NotReady { .. }, _) => not_ready.clone(),
            (_, Some(reason)) => ReadyState::NotReady {
                reason: reason.clone(),
            },
            (credential, None) => credential.clone(),
        }
    }

    fn set_credential(&self, next: ReadyState) {
        let mut inputs = self.inputs();
        if inputs.credential != next {
            tracing::debug!(from = ?inputs.credential, to = ?next, "readiness changed");
            inputs.credential = next;
        }
    }

    /// NB: held only to read or write a field, never across an `.await`; a panic while held
    /// cannot leave the inputs half-written, so a poisoned lock is used as it is.
    fn inputs(&self) -> MutexGuard<'_, Inputs> {
        self.inputs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejected_credential_outranks_blockers_and_blockers_outrank_ready() {
        let readiness = Readiness::default();
        readiness.block("members", "cannot list");
        assert_eq!(
            readiness.state(),
            ReadyState::NotReady {
                reason: "cannot list".into()
            }
        );
        readiness.mark_not_ready("credential rejected");
        assert_eq!(
            readiness.state(),
            ReadyState::NotReady {
                reason: "credential rejected".into()
            }
        );
        readiness.mark_ready();
        readiness.block("members", "still cannot list");
        assert_eq!(
            readiness.state(),
            ReadyState::NotReady {
                reason: "still cannot list".into()
            }
        );
        readiness.unblock("members");
        assert_eq!(readiness.state(), ReadyState::Ready);
    }
}
