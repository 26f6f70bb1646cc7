//! Real certificates for tests: a CA bundle member-client accepts, client certificates and
//! their keys.

/// A fresh self-signed certificate, PEM.
pub(crate) fn ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::new(vec!["test-ca".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap()
        .pem()
}

/// A fresh self-signed client certificate for `common_name` and its key, both PEM.
pub(crate) fn client_pem(common_name: &str) -> (String, String) {
    client_pem_with(common_name, |_| {})
}

/// A client certificate whose `notAfter` passed in 2001, and its key, both PEM.
pub(crate) fn expired_client_pem(common_name: &str) -> (String, String) {
    client_pem_with(common_name, |params| {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    })
}

fn client_pem_with(
    common_name: &str,
    adjust: impl FnOnce(&mut rcgen::CertificateParams),
) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    adjust(&mut params);
    (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

/// `text` in standard base64, as kubeconfigs and Argo CD store PEM.
pub(crate) fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
