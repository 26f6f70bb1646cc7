//! The little DER the client certificates need: a subject with several `O`s (rcgen holds one),
//! put into a certificate rcgen signed, which is then signed again by the CA.

use anyhow::{Context, Result, bail, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{KeyPair, SigningKey as _};

// DER, just enough of it: every tag here is one byte, every length fits in 3 bytes.
pub(super) const SEQUENCE: u8 = 0x30;
pub(super) const SET: u8 = 0x31;
pub(super) const OID: u8 = 0x06;
pub(super) const UTF8_STRING: u8 = 0x0c;
pub(super) const BIT_STRING: u8 = 0x03;
pub(super) const VERSION: u8 = 0xa0;
/// 2.5.4.3 (id-at-commonName).
pub(super) const OID_COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];
/// 2.5.4.10 (id-at-organizationName).
pub(super) const OID_ORGANIZATION: [u8; 3] = [0x55, 0x04, 0x0a];

/// The subject `O=<group>, …, CN=<user>`: one RDN per attribute, groups in the given order
/// (the order kubeadm's `O = system:masters, CN = kubernetes-admin` uses).
pub(super) fn subject_name(user: &str, groups: &[&str]) -> Vec<u8> {
    let rdn = |oid: &[u8], value: &str| {
        let attribute = [tlv(OID, oid), tlv(UTF8_STRING, value.as_bytes())].concat();
        tlv(SET, &tlv(SEQUENCE, &attribute))
    };
    let rdns: Vec<u8> = groups
        .iter()
        .map(|g| rdn(&OID_ORGANIZATION, g))
        .chain(std::iter::once(rdn(&OID_COMMON_NAME, user)))
        .collect::<Vec<_>>()
        .concat();
    tlv(SEQUENCE, &rdns)
}

/// `cert` with its subject replaced by `subject` (a DER `Name`), signed again by `ca_key`.
///
/// `Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }` and
/// `TBSCertificate ::= SEQUENCE { [0] version, serialNumber, signature, issuer, validity,
/// subject, … }` (RFC 5280 §4.1). The signature algorithm stays: the key that signs is the same.
pub(super) fn with_subject(cert: &[u8], subject: &[u8], ca_key: &KeyPair) -> Result<Vec<u8>> {
    let (outer, rest) = split_tlv(cert)?;
    ensure!(
        outer.tag == SEQUENCE && rest.is_empty(),
        "not a DER certificate"
    );
    let (tbs, rest) = split_tlv(outer.content)?;
    let (algorithm, rest) = split_tlv(rest)?;
    let (_signature, rest) = split_tlv(rest)?;
    ensure!(
        tbs.tag == SEQUENCE && rest.is_empty(),
        "unexpected certificate layout"
    );

    let mut fields = Vec::new();
    let mut rest = tbs.content;
    while !rest.is_empty() {
        let (field, next) = split_tlv(rest)?;
        fields.push(field);
        rest = next;
    }
    // With the explicit version (rcgen always writes v3) the subject is the 6th field.
    let subject_at = if fields.first().map(|f| f.tag) == Some(VERSION) {
        5
    } else {
        4
    };
    let Some(old) = fields.get(subject_at) else {
        bail!("the certificate has no subject");
    };
    ensure!(old.tag == SEQUENCE, "the subject is not a Name");
    let content: Vec<u8> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| if i == subject_at { subject } else { f.raw })
        .collect::<Vec<_>>()
        .concat();
    let tbs = tlv(SEQUENCE, &content);

    let signature = ca_key
        .sign(&tbs)
        .context("signing the rewritten certificate")?;
    // A BIT STRING starts with its count of unused bits: none.
    let signature = tlv(BIT_STRING, &[&[0u8][..], &signature].concat());
    Ok(tlv(
        SEQUENCE,
        &[&tbs[..], algorithm.raw, &signature].concat(),
    ))
}

/// One DER element: its tag, its content, and all its bytes (header included).
pub(super) struct Tlv<'a> {
    pub(super) tag: u8,
    pub(super) content: &'a [u8],
    pub(super) raw: &'a [u8],
}

/// The first element of `der`, and what follows it.
pub(super) fn split_tlv(der: &[u8]) -> Result<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = der.split_first().context("truncated DER (no tag)")?;
    let (&first, rest) = rest.split_first().context("truncated DER (no length)")?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        ensure!(
            (1..=3).contains(&n),
            "unsupported DER length form {first:#x}"
        );
        let bytes = rest.get(..n).context("truncated DER length")?;
        let len = bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, 2 + n)
    };
    let end = header + len;
    ensure!(der.len() >= end, "truncated DER content");
    let (raw, rest) = der.split_at(end);
    let content = raw.get(header..).context("truncated DER content")?;
    Ok((Tlv { tag, content, raw }, rest))
}

/// `tag`, the DER length of `content`, `content`.
pub(super) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let len = content.len();
    let mut out = vec![tag];
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

/// PEM with 64-column base64 lines, the layout every PEM reader accepts.
pub(super) fn pem(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    // base64 is ASCII, so splitting it anywhere leaves valid UTF-8.
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
