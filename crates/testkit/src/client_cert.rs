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
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, date_time_ymd};

use crate::cluster::Cluster;
use crate::pki::TestCa;

mod der;
use der::{pem, subject_name, with_subject};

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
        self.issue_client_cert_between(
            user,
            groups,
            now.checked_sub(BACKDATE),
            now.checked_add(valid_for),
        )
    }

    /// Like [`issue_client_cert`](Self::issue_client_cert), but expired an hour ago (valid for
    /// the hour before that): signed by the right CA, so the only reason to reject it is its
    /// validity period (Go's `x509: certificate has expired`; rustls' `CertificateExpired`).
    pub fn issue_expired_client_cert(&self, user: &str, groups: &[&str]) -> Result<ClientCert> {
        let now = SystemTime::now();
        self.issue_client_cert_between(
            user,
            groups,
            now.checked_sub(EXPIRED_FOR * 2),
            now.checked_sub(EXPIRED_FOR),
        )
    }

    fn issue_client_cert_between(
        &self,
        user: &str,
        groups: &[&str],
        not_before: Option<SystemTime>,
        not_after: Option<SystemTime>,
    ) -> Result<ClientCert> {
        let (Some(not_before), Some(not_after)) = (not_before, not_after) else {
            bail!("the validity period is outside the clock's range");
        };
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
        let (cert, key) = self.sign_leaf(params, ExtendedKeyUsagePurpose::ClientAuth)?;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::der::*;
    use super::*;
    use base64::{Engine as _, engine::general_purpose::STANDARD};

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
