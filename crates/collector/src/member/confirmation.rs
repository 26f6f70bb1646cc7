//! Holding back a refusal until it lasts, so that a restarting member is no refusal.

use std::time::Duration;

use tokio::time::Instant;

use super::health::MemberHealth;

/// How long a refusal must last before it is reported. A kube-apiserver that just started
/// answers 403 until its RBAC caches load, for a few seconds; a restart is no refusal.
const CONFIRM_AFTER: Duration = Duration::from_secs(10);

/// Holds back a refusal as [`MemberHealth::Settling`] until it has lasted [`CONFIRM_AFTER`]
/// over at least two probes.
#[derive(Debug, Default)]
pub(crate) struct Confirmation {
    /// The reason of the refusal being held back, and when it was first seen.
    unconfirmed: Option<(&'static str, Instant)>,
}

impl Confirmation {
    /// What to report, given what is reported now and what this probe observed.
    pub(crate) fn judge(
        &mut self,
        reported: &MemberHealth,
        observed: MemberHealth,
    ) -> MemberHealth {
        if !observed.needs_confirmation() || observed.reason() == reported.reason() {
            self.unconfirmed = None;
            return observed;
        }
        match self.unconfirmed {
            Some((reason, since)) if reason == observed.reason() => {
                if since.elapsed() >= CONFIRM_AFTER {
                    self.unconfirmed = None;
                    return observed;
                }
            }
            _ => self.unconfirmed = Some((observed.reason(), Instant::now())),
        }
        MemberHealth::Settling(observed.reason().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_refusal_is_reported_once_it_lasted() {
        let mut confirmation = Confirmation::default();
        let refused = MemberHealth::Forbidden("may not get /readyz".into());
        let reported = MemberHealth::Unreachable("restarting".into());
        let first = confirmation.judge(&reported, refused.clone());
        assert_eq!(
            (first.reason(), first.credentials_valid_status()),
            ("Settling", "True")
        );
        assert_eq!(first.ready_status(), "Unknown");
        tokio::time::advance(CONFIRM_AFTER / 2).await;
        let second = confirmation.judge(&first, refused.clone());
        assert_eq!(second.reason(), "Settling");
        tokio::time::advance(CONFIRM_AFTER / 2).await;
        assert_eq!(confirmation.judge(&first, refused.clone()), refused);
        // Once reported, it stays reported without waiting.
        assert_eq!(confirmation.judge(&refused, refused.clone()), refused);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_that_goes_away_is_never_reported() {
        let mut confirmation = Confirmation::default();
        let refused = MemberHealth::Forbidden("may not get /readyz".into());
        let first = confirmation.judge(&MemberHealth::Unknown, refused.clone());
        assert_eq!(first.reason(), "Settling");
        tokio::time::advance(CONFIRM_AFTER).await;
        let second = confirmation.judge(&first, MemberHealth::Healthy);
        assert_eq!(second, MemberHealth::Healthy);
        // A later refusal starts over.
        assert_eq!(confirmation.judge(&second, refused).reason(), "Settling");
    }

    #[test]
    fn a_members_error_body_is_cut_and_cannot_forge_lines() {
        let body = format!("evil\nlevel=ERROR msg=forged {}", "x".repeat(100_000));
        let status = kube::core::Status::failure(&body, "y").with_code(500);
        let err = kube::Error::Api(Box::new(status));
        let message = MemberHealth::from_error(&err).message();
        assert!(!message.contains('\n'), "{message}");
        let bytes = message.len();
        assert!(bytes <= 2 * member_client::text::Text::MAX_BYTES, "{bytes}");
    }
}
