//! The output: the `ExecCredential` client-go reads from the plugin's stdout.

use std::time::SystemTime;

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use member_client::{Credential, ExecApiVersion};
use secrecy::{ExposeSecret as _, ExposeSecretMut as _, SecretBox, SecretString};
use serde::Serialize;

use crate::error::Error;

/// The JSON client-go reads: the `apiVersion` it sent, `kind: ExecCredential`, and a `status`
/// with the token and/or the client certificate and key, and `expirationTimestamp`.
///
/// It is written into a [`SecretBox`], so that it is zeroed when dropped and `Debug` never
/// shows it.
///
/// # Errors
/// [`Error::Timestamp`] when `expires_at` cannot be written as RFC 3339 (past year 9999).
pub(crate) fn render(
    api_version: ExecApiVersion,
    credential: &Credential,
    expires_at: SystemTime,
) -> Result<SecretBox<Vec<u8>>, Error> {
    let expiration_timestamp = Timestamp::try_from(expires_at)
        .map(Time)
        .map_err(|_| Error::Timestamp)?;
    let identity = credential.identity();
    let key: Option<SecretString> = identity.map(|i| i.private_key_pem());
    let chain = identity.map(|i| i.certificate_chain_pem());
    let doc = ExecCredential {
        api_version: api_version.as_str(),
        kind: "ExecCredential",
        status: Status {
            expiration_timestamp,
            token: credential.token().map(|t| t.expose_secret()),
            client_certificate_data: chain.as_deref(),
            client_key_data: key.as_ref().map(|k| k.expose_secret()),
        },
    };
    // Room for everything up front: JSON escapes a PEM's newlines (two bytes each), and a
    // buffer that grows would leave unzeroed copies of the key behind.
    let size = doc.status.token.map_or(0, str::len)
        + doc.status.client_certificate_data.map_or(0, str::len)
        + doc.status.client_key_data.map_or(0, str::len);
    let mut out = SecretBox::new(Box::new(Vec::with_capacity(2 * size + 512)));
    serde_json::to_writer(out.expose_secret_mut(), &doc)
        .map_err(|err| Error::Output(err.into()))?;
    out.expose_secret_mut().push(b'\n');
    Ok(out)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential<'a> {
    api_version: &'static str,
    kind: &'static str,
    status: Status<'a>,
}

/// client-go's `ExecCredentialStatus`; the same fields in v1 and v1beta1.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    expiration_timestamp: Time,
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
    use member_client::ClientIdentity;
    use rstest::rstest;
    use serde_json::{Value, json};

    /// 2027-01-15T08:00:00Z.
    fn expiry() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn parsed(out: &SecretBox<Vec<u8>>) -> Value {
        let bytes = out.expose_secret();
        assert_eq!(bytes.last(), Some(&b'\n'), "one line of JSON");
        serde_json::from_slice(bytes).unwrap()
    }

    fn identity() -> (ClientIdentity, String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:tether");
        let cert = params.self_signed(&key).unwrap().pem();
        let key = key.serialize_pem();
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
        let (identity, _, _) = identity();
        let credential = Credential::from_token_bytes(b"tok")
            .unwrap()
            .with_identity(identity);
        let out = parsed(&render(ExecApiVersion::V1Beta1, &credential, expiry()).unwrap());
        let status = out["status"].as_object().unwrap();
        let mut fields: Vec<&str> = status.keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "clientCertificateData",
                "clientKeyData",
                "expirationTimestamp",
                "token"
            ]
        );
    }

    #[test]
    fn debug_shows_neither_the_token_nor_the_key() {
        let (identity, _, key) = identity();
        let credential = Credential::from_token_bytes(b"tok-s3cr3t")
            .unwrap()
            .with_identity(identity);
        let out = render(ExecApiVersion::V1, &credential, expiry()).unwrap();
        let printed = format!("{out:?} {credential:?}");
        assert!(!printed.contains("s3cr3t"), "{printed}");
        assert!(!printed.contains("PRIVATE KEY"), "{printed}");
        let key_body = key.lines().nth(1).unwrap();
        assert!(!printed.contains(key_body), "{printed}");
    }
}
