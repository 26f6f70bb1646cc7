//! [`JwtClaims`]: what a bearer token's JWT payload says of itself. The signature is not
//! checked: only the member's apiserver can judge it.

use std::time::{Duration, SystemTime};

use base64::Engine as _;

/// The registered claims of a JWT's payload that Tether reads: who issued it, for whom, who
/// it names, and when it is valid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JwtClaims {
    /// `iss`.
    pub iss: Option<String>,
    /// `aud`: one string or a list in the token, always a list here.
    pub aud: Vec<String>,
    /// `sub` (a ServiceAccount token's is `system:serviceaccount:<namespace>:<name>`).
    pub sub: Option<String>,
    /// `exp`.
    pub exp: Option<SystemTime>,
    /// `iat`.
    pub iat: Option<SystemTime>,
    /// `nbf`.
    pub nbf: Option<SystemTime>,
}

impl JwtClaims {
    /// The claims of `token`; `None` for anything that is not a three-part token with a
    /// base64url JSON object as its payload. A claim of the wrong type reads as absent.
    ///
    /// ```
    /// use member_client::jwt_claims::JwtClaims;
    /// // {"sub":"system:serviceaccount:ns:sa","exp":2000000000}
    /// let token = "e30.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6bnM6c2EiLCJleHAiOjIwMDAwMDAwMDB9.c2ln";
    /// let claims = JwtClaims::of(token).unwrap();
    /// assert_eq!(claims.sub.as_deref(), Some("system:serviceaccount:ns:sa"));
    /// assert!(claims.exp.is_some() && claims.iat.is_none());
    /// assert_eq!(JwtClaims::of("opaque-token"), None);
    /// ```
    pub fn of(token: &str) -> Option<Self> {
        let mut parts = token.split('.');
        let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        // RFC 7515 says unpadded, but some issuers pad; accept both.
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()?;
        let claims: serde_json::Value = serde_json::from_slice(&payload).ok()?;
        let claims = claims.as_object()?;
        let text = |value: &serde_json::Value| value.as_str().map(str::to_owned);
        let time = |name: &str| {
            claims
                .get(name)
                .and_then(serde_json::Value::as_f64)
                .and_then(seconds)
        };
        let aud = match claims.get("aud") {
            Some(serde_json::Value::Array(items)) => items.iter().filter_map(text).collect(),
            Some(one) => text(one).into_iter().collect(),
            None => Vec::new(),
        };
        Some(Self {
            iss: claims.get("iss").and_then(text),
            aud,
            sub: claims.get("sub").and_then(text),
            exp: time("exp"),
            iat: time("iat"),
            nbf: time("nbf"),
        })
    }
}

/// A NumericDate (seconds since the epoch, possibly fractional) as a time.
fn seconds(value: f64) -> Option<SystemTime> {
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    SystemTime::UNIX_EPOCH.checked_add(Duration::try_from_secs_f64(value).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::jwt;

    #[test]
    fn every_claim_is_read_and_a_wrong_type_reads_as_absent() {
        let claims = JwtClaims::of(&jwt(
            r#"{"iss":"https://k","aud":["a","b"],"sub":"s","exp":2000000000,"iat":1999996400,"nbf":"x"}"#,
        ))
        .unwrap();
        assert_eq!(claims.iss.as_deref(), Some("https://k"));
        assert_eq!(claims.aud, ["a", "b"]);
        assert_eq!(claims.sub.as_deref(), Some("s"));
        let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(claims.exp, Some(at(2_000_000_000)));
        assert_eq!(claims.iat, Some(at(1_999_996_400)));
        assert_eq!(claims.nbf, None);
        let one_audience = JwtClaims::of(&jwt(r#"{"aud":"one"}"#)).unwrap();
        assert_eq!(one_audience.aud, ["one"]);
    }

    #[test]
    fn what_is_not_a_jwt_has_no_claims() {
        for token in ["a.b", "a.b.c.d", &jwt("[1]"), &jwt("not json"), "x.!!!.y"] {
            assert_eq!(JwtClaims::of(token), None, "{token}");
        }
    }
}
