//! When client-go should run the plugin again: the `expirationTimestamp` handed out.
//!
//! client-go keeps an `ExecCredential` until its `expirationTimestamp` and, without one, until
//! a request gets 401. Handing out the credential's own expiry minus a margin makes client-go
//! come back before the member would refuse it; capping it at `--ttl` makes client-go come back
//! soon after the Secret is rotated, instead of at the first 401.

use std::time::{Duration, SystemTime};

/// The rule: `min(expiry − skew, now + ttl)`, or `now + ttl` for a credential that does not
/// say when it expires (an opaque token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExpiryRule {
    /// The longest time a credential is handed out for.
    pub(crate) ttl: Duration,
    /// How long before its own expiry a credential is no longer handed out.
    pub(crate) skew: Duration,
}

/// The credential expires within the skew (or has expired): it is not handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLate {
    /// The credential's own expiry.
    pub(crate) expires_at: SystemTime,
}

impl ExpiryRule {
    /// The `expirationTimestamp` for a credential that expires at `expires_at` (JWT `exp`,
    /// certificate `notAfter`, whichever is first), judged at `now`.
    ///
    /// It is rounded down to a whole second, as `expirationTimestamp` is written.
    ///
    /// # Errors
    /// [`TooLate`] when that time is not after `now`.
    pub(crate) fn deadline(
        &self,
        expires_at: Option<SystemTime>,
        now: SystemTime,
    ) -> Result<SystemTime, TooLate> {
        // `now + ttl` overflows only for an absurd ttl: a century is as good as meant.
        let capped = (now.checked_add(self.ttl))
            .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
            .unwrap_or(now);
        let deadline = match expires_at {
            Some(at) => at
                .checked_sub(self.skew)
                .unwrap_or(SystemTime::UNIX_EPOCH)
                .min(capped),
            None => capped,
        };
        let deadline = whole_second(deadline);
        match deadline > now {
            true => Ok(deadline),
            false => Err(TooLate {
                expires_at: expires_at.unwrap_or(deadline),
            }),
        }
    }
}

fn whole_second(at: SystemTime) -> SystemTime {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(since) => SystemTime::UNIX_EPOCH + Duration::from_secs(since.as_secs()),
        Err(_) => SystemTime::UNIX_EPOCH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const NOW_SECS: u64 = 1_800_000_000;

    fn rule() -> ExpiryRule {
        ExpiryRule {
            ttl: Duration::from_secs(300),
            skew: Duration::from_secs(30),
        }
    }

    /// A fixed `now`, with a fraction so that rounding down shows.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(NOW_SECS * 1000 + 250)
    }

    fn at(secs_from_now: i64) -> SystemTime {
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(NOW_SECS);
        match u64::try_from(secs_from_now) {
            Ok(ahead) => base + Duration::from_secs(ahead),
            Err(_) => base - Duration::from_secs(secs_from_now.unsigned_abs()),
        }
    }

    /// `exp`: the credential's expiry in seconds from now (`None`: opaque); `Ok`: the deadline
    /// handed out, `Err`: too late.
    #[rstest]
    #[case::opaque_token_for_the_ttl(None, Ok(300))]
    #[case::long_lived_capped_at_the_ttl(Some(3600), Ok(300))]
    #[case::expiring_within_the_ttl_until_exp_minus_skew(Some(120), Ok(90))]
    #[case::just_beyond_the_skew(Some(32), Ok(2))]
    #[case::at_the_skew(Some(30), Err(30))]
    #[case::within_the_skew(Some(20), Err(20))]
    #[case::past(Some(-60), Err(-60))]
    fn deadline(#[case] exp: Option<i64>, #[case] want: Result<i64, i64>) {
        let want = want.map(at).map_err(|exp| TooLate {
            expires_at: at(exp),
        });
        assert_eq!(rule().deadline(exp.map(at), now()), want);
    }

    #[test]
    fn a_deadline_within_this_second_is_too_late() {
        // exp − skew is 0.5 s after a `now` of .250: rounded down, it is not after now.
        let exp = now() + Duration::from_millis(30_500);
        assert!(rule().deadline(Some(exp), now()).is_err());
    }

    #[test]
    fn zero_skew_hands_out_until_the_expiry_itself() {
        let rule = ExpiryRule {
            skew: Duration::ZERO,
            ..rule()
        };
        assert_eq!(rule.deadline(Some(at(60)), now()), Ok(at(60)));
    }
}
