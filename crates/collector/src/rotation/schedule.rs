//! When a member's next token is due, decided from the token that its home holds now and the
//! record the last mint left: never from memory, so that any replica decides the same.

use std::time::{Duration, SystemTime};

use cluster_registry::token_rotation::RotationRecord;
use member_client::JwtClaims;

/// What to do about a member's token chain now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Mint now, for this reason.
    Mint(&'static str),
    /// Nothing until then.
    At(SystemTime),
    /// The token in the home expired then: it can mint nothing. Someone must write a fresh
    /// token to re-seed the chain.
    Expired(SystemTime),
    /// The home holds no token.
    NoToken,
}

/// The decision for the token `token` with `record` beside it, as of `now`, minting after
/// `fraction` of the token's lifetime, or for an unhandled manual `request` once `spacing`
/// has passed since the last mint: whoever edits a definition cannot make Tether mint more
/// often than that.
pub(crate) fn next(
    token: Option<&str>,
    record: &RotationRecord,
    request: Option<&str>,
    fraction: f64,
    spacing: Duration,
    now: SystemTime,
) -> Next {
    let Some(token) = token else {
        return Next::NoToken;
    };
    let claims = JwtClaims::of(token).unwrap_or_default();
    // A token without `exp` (a legacy Secret-based token, an opaque one) never expires on its
    // own: replacing it with a bound one is what the member asked for.
    let Some(exp) = claims.exp else {
        return Next::Mint("the token has no expiry");
    };
    if exp <= now {
        return Next::Expired(exp);
    }
    // The lifetime the apiserver granted, which may be less than asked.
    let Some(start) = claims.nbf.or(claims.iat).filter(|start| *start < exp) else {
        return Next::Mint("the token does not say when it was issued");
    };
    let lifetime = exp.duration_since(start).unwrap_or(Duration::ZERO);
    let due = start + lifetime.mul_f64(fraction);
    if due <= now {
        return Next::Mint("the token is past its rotation point");
    }
    if request.is_some() && request != record.handled_request.as_deref() {
        // A mint time in the future (a clock ahead, a hand-edited record) is no recent mint:
        // it must not hold requests back for ever.
        let allowed = record
            .minted_at
            .filter(|last| *last <= now)
            .map_or(now, |last| last + spacing);
        if allowed <= now {
            return Next::Mint("a rotation was requested (tether.io/mint-now)");
        }
        return Next::At(allowed.min(due));
    }
    Next::At(due)
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn jwt(payload: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.c2ln", b64("{}"), b64(payload))
    }

    const SPACING: Duration = Duration::from_secs(30);

    fn decide(token: &str, request: Option<&str>, handled: Option<&str>, now: u64) -> Next {
        let record = RotationRecord {
            handled_request: handled.map(str::to_owned),
            ..RotationRecord::default()
        };
        next(Some(token), &record, request, 0.8, SPACING, at(now))
    }

    #[test]
    fn the_next_token_is_due_at_the_fraction_of_the_granted_lifetime() {
        // Issued at 1000 for 600 s (the apiserver may grant less than asked): due at 1480.
        let token = jwt(r#"{"iat":1000,"nbf":1000,"exp":1600}"#);
        assert_eq!(decide(&token, None, None, 1200), Next::At(at(1480)));
        assert!(matches!(decide(&token, None, None, 1480), Next::Mint(_)));
        assert_eq!(decide(&token, None, None, 1600), Next::Expired(at(1600)));
    }

    #[test]
    fn a_manual_request_mints_once() {
        let token = jwt(r#"{"iat":1000,"exp":1600}"#);
        assert!(matches!(
            decide(&token, Some("r1"), None, 1100),
            Next::Mint(_)
        ));
        assert!(matches!(
            decide(&token, Some("r1"), Some("r0"), 1100),
            Next::Mint(_)
        ));
        assert_eq!(
            decide(&token, Some("r1"), Some("r1"), 1100),
            Next::At(at(1480))
        );
    }

    #[test]
    fn manual_requests_mint_at_most_once_per_spacing() {
        let token = jwt(r#"{"iat":1000,"exp":1600}"#);
        let minted_at = |secs: u64, handled: &str| RotationRecord {
            minted_at: Some(at(secs)),
            handled_request: Some(handled.to_owned()),
            ..RotationRecord::default()
        };
        let decide = |record: &RotationRecord, request: &str, now: u64| {
            next(Some(&token), record, Some(request), 0.8, SPACING, at(now))
        };
        // Minted at 1100 for r1: r2 at 1110 waits until 1130, then mints.
        assert_eq!(
            decide(&minted_at(1100, "r1"), "r2", 1110),
            Next::At(at(1130))
        );
        assert!(matches!(
            decide(&minted_at(1100, "r1"), "r2", 1130),
            Next::Mint(_)
        ));
        // A due rotation is not held back, and a wait never passes it.
        assert!(matches!(
            decide(&minted_at(1470, "r1"), "r2", 1480),
            Next::Mint(_)
        ));
        assert_eq!(
            decide(&minted_at(1460, "r1"), "r2", 1470),
            Next::At(at(1480))
        );
        // A mint "in the future" holds nothing back.
        assert!(matches!(
            decide(&minted_at(9999, "r1"), "r2", 1110),
            Next::Mint(_)
        ));
    }

    #[test]
    fn an_expired_token_is_reported_even_when_a_rotation_is_requested() {
        let token = jwt(r#"{"iat":1000,"exp":1600}"#);
        assert_eq!(
            decide(&token, Some("r1"), None, 1700),
            Next::Expired(at(1600))
        );
    }

    #[test]
    fn tokens_that_do_not_say_their_lifetime_are_replaced_at_once() {
        for token in ["opaque", &jwt(r#"{"sub":"x"}"#), &jwt(r#"{"exp":1600}"#)] {
            assert!(
                matches!(decide(token, None, None, 1100), Next::Mint(_)),
                "{token}"
            );
        }
        assert_eq!(
            next(None, &RotationRecord::default(), None, 0.8, SPACING, at(1)),
            Next::NoToken
        );
    }
}
