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
    use std::pin::pin;

    const GRACE: Duration = Duration::from_secs(60);

    fn guard() -> (CredentialHealth, Readiness, SelfCredentialGuard) {
        let health = CredentialHealth::new();
        let readiness = Readiness::new();
        let guard = SelfCredentialGuard::new(health.clone(), readiness.clone(), GRACE);
        (health, readiness, guard)
    }

    fn is_not_ready(state: &ReadyState) -> bool {
        matches!(state, ReadyState::NotReady { reason } if reason.contains("rejected"))
    }

    #[tokio::test(start_paused = true)]
    async fn valid_credential_marks_ready() {
        let (health, readiness, guard) = guard();
        let mut run = pin!(guard.run());
        assert!(poll!(&mut run).is_pending());
        assert_eq!(readiness.state(), ReadyState::Starting);
        health.report(CredentialState::Valid);
        assert!(poll!(&mut run).is_pending());
        assert_eq!(readiness.state(), ReadyState::Ready);
    }

    #[tokio::test(start_paused = true)]
    async fn rejected_credential_marks_not_ready_at_once() {
        let (health, readiness, guard) = guard();
        health.report(CredentialState::Valid);
        let mut run = pin!(guard.run());
        assert!(poll!(&mut run).is_pending());
        health.report(CredentialState::Unauthorized);
        assert!(poll!(&mut run).is_pending());
        assert!(is_not_ready(&readiness.state()), "{:?}", readiness.state());
    }

    #[tokio::test(start_paused = true)]
    async fn still_rejected_after_grace_returns() {
        let (health, readiness, guard) = guard();
        health.report(CredentialState::Unauthorized);
        let mut run = pin!(guard.run());
        assert!(poll!(&mut run).is_pending());

        tokio::time::advance(GRACE - Duration::from_millis(1)).await;
        assert!(
            poll!(&mut run).is_pending(),
            "returned before the grace ran out"
        );

        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            poll!(&mut run),
            std::task::Poll::Ready(SelfCredentialUnauthorized { grace: GRACE })
        );
        assert!(is_not_ready(&readiness.state()));
    }

    #[tokio::test(start_paused = true)]
    async fn healed_within_grace_marks_ready_and_keeps_watching() {
        let (health, readiness, guard) = guard();
        health.report(CredentialState::Unauthorized);
        let mut run = pin!(guard.run());
        assert!(poll!(&mut run).is_pending());

        tokio::time::advance(GRACE / 2).await;
        health.report(CredentialState::Valid);
        assert!(poll!(&mut run).is_pending());
        assert_eq!(readiness.state(), ReadyState::Ready);

        tokio::time::advance(GRACE * 2).await;
        assert!(poll!(&mut run).is_pending(), "returned although healed");
        assert_eq!(readiness.state(), ReadyState::Ready);
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_rejection_gets_a_fresh_grace() {
        let (health, _readiness, guard) = guard();
        health.report(CredentialState::Unauthorized);
        let mut run = pin!(guard.run());
        assert!(poll!(&mut run).is_pending());
        tokio::time::advance(GRACE / 2).await;
        health.report(CredentialState::Valid);
        assert!(poll!(&mut run).is_pending());
        health.report(CredentialState::Unauthorized);
        assert!(poll!(&mut run).is_pending());

        // The first grace would have ended here.
        tokio::time::advance(GRACE / 2 + Duration::from_secs(1)).await;
        assert!(poll!(&mut run).is_pending());
        tokio::time::advance(GRACE).await;
        assert!(poll!(&mut run).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn unavailable_credential_marks_not_ready_without_exiting() {
        let (health, readiness, guard) = guard();
        let mut run = pin!(guard.run());
        health.report(CredentialState::Unavailable {
            reason: "token file missing".into(),
        });
        assert!(poll!(&mut run).is_pending());
        assert!(
            matches!(readiness.state(), ReadyState::NotReady { reason } if reason.contains("token file missing"))
        );
        tokio::time::advance(GRACE * 2).await;
        assert!(poll!(&mut run).is_pending());
    }
}
