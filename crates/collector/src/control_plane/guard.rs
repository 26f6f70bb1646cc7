//! The guard on the collector's own control-plane credential.
//!
//! The collector talks to its control plane through the same `CredentialCache` + `CredentialLayer` as to
//! members, with a `FileSource` on the projected ServiceAccount token. If the control plane
//! still rejects that token after the file was re-read, the collector is blind: `/readyz`
//! fails at once, and if the credential has not healed after a grace period the process exits
//! non-zero, so that kubelet restarts it with a freshly mounted token. Loud, never silent.

use std::time::Duration;

use member_client::{CredentialHealth, CredentialState};
use tokio::{sync::watch, time::Instant};

use crate::readiness::Readiness;

/// What [`SelfCredentialGuard::run`] returns: the control plane kept rejecting the collector's
/// own credential for the whole grace period. Not retryable in-process; exit non-zero so that
/// kubelet restarts the pod and mounts a fresh token.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "the control plane rejected the collector's own credential for {grace:?}, also after re-reading the token file"
)]
pub(crate) struct SelfCredentialUnauthorized {
    /// The grace period that ran out.
    pub(crate) grace: Duration,
}

/// Ties [`Readiness`] to the [`CredentialHealth`] of the collector's control-plane client.
///
/// | credential state | readiness | exit timer |
/// | --- | --- | --- |
/// | `Unknown` | left as it is | — |
/// | `Valid` | `Ready` | stopped |
/// | `Unauthorized` | `NotReady` at once | started; [`run`](Self::run) returns when it fires |
/// | `Unavailable` | `NotReady` | — (the token file could not be read: not a rejection, so no exit) |
#[derive(Debug)]
pub(crate) struct SelfCredentialGuard {
    health: CredentialHealth,
    readiness: Readiness,
    grace: Duration,
}

impl SelfCredentialGuard {
    /// A guard that marks `readiness` from `health` and gives a rejected credential `grace`
    /// to heal.
    pub(crate) fn new(health: CredentialHealth, readiness: Readiness, grace: Duration) -> Self {
        Self {
            health,
            readiness,
            grace,
        }
    }

    /// Watches the credential until it has stayed rejected for the grace period.
    ///
    /// Runs on the caller's task (nothing is spawned); dropping the future stops it. It never
    /// returns while the credential is anything but rejected.
    pub(crate) async fn run(self) -> SelfCredentialUnauthorized {
        let mut changes = self.health.subscribe();
        loop {
            let state = changes.borrow_and_update().clone();
            match state {
                CredentialState::Unknown => {}
                CredentialState::Valid => self.readiness.mark_ready(),
                CredentialState::Unavailable { reason } => {
                    tracing::warn!(%reason, "control-plane credential is unavailable");
                    self.readiness.mark_not_ready(format!(
                        "control-plane credential is unavailable: {reason}"
                    ));
                }
                CredentialState::Unauthorized => {
                    if let Some(rejected) = self.sit_out_rejection(&mut changes).await {
                        return rejected;
                    }
                    // Healed (or changed) within the grace: handle the new state above.
                    continue;
                }
            }
            next_change(&mut changes).await;
        }
    }

    /// Marks NotReady, then waits for the state to leave `Unauthorized` (`None`) or for the grace
    /// to run out (`Some`).
    async fn sit_out_rejection(
        &self,
        changes: &mut watch::Receiver<CredentialState>,
    ) -> Option<SelfCredentialUnauthorized> {
        self.readiness.mark_not_ready(
            "control-plane credential is rejected (401 after re-reading the token file)",
        );
        tracing::error!(
            grace = ?self.grace,
            "control plane rejects the collector's own credential; exiting if it does not heal within the grace period"
        );
        let deadline = Instant::now() + self.grace;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    return Some(SelfCredentialUnauthorized { grace: self.grace });
                }
                () = next_change(changes) => {
                    if *changes.borrow() != CredentialState::Unauthorized {
                        tracing::info!("control-plane credential accepted again");
                        return None;
                    }
                }
            }
        }
    }
}

/// Waits for the next change of `changes`.
async fn next_change(changes: &mut watch::Receiver<CredentialState>) {
    if changes.changed().await.is_err() {
        // The guard holds a `CredentialHealth`, so the sender outlives the receiver and this
        // cannot happen; if it ever did, no change can come any more, so wait forever rather
        // than spin.
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readiness::ReadyState;
    use futures::poll;
    use rstest::rstest;
    use std::{pin::pin, task::Poll};

    const GRACE: Duration = Duration::from_secs(60);

    /// One step of a scripted run: the guard is polled after each.
    enum Step {
        /// The credential's health reports this state.
        Report(CredentialState),
        /// Paused time moves on.
        Advance(Duration),
    }

    /// What holds after a step.
    #[derive(Debug)]
    enum Then {
        /// Still running, readiness still `Starting`.
        Starting,
        /// Still running, `Ready`.
        Ready,
        /// Still running, `NotReady` because the credential is rejected.
        Rejected,
        /// Still running, `NotReady` saying the token file is missing.
        Unavailable,
        /// Returned: the grace ran out, and readiness still says rejected.
        Exited,
    }
    use {Step::*, Then::*};

    fn unavailable() -> CredentialState {
        CredentialState::Unavailable {
            reason: "token file missing".into(),
        }
    }

    /// Reports `before`, starts the guard, checks `started`, then runs `steps`.
    #[rstest]
    #[case::valid_credential_marks_ready(
        None, Starting, vec![(Report(CredentialState::Valid), Ready)])]
    #[case::rejected_credential_marks_not_ready_at_once(
        Some(CredentialState::Valid), Ready,
        vec![(Report(CredentialState::Unauthorized), Rejected)])]
    #[case::still_rejected_after_grace_returns(
        Some(CredentialState::Unauthorized), Rejected,
        vec![(Advance(GRACE - Duration::from_millis(1)), Rejected),
             (Advance(Duration::from_millis(1)), Exited)])]
    #[case::healed_within_grace_marks_ready_and_keeps_watching(
        Some(CredentialState::Unauthorized), Rejected,
        vec![(Advance(GRACE / 2), Rejected),
             (Report(CredentialState::Valid), Ready),
             (Advance(GRACE * 2), Ready)])]
    #[case::a_second_rejection_gets_a_fresh_grace(
        Some(CredentialState::Unauthorized), Rejected,
        vec![(Advance(GRACE / 2), Rejected),
             (Report(CredentialState::Valid), Ready),
             (Report(CredentialState::Unauthorized), Rejected),
             // The first grace would have ended here.
             (Advance(GRACE / 2 + Duration::from_secs(1)), Rejected),
             (Advance(GRACE), Exited)])]
    #[case::unavailable_credential_marks_not_ready_without_exiting(
        None, Starting,
        vec![(Report(unavailable()), Unavailable), (Advance(GRACE * 2), Unavailable)])]
    #[tokio::test(start_paused = true)]
    async fn the_guard_follows_the_credential(
        #[case] before: Option<CredentialState>,
        #[case] started: Then,
        #[case] steps: Vec<(Step, Then)>,
    ) {
        let health = CredentialHealth::new();
        let readiness = Readiness::default();
        if let Some(state) = before {
            health.report(state);
        }
        let mut run =
            pin!(SelfCredentialGuard::new(health.clone(), readiness.clone(), GRACE).run());
        let mut check = async |then: &Then, at: usize| {
            let polled = poll!(&mut run);
            let state = readiness.state();
            let rejected =
                matches!(&state, ReadyState::NotReady { reason } if reason.contains("rejected"));
            let ok = match then {
                Starting => polled.is_pending() && state == ReadyState::Starting,
                Ready => polled.is_pending() && state == ReadyState::Ready,
                Rejected => polled.is_pending() && rejected,
                Unavailable => {
                    polled.is_pending()
                        && matches!(&state, ReadyState::NotReady { reason } if reason.contains("token file missing"))
                }
                Exited => {
                    polled == Poll::Ready(SelfCredentialUnauthorized { grace: GRACE }) && rejected
                }
            };
            assert!(
                ok,
                "step {at}: expected {then:?}, got {polled:?} and {state:?}"
            );
        };
        check(&started, 0).await;
        for (at, (step, then)) in steps.into_iter().enumerate() {
            match step {
                Report(state) => _ = health.report(state),
                Advance(by) => tokio::time::advance(by).await,
            }
            check(&then, at + 1).await;
        }
    }
}
