//! [`ClientCert`]: X.509 client certificates from a cluster's client CA, the way kubeadm's
//! `admin.conf` or a platform team's PKI authenticates a user to a kube-apiserver.
//!
//! The apiserver (`--client-ca-file`) maps the subject to a user: CN is the username, every
//! O is a group ([Kubernetes: X509 client certificates]).
//!
//! NB: rcgen's `DistinguishedName` holds one value per attribute type, so it cannot write
//! several `O=`. The harness lets rcgen build and sign the certificate with `CN` only, then
//! swaps in its own subject (`O=<group>`…, `CN=<user>`) and signs the result again with the
//! CA key. Nothing else in the certificate changes.
//!
//! [Kubernetes: X509 client certificates]: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#x509-client-certificates

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose, SigningKey as _,
    date_time_ymd,
};

use crate::cluster::Cluster;
use crate::pki::TestCa;

/// How far in the past a certificate's `notBefore` lies, so a clock a little behind the
/// apiserver's (or the second it was issued in) does not make it "not yet valid".
const BACKDATE: Duration = Duration::from_secs(60);
/// How long ago an [expired](Cluster::issue_expired_client_cert) certificate stopped being
/// valid, and how long it was valid before that.
const EXPIRED_FOR: Duration = Duration::from_secs(3600);

/// A client certificate and its private key, both PEM: what a kubeconfig's
/// `client-certificate-data`/`client-key-data` hold (base64 of these).
///
/// `Debug` shows neither: the certificate is long and the key is a credential.
#[derive(Clone)]
pub struct ClientCert {
    /// The certificate (`CERTIFICATE` PEM), signed by the cluster's client CA.
    pub cert_pem: String,
    /// Its private key (PKCS#8 `PRIVATE KEY` PEM, ECDSA P-256).
    pub key_pem: String,
}

impl std::fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCert").finish_non_exhaustive()
    }
}

impl Cluster {
    /// Issues a client certificate for `user` in `groups` (CN = `user`, one O per group,
    /// extended key usage `clientAuth`), signed by this cluster's client CA, valid from a
    /// minute ago for `valid_for` from now. The apiserver authenticates it as that user.
    ///
    /// The client CA is the cluster's own (not the one that signs its serving certificate) and
    /// survives [`Environment::restart`](crate::Environment::restart), with or without a new
    /// serving CA, so certificates issued before a restart keep working.
    ///
    /// ```no_run
    /// # async fn demo(env: &testkit::Environment) -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// let cert = env.cluster(1).issue_client_cert("alice", &["tether-test"], Duration::from_secs(3600))?;
    /// // base64 of cert.cert_pem / cert.key_pem go into kube's
    /// // `auth_info.client_certificate_data` / `client_key_data`.
    /// # let _ = cert; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// If the cluster has no client CA known to the harness (one not started by
    /// [`Environment`](crate::Environment), such as k3s), `user` is empty, or signing fails.
    pub fn issue_client_cert(
        &self,
        user: &str,
        groups: &[&str],
        valid_for: Duration,
    ) -> Result<ClientCert> {
        let now = SystemTime::now();
        let not_before = now
            .checked_sub(BACKDATE)
            .context("the clock is before 1970")?;
        let not_after = now
            .checked_add(valid_for)
            .with_context(|| format!("now + {valid_for:?} overflows"))?;
        self.client_ca()?
            .issue_client_cert(user, groups, not_before, not_after)
    }

    /// Like [`issue_client_cert`](Self::issue_client_cert), but expired an hour ago (valid for
    /// the hour before that): signed by the right CA, so the only reason to reject it is its
    /// validity period (Go's `x509: certificate has expired`; rustls' `CertificateExpired`).
    ///
    /// # Errors
    /// As [`issue_client_cert`](Self::issue_client_cert).
    pub fn issue_expired_client_cert(&self, user: &str, groups: &[&str]) -> Result<ClientCert> {
        let now = SystemTime::now();
        let not_after = now
            .checked_sub(EXPIRED_FOR)
            .context("the clock is before 1970")?;
        let not_before = not_after
            .checked_sub(EXPIRED_FOR)
            .context("the clock is before 1970")?;
        self.client_ca()?
            .issue_client_cert(user, groups, not_before, not_after)
    }
}

impl TestCa {
    /// A client certificate for `user` in `groups`, valid from `not_before` to `not_after`.
    pub(crate) fn issue_client_cert(
        &self,
        user: &str,
        groups: &[&str],
        not_before: SystemTime,
        not_after: SystemTime,
    ) -> Result<ClientCert> {
        ensure!(!user.is_empty(), "a client certificate needs a user (CN)");
        ensure!(
            groups.iter().all(|g| !g.is_empty()),
            "empty group in {groups:?}"
        );
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, user);
        params.not_before = date_time_ymd(1970, 1, 1) + since_epoch(not_before)?;
        params.not_after = date_time_ymd(1970, 1, 1) + since_epoch(not_after)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().context("generating a client key")?;
        let cert = params
            .signed_by(&key, self.issuer())
            .context("signing the client certificate")?;
        let der = with_subject(cert.der(), &subject_name(user, groups), self.issuer().key())?;
        Ok(ClientCert {
            cert_pem: pem("CERTIFICATE", &der),
            key_pem: key.serialize_pem(),
        })
    }
}

fn since_epoch(t: SystemTime) -> Result<Duration> {
    t.duration_since(UNIX_EPOCH)
        .context("a validity bound before 1970")
}

// DER, just enough of it: every tag here is one byte, every length fits in 3 bytes.
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0c;
const BIT_STRING: u8 = 0x03;
const VERSION: u8 = 0xa0;
/// 2.5.4.3 (id-at-commonName).
const OID_COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];
/// 2.5.4.10 (id-at-organizationName).
const OID_ORGANIZATION: [u8; 3] = [0x55, 0x04, 0x0a];

/// The subject `O=<group>, …, CN=<user>`: one RDN per attribute, groups in the given order
/// (the order kubeadm's `O = system:masters, CN = kubernetes-admin` uses).
fn subject_name(user: &str, groups: &[&str]) -> Vec<u8> {
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
fn with_subject(cert: &[u8], subject: &[u8], ca_key: &KeyPair) -> Result<Vec<u8>> {
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
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    raw: &'a [u8],
}

/// The first element of `der`, and what follows it.
fn split_tlv(der: &[u8]) -> Result<(Tlv<'_>, &[u8])> {
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
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
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
fn pem(label: &str, der: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;

    /// The DER elements of a SEQUENCE's content.
    fn elements(content: &[u8]) -> Vec<Tlv<'_>> {
        let mut out = Vec::new();
        let mut rest = content;
        while !rest.is_empty() {
            let (e, next) = split_tlv(rest).unwrap();
            out.push(e);
            rest = next;
        }
        out
    }

    /// The subject of a PEM certificate as `(OID bytes, value)` pairs, in order.
    fn subject_of(cert_pem: &str) -> Vec<(Vec<u8>, String)> {
        let b64: String = cert_pem
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let der = STANDARD.decode(b64).unwrap();
        let (cert, _) = split_tlv(&der).unwrap();
        let tbs = &elements(cert.content)[0];
        let subject = &elements(tbs.content)[5];
        elements(subject.content)
            .iter()
            .map(|rdn| {
                let attr = &elements(rdn.content)[0];
                let pair = elements(attr.content);
                (
                    pair[0].content.to_vec(),
                    String::from_utf8(pair[1].content.to_vec()).unwrap(),
                )
            })
            .collect()
    }

    fn issue(user: &str, groups: &[&str]) -> ClientCert {
        let ca = TestCa::generate("unit client CA").unwrap();
        let now = SystemTime::now();
        ca.issue_client_cert(user, groups, now - BACKDATE, now + EXPIRED_FOR)
            .unwrap()
    }

    #[test]
    fn subject_holds_one_organization_per_group_then_the_user() {
        let cert = issue(
            "alice",
            &["tether-test", "tether-ops", "system:authenticated"],
        );
        let o = OID_ORGANIZATION.to_vec();
        assert_eq!(
            subject_of(&cert.cert_pem),
            [
                (o.clone(), "tether-test".to_owned()),
                (o.clone(), "tether-ops".to_owned()),
                (o, "system:authenticated".to_owned()),
                (OID_COMMON_NAME.to_vec(), "alice".to_owned()),
            ]
        );
    }

    #[test]
    fn a_user_without_groups_gets_only_a_common_name() {
        let cert = issue("bob", &[]);
        assert_eq!(
            subject_of(&cert.cert_pem),
            [(OID_COMMON_NAME.to_vec(), "bob".to_owned())]
        );
    }

    #[test]
    fn an_empty_user_or_group_is_refused() {
        let ca = TestCa::generate("unit client CA").unwrap();
        let now = SystemTime::now();
        assert!(ca.issue_client_cert("", &[], now, now + BACKDATE).is_err());
        assert!(
            ca.issue_client_cert("carol", &[""], now, now + BACKDATE)
                .is_err()
        );
    }

    #[test]
    fn debug_shows_neither_certificate_nor_key() {
        let cert = issue("alice", &["tether-test"]);
        let shown = format!("{cert:?}");
        assert_eq!(shown, "ClientCert { .. }");
        assert!(cert.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    }

    #[test]
    fn lengths_use_the_short_form_below_128_and_the_long_form_above() {
        assert_eq!(tlv(SEQUENCE, &[7; 127])[..2], [SEQUENCE, 127]);
        assert_eq!(tlv(SEQUENCE, &[7; 128])[..3], [SEQUENCE, 0x81, 128]);
        assert_eq!(tlv(SEQUENCE, &[7; 300])[..4], [SEQUENCE, 0x82, 0x01, 0x2c]);
        let long = tlv(SET, &[7; 70_000]);
        let (parsed, rest) = split_tlv(&long).unwrap();
        assert_eq!(
            (parsed.tag, parsed.content.len(), rest.len()),
            (SET, 70_000, 0)
        );
    }

    #[test]
    fn truncated_der_is_an_error_not_a_panic() {
        let der = tlv(SEQUENCE, &[1, 2, 3]);
        for cut in 0..der.len() {
            assert!(split_tlv(&der[..cut]).is_err(), "cut at {cut}");
        }
    }
}
