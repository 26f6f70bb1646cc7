//! Token parsing, JWT expiry, the credential kinds and what `Debug` shows.

use super::*;
use crate::exec::ExecOutput;
use crate::test_util::{TestPki, jwt};
use base64::Engine as _;
use rstest::rstest;
use std::time::Duration;

#[rstest]
// whitespace around a token is trimmed, not sent
#[case::plain(b"abc".to_vec(), "abc")]
#[case::trailing_newline(b"abc\n".to_vec(), "abc")]
#[case::crlf_and_spaces(b"  abc \r\n".to_vec(), "abc")]
#[case::at_the_cap(vec![b'a'; Credential::MAX_TOKEN_BYTES], &"a".repeat(Credential::MAX_TOKEN_BYTES))]
fn token_is_trimmed(#[case] raw: Vec<u8>, #[case] want: &str) {
    let cred = Credential::from_token_bytes(&raw).unwrap();
    assert_eq!(cred.token().unwrap().expose_secret(), want);
}

#[rstest]
// nothing left after trimming
#[case::empty(b"".to_vec(), "EmptyToken")]
#[case::only_whitespace(b" \n\t ".to_vec(), "EmptyToken")]
// not text
#[case::invalid_byte(vec![0x61, 0xff, 0x62], "TokenNotUtf8")]
#[case::lone_continuation(vec![0x80], "TokenNotUtf8")]
// control characters inside the token cannot go in a header
#[case::inner_newline(b"abc\ndef".to_vec(), "TokenNotHeaderSafe")]
#[case::nul_byte(b"abc\0def".to_vec(), "TokenNotHeaderSafe")]
#[case::escape(b"abc\x1bdef".to_vec(), "TokenNotHeaderSafe")]
// longer than any issuer writes
#[case::too_long(vec![b'a'; Credential::MAX_TOKEN_BYTES + 1], "TokenTooLong { max: 16384 }")]
fn unusable_tokens_are_typed_errors(#[case] raw: Vec<u8>, #[case] want: &str) {
    let err = Credential::from_token_bytes(&raw).unwrap_err();
    assert_eq!(format!("{err:?}"), want);
}

#[test]
fn authorization_header_is_bearer_and_sensitive() {
    let cred = Credential::from_token_bytes(b"abc\n").unwrap();
    let authorization = cred.authorization().unwrap();
    assert_eq!(authorization.as_bytes(), b"Bearer abc");
    assert!(authorization.is_sensitive());
    assert!(!format!("{authorization:?}").contains("abc"));
}

#[rstest]
#[case::jwt_with_exp(jwt(r#"{"exp":2000000000,"sub":"x"}"#), Some(2_000_000_000))]
#[case::jwt_with_fractional_exp(jwt(r#"{"exp":1700000000.5}"#), Some(1_700_000_000))]
#[case::jwt_without_exp(jwt(r#"{"sub":"x"}"#), None)]
#[case::jwt_with_string_exp(jwt(r#"{"exp":"soon"}"#), None)]
#[case::jwt_with_negative_exp(jwt(r#"{"exp":-5}"#), None)]
#[case::payload_not_json(jwt("not json"), None)]
#[case::payload_not_base64("a.%%%.c".to_string(), None)]
#[case::two_parts("a.b".to_string(), None)]
#[case::four_parts("a.b.c.d".to_string(), None)]
#[case::opaque("0123456789abcdef".to_string(), None)]
fn expiry_is_read_from_jwt_exp(#[case] token: String, #[case] want_secs: Option<u64>) {
    let cred = Credential::from_token_bytes(token.as_bytes()).unwrap();
    let got = cred
        .expires_at()
        .map(|t| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs());
    assert_eq!(got, want_secs);
}

#[test]
fn padded_jwt_payload_is_accepted() {
    let payload = base64::engine::general_purpose::URL_SAFE.encode(r#"{"exp":12}"#);
    let token = format!("h.{payload}.s");
    assert!(payload.ends_with('='), "test needs a padded payload");
    let cred = Credential::from_token_bytes(token.as_bytes()).unwrap();
    let want = SystemTime::UNIX_EPOCH + Duration::from_secs(12);
    assert_eq!(cred.expires_at(), Some(want));
}

/// Unix seconds of 1 January 2027 and 2040, 00:00 UTC.
const JAN_2027: u64 = 1_798_761_600;
const JAN_2040: u64 = 2_208_988_800;

/// A self-signed client certificate for `cn`, valid until 1 January of `year`.
fn identity(cn: &str, year: i32) -> ClientIdentity {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["client".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.not_after = rcgen::date_time_ymd(year, 1, 1);
    let cert = params.self_signed(&key).unwrap();
    ClientIdentity::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).unwrap()
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

#[test]
fn a_certificate_credential_expires_at_not_after_and_sends_no_token() {
    let cred = Credential::from_identity(identity("alice", 2040));
    assert_eq!(cred.kind(), CredentialKind::Certificate);
    assert_eq!(cred.expires_at(), Some(at(JAN_2040)));
    assert!(cred.authorization().is_none() && cred.token().is_none());
    assert_eq!(cred.identity().unwrap().subject(), "alice");
}

#[test]
fn a_token_with_a_certificate_expires_at_whichever_comes_first() {
    let token = jwt(r#"{"exp":1900000000}"#);
    let sooner_cert = Credential::from_token_bytes(token.as_bytes())
        .unwrap()
        .with_identity(identity("a", 2027));
    assert_eq!(sooner_cert.expires_at(), Some(at(JAN_2027)));
    let later_cert = Credential::from_token_bytes(token.as_bytes())
        .unwrap()
        .with_identity(identity("a", 2040));
    assert_eq!(later_cert.expires_at(), Some(at(1_900_000_000)));
    assert!(later_cert.authorization().is_some() && later_cert.identity().is_some());
}

#[test]
fn an_exec_credential_expires_when_the_plugin_says() {
    let output = ExecOutput {
        token: Some(SecretString::from(jwt(r#"{"exp":1900000000}"#))),
        client_certificate_pem: None,
        client_key_pem: None,
        expires_at: Some(at(1_700_000_000)),
    };
    let cred = Credential::from_exec(&output).unwrap();
    assert_eq!(cred.kind(), CredentialKind::Exec);
    let why = "expirationTimestamp wins";
    assert_eq!(cred.expires_at(), Some(at(1_700_000_000)), "{why}");

    let without = ExecOutput {
        expires_at: None,
        ..output.clone()
    };
    let expires_at = Credential::from_exec(&without).unwrap().expires_at();
    assert_eq!(expires_at, Some(at(1_900_000_000)), "else the JWT exp");
}

#[test]
fn an_exec_certificate_becomes_the_client_identity() {
    let (cert_pem, key_pem) = TestPki::new().identity_pem("exec-user");
    let output = ExecOutput {
        token: None,
        client_certificate_pem: Some(cert_pem),
        client_key_pem: Some(SecretString::from(key_pem)),
        expires_at: None,
    };
    let cred = Credential::from_exec(&output).unwrap();
    assert_eq!(cred.identity().unwrap().subject(), "exec-user");
    assert!(cred.authorization().is_none());
    assert_eq!(cred.kind(), CredentialKind::Exec);

    let mismatched = ExecOutput {
        client_key_pem: Some(SecretString::from(
            rcgen::KeyPair::generate().unwrap().serialize_pem(),
        )),
        ..output
    };
    let err = Credential::from_exec(&mismatched).unwrap_err();
    assert!(matches!(err, SourceError::Identity(_)), "{err:?}");
}

#[test]
fn same_material_compares_token_and_certificate() {
    let (a, b) = (identity("a", 2040), identity("b", 2040));
    let with = |id: &ClientIdentity| {
        Credential::from_token_bytes(b"t")
            .unwrap()
            .with_identity(id.clone())
    };
    assert!(with(&a).same_material(&with(&a)));
    assert!(!with(&a).same_material(&with(&b)), "another certificate");
    assert!(!with(&a).same_material(&Credential::from_token_bytes(b"t").unwrap()));
    let certificate_only = Credential::from_identity(a.clone());
    assert!(!certificate_only.same_material(&with(&a)), "a token added");
}

#[test]
fn debug_never_shows_the_token_or_the_key() {
    let (cert_pem, key_pem) = TestPki::new().identity_pem("c");
    let identity = ClientIdentity::from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).unwrap();
    let cred = Credential::from_token_bytes(b"s3cr3t-token-value")
        .unwrap()
        .with_ca_bundle(&b"-----BEGIN CERTIFICATE-----"[..])
        .with_identity(identity);
    let printed = format!("{cred:?} {cred:#?}");
    assert!(!printed.contains("s3cr3t"), "{printed}");
    assert!(printed.contains("REDACTED"), "{printed}");
    let key_body: String = key_pem.lines().nth(1).unwrap().chars().take(40).collect();
    assert!(!printed.contains(&key_body), "{printed}");
}
