//! What a member's credential is, said without showing it: its kind, a JWT's `iss`/`aud`/`exp`
//! (the payload only, never the token), a certificate's subject and `notAfter`, and the time
//! left.

use std::time::SystemTime;

use member_client::{Credential, exec::wire::format_rfc3339, jwt_claims::JwtClaims};
use secrecy::ExposeSecret as _;
use serde::Serialize;

/// A credential as the check reports it.
#[serde_with::skip_serializing_none]
#[derive(Debug, Default, Serialize)]
pub(crate) struct CredentialSummary {
    /// Where it comes from: a Secret, an exec plugin's command, a member file.
    pub(crate) from: String,
    /// `token`, `exec` or `certificate`, once it could be read.
    pub(crate) kind: Option<&'static str>,
    /// A JWT bearer token's claims.
    pub(crate) jwt: Option<JwtSummary>,
    /// A client certificate.
    pub(crate) certificate: Option<CertificateSummary>,
    /// When it expires, if it says.
    #[serde(flatten)]
    pub(crate) expiry: Option<Expiry>,
    /// Why it could not be read (never quotes it).
    pub(crate) error: Option<String>,
}

/// The claims of a JWT that say who issued it, for whom, and until when.
#[serde_with::skip_serializing_none]
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(crate) struct JwtSummary {
    /// `iss`.
    pub(crate) iss: Option<String>,
    /// `aud`: one string or a list in the token, always a list here.
    pub(crate) aud: Vec<String>,
    /// `exp`, RFC 3339.
    pub(crate) exp: Option<String>,
}

impl JwtSummary {
    /// The `iss`, `aud` and `exp` of a JWT's payload; `None` for a token that is not a JWT.
    pub(crate) fn of(token: &str) -> Option<Self> {
        let claims = JwtClaims::of(token)?;
        Some(Self {
            iss: claims.iss,
            aud: claims.aud,
            exp: claims.exp.map(rfc3339),
        })
    }
}

/// When a credential expires.
#[derive(Debug, Serialize)]
pub(crate) struct Expiry {
    /// RFC 3339.
    pub(crate) expires_at: String,
    /// Seconds until then; negative once expired.
    pub(crate) expires_in_seconds: i64,
}

/// A client certificate's subject and end of validity.
#[derive(Debug, Serialize)]
pub(crate) struct CertificateSummary {
    /// The subject, as an RFC 4514 string.
    pub(crate) subject: String,
    /// `notAfter`, RFC 3339.
    pub(crate) not_after: String,
}

impl CredentialSummary {
    /// Describes `credential`, which comes `from` where it says, as of `now`.
    pub(crate) fn of(from: String, credential: &Credential, now: SystemTime) -> Self {
        let jwt = credential
            .token()
            .and_then(|token| JwtSummary::of(token.expose_secret()));
        let certificate = credential.identity().map(|identity| CertificateSummary {
            subject: identity.subject().to_owned(),
            not_after: rfc3339(identity.not_after()),
        });
        Self {
            from,
            kind: Some(credential.kind().as_str()),
            jwt,
            certificate,
            expiry: credential.expires_at().map(|at| Expiry {
                expires_at: rfc3339(at),
                expires_in_seconds: seconds_between(now, at),
            }),
            error: None,
        }
    }
}

/// `at` as RFC 3339, to the second, as the exec wire format writes times.
pub(crate) fn rfc3339(at: SystemTime) -> String {
    format_rfc3339(at).unwrap_or_else(|| "out of range".to_owned())
}

/// Whole seconds from `from` to `to`, negative when `to` is earlier.
pub(crate) fn seconds_between(from: SystemTime, to: SystemTime) -> i64 {
    match to.duration_since(from) {
        Ok(ahead) => i64::try_from(ahead.as_secs()).unwrap_or(i64::MAX),
        Err(behind) => -i64::try_from(behind.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// A time left for a person: `3d4h`, `5h12m`, `42m`, `30s`, or `expired 5m ago`.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < 0 {
        return format!("expired {} ago", human_duration(-seconds));
    }
    let (d, h, m) = (
        seconds / 86_400,
        seconds % 86_400 / 3600,
        seconds % 3600 / 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{seconds}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, m) => format!("{h}h{m}m"),
        (d, h, _) => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::test_util::jwt;
    use std::time::Duration;

    #[test]
    fn a_jwt_says_who_issued_it_for_whom_and_until_when() {
        let token = jwt(
            r#"{"iss":"https://kubernetes.default.svc","aud":["api","vault"],"exp":1767225600,"sub":"system:serviceaccount:ns:sa"}"#,
        );
        assert_eq!(
            JwtSummary::of(&token),
            Some(JwtSummary {
                iss: Some("https://kubernetes.default.svc".into()),
                aud: vec!["api".into(), "vault".into()],
                exp: Some("2026-01-01T00:00:00Z".into()),
            })
        );
    }

    #[test]
    fn a_token_that_is_not_a_jwt_has_no_summary() {
        // Opaque, four parts, a payload that is not JSON.
        for token in ["0123456789abcdef", "a.b.c.d", "eyJ9.bm90IGpzb24.c2ln"] {
            assert_eq!(JwtSummary::of(token), None, "{token}");
        }
    }

    #[test]
    fn the_summary_never_holds_the_token() {
        let token = jwt(r#"{"exp":4102444800}"#);
        let credential = Credential::from_token_bytes(token.as_bytes()).unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(4_102_444_800 - 90);
        let summary = CredentialSummary::of("Secret ns/s".into(), &credential, now);
        assert_eq!(summary.kind, Some("token"));
        let expiry = summary.expiry.as_ref().unwrap();
        assert_eq!(expiry.expires_in_seconds, 90);
        assert_eq!(expiry.expires_at, "2100-01-01T00:00:00Z");
        let json = serde_json::to_string(&summary).unwrap();
        assert!(!json.contains(&token) && !json.contains("c2ln"), "{json}");
        // A claim the token does not have is left out, not written as null.
        assert!(!json.contains("null") && !json.contains("iss"), "{json}");
    }

    #[test]
    fn time_left_reads_at_a_glance() {
        for (seconds, want) in [
            (30, "30s"),
            (42 * 60 + 5, "42m"),
            (5 * 3600 + 12 * 60, "5h12m"),
            (3 * 86_400 + 4 * 3600 + 59, "3d4h"),
            (-300, "expired 5m ago"),
        ] {
            assert_eq!(human_duration(seconds), want);
        }
    }
}
