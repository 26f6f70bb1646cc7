//! The one check a CA bundle gets before it is accepted: PEM with at least one certificate.

use rustls_pki_types::{CertificateDer, pem::PemObject as _};

/// Checks that `pem` is PEM holding at least one `CERTIFICATE` block, and says what is wrong
/// otherwise (in words that never quote the input). member-client's `ClientFactory` makes the
/// same check; doing it here turns a bad bundle into a per-member
/// [`SecretInvalid`](crate::InvalidReason::SecretInvalid) instead of a failed client build.
pub(crate) fn check_pem(pem: &[u8]) -> Result<(), String> {
    let mut certs = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|err| format!("not PEM ({err})"))?;
        certs += 1;
    }
    if certs == 0 {
        return Err("no CERTIFICATE block".to_owned());
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rstest::rstest;

    /// A real self-signed certificate, PEM.
    pub(crate) fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        rcgen::CertificateParams::new(vec!["test-ca".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem()
    }

    #[test]
    fn a_certificate_passes() {
        assert_eq!(check_pem(ca_pem().as_bytes()), Ok(()));
    }

    #[rstest]
    #[case::garbage(&b"not a certificate"[..], "no CERTIFICATE block")]
    #[case::empty(&b""[..], "no CERTIFICATE block")]
    #[case::bad_base64(&b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"[..], "not PEM")]
    #[case::only_a_key(&b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"[..], "no CERTIFICATE block")]
    fn anything_else_is_refused(#[case] pem: &[u8], #[case] want: &str) {
        let err = check_pem(pem).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
}
