//! The ExecCredential a plugin prints, read into an [`ExecOutput`].
//!
//! Only the `status` is read: it is all client-go reads of a plugin's answer.

use std::{fmt, time::SystemTime};

use secrecy::SecretString;
use serde_json::{Map, Value};

use crate::{Credential, SourceError};

use super::{ExecApiVersion, KIND, timestamp::parse_rfc3339};
use crate::exec::BadExecOutput;

/// The credential a plugin returned: a bearer token, a client certificate and key, or both.
///
/// `Debug` never shows the token or the key.
#[derive(Clone)]
pub struct ExecOutput {
    /// `status.token`, trimmed; checked to fit an `Authorization` header.
    pub token: Option<SecretString>,
    /// `status.clientCertificateData`: PEM, possibly a chain.
    pub client_certificate_pem: Option<String>,
    /// `status.clientKeyData`: PEM.
    pub client_key_pem: Option<SecretString>,
    /// `status.expirationTimestamp`; `None` means the plugin did not say, and client-go then
    /// keeps the credential until the member rejects it.
    pub expires_at: Option<SystemTime>,
}

impl fmt::Debug for ExecOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |set: bool| if set { "[REDACTED]" } else { "None" };
        f.debug_struct("ExecOutput")
            .field("token", &redacted(self.token.is_some()))
            .field(
                "client_certificate_pem",
                &self.client_certificate_pem.as_ref().map(String::len),
            )
            .field("client_key_pem", &redacted(self.client_key_pem.is_some()))
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl ExecOutput {
    /// Reads a plugin's stdout, with client-go's rules: the `apiVersion` sent, kind
    /// `ExecCredential`, a `status` with a token or a certificate and key. Empty strings count
    /// as absent, as Go's zero values do. The token must fit an `Authorization` header and
    /// [`Credential::MAX_TOKEN_BYTES`].
    ///
    /// # Errors
    /// [`BadExecOutput`], which names fields and never quotes a value.
    pub fn from_json(stdout: &[u8], want: ExecApiVersion) -> Result<Self, BadExecOutput> {
        if stdout.iter().all(u8::is_ascii_whitespace) {
            return Err(BadExecOutput::Empty);
        }
        // Into a `Value` and then by hand: serde's type errors quote the offending value, which
        // may be the token.
        let doc: Value = serde_json::from_slice(stdout).map_err(|err| BadExecOutput::NotJson {
            line: err.line(),
            column: err.column(),
        })?;
        let Value::Object(doc) = doc else {
            return Err(BadExecOutput::NotAnObject);
        };
        let api_version = doc.get("apiVersion").and_then(Value::as_str);
        if api_version != Some(want.as_str()) {
            return Err(BadExecOutput::WrongApiVersion {
                want,
                got: api_version.and_then(known_version),
            });
        }
        if doc.get("kind").and_then(Value::as_str) != Some(KIND) {
            return Err(BadExecOutput::WrongKind);
        }
        let status = match doc.get("status") {
            None | Some(Value::Null) => return Err(BadExecOutput::NoStatus),
            Some(Value::Object(status)) => status,
            Some(_) => {
                return Err(BadExecOutput::WrongType {
                    field: "status",
                    expected: "an object",
                });
            }
        };

        let token = string(status, "token", "status.token")?;
        let cert = string(
            status,
            "clientCertificateData",
            "status.clientCertificateData",
        )?;
        let key = string(status, "clientKeyData", "status.clientKeyData")?;
        match (cert, key) {
            (Some(_), None) => return Err(incomplete("clientCertificateData", "clientKeyData")),
            (None, Some(_)) => return Err(incomplete("clientKeyData", "clientCertificateData")),
            (None, None) if token.is_none() => return Err(BadExecOutput::NoCredential),
            _ => {}
        }
        let token = token
            .map(|token| Credential::from_token_bytes(token.as_bytes()).map_err(token_problem))
            .transpose()?
            .and_then(|credential| credential.token().cloned());
        let expires_at = string(status, "expirationTimestamp", "status.expirationTimestamp")?
            .map(|text| parse_rfc3339(text).ok_or(BadExecOutput::BadTimestamp))
            .transpose()?;

        Ok(ExecOutput {
            token,
            client_certificate_pem: cert.map(str::to_owned),
            client_key_pem: key.map(SecretString::from),
            expires_at,
        })
    }
}

/// A string field; absent, `null` and `""` are all `None`.
fn string<'a>(
    status: &'a Map<String, Value>,
    name: &str,
    field: &'static str,
) -> Result<Option<&'a str>, BadExecOutput> {
    match status.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.as_str()).filter(|text| !text.is_empty())),
        Some(_) => Err(BadExecOutput::WrongType {
            field,
            expected: "a string",
        }),
    }
}

fn incomplete(present: &'static str, missing: &'static str) -> BadExecOutput {
    BadExecOutput::IncompleteKeyPair { present, missing }
}

fn token_problem(err: SourceError) -> BadExecOutput {
    match err {
        SourceError::TokenTooLong { max } => BadExecOutput::TokenTooLong { max },
        SourceError::EmptyToken => BadExecOutput::TokenBlank,
        _ => BadExecOutput::TokenNotHeaderSafe,
    }
}

/// Only a version of this API group is named back: any other text came from the plugin and
/// could be anything, a credential included.
fn known_version(got: &str) -> Option<&'static str> {
    [
        "client.authentication.k8s.io/v1",
        "client.authentication.k8s.io/v1beta1",
        "client.authentication.k8s.io/v1alpha1",
    ]
    .into_iter()
    .find(|known| *known == got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use secrecy::ExposeSecret;
    use std::time::Duration;

    const V1: &str = "client.authentication.k8s.io/v1";

    fn with_status(status: &str) -> String {
        format!(r#"{{"apiVersion":"{V1}","kind":"ExecCredential","status":{status}}}"#)
    }

    /// A v1 ExecCredential with `status`, read.
    fn read(status: &str) -> ExecOutput {
        ExecOutput::from_json(with_status(status).as_bytes(), ExecApiVersion::V1).unwrap()
    }

    #[test]
    fn a_token_and_its_expiry_are_read() {
        let out = read(r#"{"token":" tok-1\n","expirationTimestamp":"2026-12-01T20:00:00Z"}"#);
        assert_eq!(out.token.unwrap().expose_secret(), "tok-1");
        let want = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_155_200);
        assert_eq!(out.expires_at, Some(want));
        assert!(out.client_certificate_pem.is_none() && out.client_key_pem.is_none());
    }

    #[test]
    fn a_client_certificate_and_key_are_read_with_an_empty_token() {
        let status = r#"{"token":"","clientCertificateData":"CERT","clientKeyData":"KEY","expirationTimestamp":null}"#;
        let out = read(status);
        assert!(out.token.is_none());
        assert_eq!(out.client_certificate_pem.as_deref(), Some("CERT"));
        assert_eq!(out.client_key_pem.unwrap().expose_secret(), "KEY");
        assert_eq!(out.expires_at, None);
    }

    #[rstest]
    #[case::empty("", BadExecOutput::Empty)]
    #[case::whitespace(" \n", BadExecOutput::Empty)]
    #[case::garbage("token: abc", BadExecOutput::NotJson { line: 1, column: 2 })]
    #[case::truncated(r#"{"apiVersion":"#, BadExecOutput::NotJson { line: 1, column: 14 })]
    #[case::array("[]", BadExecOutput::NotAnObject)]
    #[case::no_api_version(r#"{"kind":"ExecCredential","status":{"token":"t"}}"#,
        BadExecOutput::WrongApiVersion { want: ExecApiVersion::V1, got: None })]
    #[case::other_version(r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}}"#,
        BadExecOutput::WrongApiVersion { want: ExecApiVersion::V1, got: Some("client.authentication.k8s.io/v1beta1") })]
    #[case::unknown_version(r#"{"apiVersion":"v9","kind":"ExecCredential","status":{"token":"t"}}"#,
        BadExecOutput::WrongApiVersion { want: ExecApiVersion::V1, got: None })]
    #[case::wrong_kind(r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"Status","status":{"token":"t"}}"#,
        BadExecOutput::WrongKind)]
    #[case::no_status(
        r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#,
        BadExecOutput::NoStatus
    )]
    #[case::null_status(&with_status("null"), BadExecOutput::NoStatus)]
    #[case::status_not_an_object(&with_status(r#""t""#),
        BadExecOutput::WrongType { field: "status", expected: "an object" })]
    #[case::empty_status(&with_status("{}"), BadExecOutput::NoCredential)]
    #[case::empty_strings(&with_status(r#"{"token":"","clientKeyData":""}"#), BadExecOutput::NoCredential)]
    #[case::token_not_a_string(&with_status(r#"{"token":42}"#),
        BadExecOutput::WrongType { field: "status.token", expected: "a string" })]
    #[case::only_certificate(&with_status(r#"{"clientCertificateData":"C"}"#),
        BadExecOutput::IncompleteKeyPair { present: "clientCertificateData", missing: "clientKeyData" })]
    #[case::only_key(&with_status(r#"{"token":"t","clientKeyData":"K"}"#),
        BadExecOutput::IncompleteKeyPair { present: "clientKeyData", missing: "clientCertificateData" })]
    #[case::blank_token(&with_status(r#"{"token":"  "}"#), BadExecOutput::TokenBlank)]
    #[case::token_with_newline(&with_status(r#"{"token":"a\nb"}"#), BadExecOutput::TokenNotHeaderSafe)]
    #[case::token_too_long(&with_status(&format!(r#"{{"token":"{}"}}"#, "a".repeat(Credential::MAX_TOKEN_BYTES + 1))),
        BadExecOutput::TokenTooLong { max: Credential::MAX_TOKEN_BYTES })]
    #[case::bad_timestamp(&with_status(r#"{"token":"t","expirationTimestamp":"tomorrow"}"#),
        BadExecOutput::BadTimestamp)]
    #[case::numeric_timestamp(&with_status(r#"{"token":"t","expirationTimestamp":1796155200}"#),
        BadExecOutput::WrongType { field: "status.expirationTimestamp", expected: "a string" })]
    fn unusable_output_says_what_is_wrong(#[case] stdout: &str, #[case] want: BadExecOutput) {
        let err = ExecOutput::from_json(stdout.as_bytes(), ExecApiVersion::V1).unwrap_err();
        assert_eq!(err, want);
    }

    #[rstest]
    #[case::truncated_json(
        r#"{"apiVersion":"client.authentication.k8s.io/v1","status":{"token":"leak-me-123"#
    )]
    #[case::token_of_the_wrong_type(&with_status(r#"{"token":["leak-me-123"]}"#))]
    #[case::token_as_api_version(r#"{"apiVersion":"leak-me-123","kind":"ExecCredential"}"#)]
    #[case::token_as_kind(
        r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"leak-me-123"}"#
    )]
    #[case::token_as_timestamp(&with_status(r#"{"token":"t","expirationTimestamp":"leak-me-123"}"#))]
    #[case::unsendable_token(&with_status(r#"{"token":"leak-me-123\u0000"}"#))]
    fn errors_never_quote_stdout(#[case] stdout: &str) {
        let err = ExecOutput::from_json(stdout.as_bytes(), ExecApiVersion::V1).unwrap_err();
        let printed = format!("{err} {err:?}");
        assert!(!printed.contains("leak-me"), "{printed}");
    }
}
