//! An [`ExecOutput`] written as the ExecCredential a plugin prints, for client-go to read.

use std::time::SystemTime;

use secrecy::{ExposeSecret as _, ExposeSecretMut as _, SecretBox, SecretString};
use serde::Serialize;

use crate::Credential;

use super::{ExecApiVersion, ExecOutput, KIND, timestamp::format_rfc3339};

/// Why an [`ExecOutput`] could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// `expires_at` is past what RFC 3339 can say (around the year 9999).
    #[error("the expiry cannot be written as an RFC 3339 time")]
    ExpiryOutOfRange,
    /// serde failed; it cannot for these plain strings, but the error is not swallowed.
    #[error("writing the ExecCredential")]
    Serialize(#[source] serde_json::Error),
}

impl ExecOutput {
    /// What a plugin hands out for `credential`: its token, its client certificate chain and
    /// key, and `expires_at` as the expiry client-go keeps it until.
    pub fn of_credential(credential: &Credential, expires_at: Option<SystemTime>) -> Self {
        let identity = credential.identity();
        Self {
            token: credential.token().cloned(),
            client_certificate_pem: identity.map(|i| i.certificate_chain_pem()),
            client_key_pem: identity.map(|i| i.private_key_pem()),
            expires_at,
        }
    }

    /// The ExecCredential client-go reads from a plugin's stdout: `api_version` (the one it
    /// sent), `kind: ExecCredential`, and a `status` with the token and/or the client
    /// certificate and key, and `expirationTimestamp` in whole seconds. One line, ending in a
    /// newline.
    ///
    /// It is written into a [`SecretBox`], so that it is zeroed when dropped and `Debug` never
    /// shows it.
    ///
    /// # Errors
    /// [`WriteError::ExpiryOutOfRange`] when `expires_at` cannot be written as RFC 3339.
    pub fn to_json(&self, api_version: ExecApiVersion) -> Result<SecretBox<Vec<u8>>, WriteError> {
        let expiration_timestamp = self
            .expires_at
            .map(|at| format_rfc3339(at).ok_or(WriteError::ExpiryOutOfRange))
            .transpose()?;
        let doc = Document {
            api_version: api_version.as_str(),
            kind: KIND,
            status: Status {
                expiration_timestamp,
                token: self.token.as_ref().map(SecretString::expose_secret),
                client_certificate_data: self.client_certificate_pem.as_deref(),
                client_key_data: self
                    .client_key_pem
                    .as_ref()
                    .map(SecretString::expose_secret),
            },
        };
        // Room for everything up front: JSON escapes a PEM's newlines (two bytes each), and a
        // buffer that grows would leave unzeroed copies of the key behind.
        let size = doc.status.token.map_or(0, str::len)
            + doc.status.client_certificate_data.map_or(0, str::len)
            + doc.status.client_key_data.map_or(0, str::len);
        let mut out = SecretBox::new(Box::new(Vec::with_capacity(2 * size + 512)));
        serde_json::to_writer(out.expose_secret_mut(), &doc).map_err(WriteError::Serialize)?;
        out.expose_secret_mut().push(b'\n');
        Ok(out)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    api_version: &'static str,
    kind: &'static str,
    status: Status<'a>,
}

/// client-go's `ExecCredentialStatus`; the same fields in v1 and v1beta1.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    expiration_timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_certificate_data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_key_data: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{ClientIdentity, test_util::TestPki};
    use rstest::rstest;
    use serde_json::{Value, json};

    /// 2027-01-15T08:00:00Z.
    fn expiry() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn render(
        version: ExecApiVersion,
        credential: &Credential,
        expires_at: SystemTime,
    ) -> Result<SecretBox<Vec<u8>>, WriteError> {
        ExecOutput::of_credential(credential, Some(expires_at)).to_json(version)
    }

    fn parsed(out: &SecretBox<Vec<u8>>) -> Value {
        let bytes = out.expose_secret();
        assert_eq!(bytes.last(), Some(&b'\n'), "one line of JSON");
        serde_json::from_slice(bytes).unwrap()
    }

    fn identity() -> (ClientIdentity, String, String) {
        let (cert, key) = TestPki::new().identity_pem("system:tether");
        let identity = ClientIdentity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
        (identity, cert, key)
    }

    #[rstest]
    #[case::v1(ExecApiVersion::V1, "client.authentication.k8s.io/v1")]
    #[case::v1beta1(ExecApiVersion::V1Beta1, "client.authentication.k8s.io/v1beta1")]
    fn a_token_is_answered_in_the_version_asked(
        #[case] version: ExecApiVersion,
        #[case] api_version: &str,
    ) {
        let credential = Credential::from_token_bytes(b"tok-s3cr3t").unwrap();
        let out = render(version, &credential, expiry()).unwrap();
        assert_eq!(
            parsed(&out),
            json!({
                "apiVersion": api_version,
                "kind": "ExecCredential",
                "status": {"token": "tok-s3cr3t", "expirationTimestamp": "2027-01-15T08:00:00Z"},
            })
        );
    }

    /// A credential of `token` and a fresh client certificate, and the certificate's key PEM.
    fn token_and_certificate(token: &[u8]) -> (Credential, String) {
        let (identity, _, key) = identity();
        let credential = Credential::from_token_bytes(token)
            .unwrap()
            .with_identity(identity);
        (credential, key)
    }

    #[test]
    fn a_certificate_is_answered_as_pem_that_parses_back_to_it() {
        let (identity, cert, _) = identity();
        let credential = Credential::from_identity(identity.clone());
        let out = parsed(&render(ExecApiVersion::V1, &credential, expiry()).unwrap());
        let status = &out["status"];
        assert!(status.get("token").is_none(), "{status}");
        let chain = status["clientCertificateData"].as_str().unwrap();
        let key = status["clientKeyData"].as_str().unwrap();
        assert_eq!(chain, cert.replace("\r\n", "\n"));
        let again = ClientIdentity::from_pem(chain.as_bytes(), key.as_bytes()).unwrap();
        assert!(again.same_as(&identity));
    }

    #[test]
    fn a_token_and_a_certificate_are_both_answered() {
        let (credential, _) = token_and_certificate(b"tok");
        let out = parsed(&render(ExecApiVersion::V1Beta1, &credential, expiry()).unwrap());
        let status = out["status"].as_object().unwrap();
        let mut fields: Vec<&str> = status.keys().map(String::as_str).collect();
        fields.sort_unstable();
        let want = "clientCertificateData clientKeyData expirationTimestamp token";
        assert_eq!(fields.join(" "), want);
    }

    #[test]
    fn debug_shows_neither_the_token_nor_the_key() {
        let (credential, key) = token_and_certificate(b"tok-s3cr3t");
        let output = ExecOutput::of_credential(&credential, Some(expiry()));
        let out = output.to_json(ExecApiVersion::V1).unwrap();
        let printed = format!("{out:?} {credential:?} {output:?}");
        assert!(!printed.contains("s3cr3t"), "{printed}");
        assert!(!printed.contains("PRIVATE KEY"), "{printed}");
        assert!(format!("{output:?}").contains("REDACTED"), "{output:?}");
        let key_body = key.lines().nth(1).unwrap();
        assert!(!printed.contains(key_body), "{printed}");
    }

    #[rstest]
    #[case::v1(ExecApiVersion::V1)]
    #[case::v1beta1(ExecApiVersion::V1Beta1)]
    fn what_is_written_reads_back_with_the_plugin_reader(#[case] version: ExecApiVersion) {
        let (credential, _) = token_and_certificate(b"tok-s3cr3t");
        let written = ExecOutput::of_credential(&credential, Some(expiry()));
        let read =
            ExecOutput::from_json(written.to_json(version).unwrap().expose_secret(), version)
                .unwrap();
        assert_eq!(read.token.unwrap().expose_secret(), "tok-s3cr3t");
        assert_eq!(read.client_certificate_pem, written.client_certificate_pem);
        let key = |pem: Option<SecretString>| pem.map(|k| k.expose_secret().to_owned());
        assert_eq!(key(read.client_key_pem), key(written.client_key_pem));
        assert_eq!(read.expires_at, Some(expiry()));
    }

    #[test]
    fn no_expiry_is_left_out_and_an_unwritable_one_is_an_error() {
        let credential = Credential::from_token_bytes(b"tok").unwrap();
        let out = ExecOutput::of_credential(&credential, None);
        let status = &parsed(&out.to_json(ExecApiVersion::V1).unwrap())["status"];
        assert!(status.get("expirationTimestamp").is_none(), "{status}");
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        let err = ExecOutput::of_credential(&credential, Some(far))
            .to_json(ExecApiVersion::V1)
            .unwrap_err();
        assert!(matches!(err, WriteError::ExpiryOutOfRange), "{err:?}");
    }
}
