//! A real CA certificate for tests that need a bundle member-client accepts.

/// A fresh self-signed certificate, PEM.
pub(crate) fn ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::new(vec!["test-ca".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap()
        .pem()
}
