use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
    PKCS_ECDSA_P256_SHA256, PKCS_ECDSA_P384_SHA384, PKCS_ED25519,
};
use rstest::rstest;

use super::*;

mod keys;

use keys::*;

/// (chain PEM, key PEM) of a leaf with each kind of key and key encoding.
fn good(kind: &str) -> (String, String) {
    let key = match kind {
        "ecdsa-p256-pkcs8" | "ecdsa-p256-sec1" => generated(&PKCS_ECDSA_P256_SHA256),
        "ecdsa-p384-pkcs8" => generated(&PKCS_ECDSA_P384_SHA384),
        "ed25519-pkcs8" => generated(&PKCS_ED25519),
        "rsa-pkcs8" | "rsa-pkcs1" => KeyPair::from_pem(rsa_pkcs8()).unwrap(),
        other => panic!("no such kind {other}"),
    };
    let key_pem = match kind {
        "ecdsa-p256-sec1" => pem("EC PRIVATE KEY", &inner_key(&key.serialize_der())),
        "rsa-pkcs1" => pem("RSA PRIVATE KEY", &inner_key(&key.serialize_der())),
        _ => key.serialize_pem(),
    };
    (self_signed(kind, &key), key_pem)
}

#[rstest]
#[case::ecdsa_p256_pkcs8("ecdsa-p256-pkcs8")]
#[case::ecdsa_p256_sec1("ecdsa-p256-sec1")]
#[case::ecdsa_p384_pkcs8("ecdsa-p384-pkcs8")]
#[case::ed25519_pkcs8("ed25519-pkcs8")]
#[case::rsa_pkcs8("rsa-pkcs8")]
#[case::rsa_pkcs1("rsa-pkcs1")]
fn good_identities_parse(#[case] kind: &str) {
    let (chain, key) = good(kind);
    let identity = parse(&chain, &key).unwrap();
    assert_eq!(identity.subject(), kind);
    assert!(identity.not_before() <= SystemTime::now());
    assert!(identity.not_after() > SystemTime::now());
    assert!(identity.check_current(SystemTime::now()).is_ok());
    assert_eq!(identity.certified_key().cert.len(), 1);
}

#[rstest]
#[case::ecdsa_p256_pkcs8("ecdsa-p256-pkcs8", "-----BEGIN PRIVATE KEY-----")]
#[case::ecdsa_p256_sec1("ecdsa-p256-sec1", "-----BEGIN EC PRIVATE KEY-----")]
#[case::ed25519_pkcs8("ed25519-pkcs8", "-----BEGIN PRIVATE KEY-----")]
#[case::rsa_pkcs1("rsa-pkcs1", "-----BEGIN RSA PRIVATE KEY-----")]
fn pem_written_back_parses_to_the_same_identity(#[case] kind: &str, #[case] key_header: &str) {
    use secrecy::ExposeSecret as _;
    let (chain, key) = good(kind);
    let identity = parse(&chain, &key).unwrap();
    let (chain_pem, key_pem) = (identity.certificate_chain_pem(), identity.private_key_pem());
    assert!(key_pem.expose_secret().starts_with(key_header), "{kind}");
    let again = parse(&chain_pem, key_pem.expose_secret()).unwrap();
    assert!(again.same_as(&identity), "{kind}");
}

/// A CA, an intermediate it signs, and a leaf the intermediate signs.
fn chain_with_intermediate() -> (String, String, String) {
    let mut ca_params = named("root");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut mid_params = named("intermediate");
    mid_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let mid = CertifiedIssuer::signed_by(mid_params, KeyPair::generate().unwrap(), &ca).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = named("leaf").signed_by(&leaf_key, &mid).unwrap();
    (leaf.pem(), mid.pem(), leaf_key.serialize_pem())
}

#[test]
fn a_chain_keeps_its_intermediates_leaf_first() {
    let (leaf, mid, key) = chain_with_intermediate();
    let identity = parse(&format!("{leaf}{mid}"), &key).unwrap();
    assert_eq!(identity.subject(), "leaf");
    assert_eq!(identity.certified_key().cert.len(), 2);
    let printed = format!("{identity:?}");
    assert!(printed.contains("chain_len: 2"), "{printed}");
    // Written back leaf first, it parses to the same identity.
    let again = parse(&identity.certificate_chain_pem(), &key).unwrap();
    assert!(again.same_as(&identity));
    assert_eq!(again.certified_key().cert.len(), 2);

    // The leaf must come first: its key is checked against the first certificate.
    let err = parse(&format!("{mid}{leaf}"), &key).unwrap_err();
    assert!(err.to_string().contains("does not match"), "{err}");
}

#[test]
fn a_combined_pem_with_the_key_in_the_chain_still_parses() {
    let (chain, key) = good("ecdsa-p256-pkcs8");
    let identity = parse(&format!("{chain}{key}"), &key).unwrap();
    assert_eq!(identity.certified_key().cert.len(), 1);
}

/// What `from_pem` says of an unusable input.
fn invalid(chain: &[u8], key: &[u8]) -> String {
    match ClientIdentity::from_pem(chain, key) {
        Err(err @ IdentityError::Invalid(_)) => {
            assert_eq!(err.condition_reason(), "CertificateInvalid");
            err.to_string()
        }
        other => panic!("expected IdentityError::Invalid, got {other:?}"),
    }
}

#[test]
fn unusable_inputs_are_typed_errors() {
    let (good_chain, good_key) = good("ecdsa-p256-pkcs8");
    let (other_chain, other_key) = good("ecdsa-p256-pkcs8");
    let (chain, key) = (good_chain.as_bytes(), good_key.as_bytes());
    let (other_chain, other_key) = (other_chain.as_bytes(), other_key.as_bytes());
    let block = |label: &str, der: &[u8]| pem(label, der).into_bytes();
    let (no_cert, no_key) = ("no CERTIFICATE block", "no private key block");
    let (mismatch, unsupported) = ("does not match", "unsupported private key");
    let (not_x509, not_a_key) = (block("CERTIFICATE", b"not der"), block("PRIVATE KEY", b"x"));
    let junk_intermediate = [chain, &block("CERTIFICATE", b"junk")].concat();
    let big = vec![b'a'; ClientIdentity::MAX_CHAIN_BYTES + 1];
    let big_key = vec![b'a'; ClientIdentity::MAX_KEY_BYTES + 1];
    let unterminated_chain = b"-----BEGIN CERTIFICATE-----\nMIIB\n";
    let unterminated_key = b"-----BEGIN PRIVATE KEY-----\nMIIB\n";
    // (what, chain, key, what the error says): a bad chain with the good key, a bad key with
    // the good chain.
    let cases: [(&str, &[u8], &[u8], &str); 17] = [
        ("empty chain", b"", key, no_cert),
        ("garbage chain", b"\x00\xffnot pem", key, no_cert),
        ("only a key, as the chain", key, key, no_cert),
        ("unterminated chain", unterminated_chain, key, "not PEM"),
        ("not X.509", &not_x509, key, "not X.509"),
        (
            "intermediate not X.509",
            &junk_intermediate,
            key,
            "certificate 1 of the chain is not X.509",
        ),
        ("certificate of another key", other_chain, key, mismatch),
        ("oversized chain", &big, key, "larger than 1048576 bytes"),
        ("empty key", chain, b"", no_key),
        ("garbage key", chain, b"garbage", no_key),
        ("a certificate as the key", chain, chain, no_key),
        (
            "unterminated key",
            chain,
            unterminated_key,
            "the private key is not PEM",
        ),
        ("key of another certificate", chain, other_key, mismatch),
        ("P-521 key", chain, p521_pkcs8().as_bytes(), unsupported),
        ("not a key", chain, &not_a_key, unsupported),
        ("oversized key", chain, &big_key, "larger than 65536 bytes"),
        ("both empty", b"", b"", no_cert),
    ];
    for (name, chain, key, want) in cases {
        let got = invalid(chain, key);
        assert!(got.contains(want), "{name}: {got:?} does not say {want:?}");
        let quotes_input = got.contains("MIIB") || got.contains("MIG");
        assert!(!quotes_input, "{name}: {got:?}");
    }
}

#[test]
fn inputs_at_the_caps_are_read() {
    let (chain, key) = good("ecdsa-p256-pkcs8");
    let pad = |pem: &str, cap: usize| {
        let mut padded = pem.as_bytes().to_vec();
        padded.resize(cap, b'\n');
        padded
    };
    let identity = ClientIdentity::from_pem(
        &pad(&chain, ClientIdentity::MAX_CHAIN_BYTES),
        &pad(&key, ClientIdentity::MAX_KEY_BYTES),
    );
    assert!(identity.is_ok(), "{identity:?}");
}

#[test]
fn debug_and_errors_never_show_the_key() {
    let (chain, key) = good("rsa-pkcs1");
    let identity = parse(&chain, &key).unwrap();
    let printed = format!("{identity:?} {identity:#?}");
    let body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
    for secret in [&body[..32], &body[body.len() - 40..body.len() - 8]] {
        assert!(!printed.contains(secret), "{printed}");
    }
    assert!(!printed.contains("PRIVATE"), "{printed}");
    assert!(printed.contains("rsa-pkcs1"), "{printed}");
    assert!(printed.contains("chain_len: 1"), "{printed}");

    // A key that fails to load is not quoted either.
    let broken = key.replace(&body[40..44], "!!!!");
    let err = parse(&chain, &broken).unwrap_err();
    assert!(!format!("{err} {err:?}").contains(&body[..32]), "{err:?}");
}

#[test]
fn an_expired_certificate_parses_but_is_not_current() {
    let key = KeyPair::generate().unwrap();
    let mut params = named("old");
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let chain = params.self_signed(&key).unwrap().pem();
    let identity = parse(&chain, &key.serialize_pem()).unwrap();

    let not_after = SystemTime::UNIX_EPOCH + Duration::from_secs(1_609_459_200); // 2021-01-01
    assert_eq!(identity.not_after(), not_after);
    let jan_2020 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800);
    assert_eq!(identity.not_before(), jan_2020);
    let err = identity.check_current(SystemTime::now()).unwrap_err();
    assert_eq!(err, IdentityError::Expired { not_after });
    assert_eq!(err.condition_reason(), "CertificateExpired");
    assert!(err.to_string().contains("2021"), "{err}");
    // Valid up to and including its notAfter.
    assert!(identity.check_current(not_after).is_ok());
    let a_second_late = not_after + Duration::from_secs(1);
    assert!(identity.check_current(a_second_late).is_err());
}

#[test]
fn same_as_compares_chain_and_key_not_the_parse() {
    let (chain, key) = good("ecdsa-p256-pkcs8");
    let a = parse(&chain, &key).unwrap();
    let again = parse(&chain, &key).unwrap();
    assert!(a.same_as(&again) && again.same_as(&a) && a.same_as(&a.clone()));

    // The same key under a new certificate is a new identity (a renewal that keeps the key).
    let reissued = {
        let key_pair = KeyPair::from_pem(&key).unwrap();
        self_signed("ecdsa-p256-pkcs8", &key_pair)
    };
    assert!(!a.same_as(&parse(&reissued, &key).unwrap()));
    let (other_chain, other_key) = good("ecdsa-p256-pkcs8");
    assert!(!a.same_as(&parse(&other_chain, &other_key).unwrap()));
}

#[test]
fn a_subject_without_cn_is_named_by_its_dn_and_sanitized() {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    let dn = &mut params.distinguished_name;
    dn.push(DnType::OrganizationName, "system:masters");
    let chain = params.self_signed(&key).unwrap().pem();
    let no_cn = parse(&chain, &key.serialize_pem()).unwrap();
    assert!(no_cn.subject().contains("system:masters"), "{no_cn:?}");

    let evil = self_signed("admin\n\u{1b}[2Jforged", &key);
    let identity = parse(&evil, &key.serialize_pem()).unwrap();
    assert_eq!(identity.subject(), "admin  [2Jforged");
}
