//! Keys and PEM for the identity tests: rcgen where it can, `openssl genpkey` where ring cannot.

use std::sync::OnceLock;

use rcgen::{CertificateParams, DnType, KeyPair, SignatureAlgorithm};

use super::*;

/// A throwaway PKCS#8 key from `openssl genpkey` with `args` (space-separated), made once per
/// test run: ring cannot generate RSA keys (kubeadm's client certificates are RSA), and a
/// P-521 key is what rustls' ring provider cannot load.
fn openssl_key(cell: &'static OnceLock<String>, args: &str) -> &'static str {
    cell.get_or_init(|| {
        let out = std::process::Command::new("openssl")
            .arg("genpkey")
            .args(args.split(' '))
            .output()
            .expect("openssl genpkey");
        assert!(out.status.success(), "openssl genpkey {args} failed");
        String::from_utf8(out.stdout).unwrap()
    })
}

pub(super) fn rsa_pkcs8() -> &'static str {
    static KEY: OnceLock<String> = OnceLock::new();
    openssl_key(&KEY, "-algorithm RSA -pkeyopt rsa_keygen_bits:2048")
}

pub(super) fn p521_pkcs8() -> &'static str {
    static KEY: OnceLock<String> = OnceLock::new();
    openssl_key(&KEY, "-algorithm EC -pkeyopt ec_paramgen_curve:secp521r1")
}

/// A leaf named `cn`, self-signed with `key`.
pub(super) fn self_signed(cn: &str, key: &KeyPair) -> String {
    named(cn).self_signed(key).unwrap().pem()
}

/// Certificate parameters for a subject named `cn`.
pub(super) fn named(cn: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params
}

pub(super) fn generated(alg: &'static SignatureAlgorithm) -> KeyPair {
    KeyPair::generate_for(alg).unwrap()
}

pub(super) fn parse(chain: &str, key: &str) -> Result<ClientIdentity, IdentityError> {
    ClientIdentity::from_pem(chain.as_bytes(), key.as_bytes())
}

/// The content of the PKCS#8 `privateKey` OCTET STRING: the PKCS#1 key of an RSA PKCS#8 key,
/// the SEC1 key of an EC one.
pub(super) fn inner_key(pkcs8_der: &[u8]) -> Vec<u8> {
    /// One DER item: (tag, content, rest).
    fn item(input: &[u8]) -> (u8, &[u8], &[u8]) {
        let (tag, first) = (input[0], input[1]);
        let (len, header) = if first < 0x80 {
            (usize::from(first), 2)
        } else {
            let n = usize::from(first & 0x7f);
            let len = input[2..2 + n]
                .iter()
                .fold(0, |len, b| (len << 8) | usize::from(*b));
            (len, 2 + n)
        };
        (tag, &input[header..header + len], &input[header + len..])
    }
    let (_, info, _) = item(pkcs8_der);
    let (_, _, rest) = item(info); // version
    let (_, _, rest) = item(rest); // algorithm
    let (tag, key, _) = item(rest);
    assert_eq!(tag, 0x04, "privateKey is an OCTET STRING");
    key.to_vec()
}

pub(super) fn pem(label: &str, der: &[u8]) -> String {
    use secrecy::ExposeSecret as _;
    crate::client_identity::pem::key(label, der)
        .expose_secret()
        .to_owned()
}
