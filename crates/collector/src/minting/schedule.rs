//! When a member's next token is due, decided from the token that its home holds now and the
//! record the last mint left: never from memory, so that any replica decides the same.

use std::time::{Duration, SystemTime};

use cluster_registry::minting::MintRecord;
use member_client::jwt_claims::JwtClaims;

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
    record: &MintRecord,
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
        return Next::Mint("the token is past its mint point");
    }
    if request.is_some() && request != record.handled_request.as_deref() {
        // A mint time in the future (a clock ahead, a hand-edited record) is no recent mint:
        // it must not hold requests back for ever.
        let allowed = record
            .minted_at
            .filter(|last| *last <= now)
            .map_or(now, |last| last + spacing);
        if allowed <= now {
            return Next::Mint("a mint was requested (tether.io/mint-now)");
        }
        return Next::At(allowed.min(due));
    }
    Next::At(due)
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::test_util::jwt;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    const SPACING: Duration = Duration::from_secs(30);

    /// What [`next`] says, in seconds since the epoch.
    #[derive(Debug)]
    enum Says {
        At(u64),
        Mint,
        Expired(u64),
    }
    use Says::*;

    /// The token, the request asked for, the one handled last, the last mint, now, and what
    /// [`next`] says.
    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        Option<u64>,
        u64,
        Says,
    );

    #[test]
    fn the_next_step() {
        let granted = jwt(r#"{"iat":1000,"nbf":1000,"exp":1600}"#);
        let issued = jwt(r#"{"iat":1000,"exp":1600}"#);
        let (no_lifetime, no_iat) = (jwt(r#"{"sub":"x"}"#), jwt(r#"{"exp":1600}"#));
        let cases: [Case<'_>; 15] = [
            // Issued at 1000 for 600 s (the apiserver may grant less than asked): due at 1480.
            (&granted, None, None, None, 1200, At(1480)),
            (&granted, None, None, None, 1480, Mint),
            (&granted, None, None, None, 1600, Expired(1600)),
            // A manual request mints once.
            (&issued, Some("r1"), None, None, 1100, Mint),
            (&issued, Some("r1"), Some("r0"), None, 1100, Mint),
            (&issued, Some("r1"), Some("r1"), None, 1100, At(1480)),
            // Minted at 1100 for r1: r2 at 1110 waits until 1130, then mints.
            (&issued, Some("r2"), Some("r1"), Some(1100), 1110, At(1130)),
            (&issued, Some("r2"), Some("r1"), Some(1100), 1130, Mint),
            // A due mint is not held back, and a wait never passes it.
            (&issued, Some("r2"), Some("r1"), Some(1470), 1480, Mint),
            (&issued, Some("r2"), Some("r1"), Some(1460), 1470, At(1480)),
            // A mint "in the future" holds nothing back.
            (&issued, Some("r2"), Some("r1"), Some(9999), 1110, Mint),
            // An expired token is reported even when a mint is requested.
            (&issued, Some("r1"), None, None, 1700, Expired(1600)),
            // Tokens that do not say their lifetime are replaced at once.
            ("opaque", None, None, None, 1100, Mint),
            (&no_lifetime, None, None, None, 1100, Mint),
            (&no_iat, None, None, None, 1100, Mint),
        ];
        for (case, (token, request, handled, minted, now, says)) in cases.into_iter().enumerate() {
            let record = MintRecord {
                handled_request: handled.map(str::to_owned),
                minted_at: minted.map(at),
                ..MintRecord::default()
            };
            let next = next(Some(token), &record, request, 0.8, SPACING, at(now));
            let right = match says {
                At(secs) => next == Next::At(at(secs)),
                Mint => matches!(next, Next::Mint(_)),
                Expired(secs) => next == Next::Expired(at(secs)),
            };
            assert!(right, "case {case}: {next:?}, not {says:?}");
        }
    }

    #[test]
    fn without_a_token_there_is_nothing_to_schedule() {
        let nothing = next(None, &MintRecord::default(), None, 0.8, SPACING, at(1));
        assert_eq!(nothing, Next::NoToken);
    }
}
