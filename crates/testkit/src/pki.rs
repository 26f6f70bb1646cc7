//! Test certificates and keys: per cluster a serving CA and its serving certificate, a client
//! CA (its certificates are issued in [`client_cert`](crate::client_cert)), an SA signing key.

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// A throwaway certificate authority.
pub(crate) struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// A serving certificate and its private key, both PEM.
pub(crate) struct ServingCert {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

impl TestCa {
    /// A new self-signed CA named `common_name` (ECDSA P-256).
    pub(crate) fn generate(common_name: &str) -> Result<Self> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().context("generating a CA key")?;
        let issuer = CertifiedIssuer::self_signed(params, key).context("self-signing a CA")?;
        Ok(Self { issuer })
    }

    /// The CA certificate (PEM): what a client trusts.
    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// The issuer (certificate parameters and key) that signs this CA's certificates.
    pub(crate) fn issuer(&self) -> &CertifiedIssuer<'static, KeyPair> {
        &self.issuer
    }

    /// A leaf certificate of `params` for `purpose` (client or server authentication), with a
    /// fresh key, signed by this CA.
    pub(crate) fn sign_leaf(
        &self,
        mut params: CertificateParams,
        purpose: ExtendedKeyUsagePurpose,
    ) -> Result<(Certificate, KeyPair)> {
        params.extended_key_usages = vec![purpose.clone()];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().with_context(|| format!("generating a {purpose:?} key"))?;
        let cert = (params.signed_by(&key, &self.issuer))
            .with_context(|| format!("signing a {purpose:?} certificate"))?;
        Ok((cert, key))
    }

    /// A serving certificate for `127.0.0.1` and `localhost`, signed by this CA.
    pub(crate) fn issue_serving_cert(&self, common_name: &str) -> Result<ServingCert> {
        let sans = ["127.0.0.1", "localhost"];
        let mut params =
            CertificateParams::new(sans.iter().map(|san| (*san).to_owned()).collect::<Vec<_>>())
                .context("serving certificate SANs")?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let (cert, key) = self.sign_leaf(params, ExtendedKeyUsagePurpose::ServerAuth)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A ServiceAccount token signing key (ECDSA P-256; the apiserver signs ES256).
pub(crate) struct SigningKey {
    /// PKCS#8 PEM, for `--service-account-signing-key-file`.
    pub(crate) private_pem: String,
    /// SPKI PEM, for `--service-account-key-file` (which does not read PKCS#8 EC keys).
    pub(crate) public_pem: String,
}

impl SigningKey {
    pub(crate) fn generate() -> Result<Self> {
        let key = KeyPair::generate().context("generating a ServiceAccount signing key")?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}
