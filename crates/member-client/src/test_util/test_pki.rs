//! [`TestPki`]: a throwaway CA for loopback TLS servers and the client identities they see.

#![allow(
    clippy::expect_used,
    reason = "a test double: generating certificates does not fail, and a panic is the report"
)]

use std::{net::Ipv4Addr, sync::Arc};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};

use crate::ClientIdentity;

/// Whether a server refuses connections that present no client certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// One is asked for; a connection without one is served as anonymous.
    Optional,
    /// A connection without one fails its handshake.
    Required,
}

/// A test CA that issues loopback servers' certificates and client identities.
pub struct TestPki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

impl TestPki {
    /// A fresh CA.
    pub fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, "test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("CA key");
        Self {
            ca: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The CA certificate, DER (what `kube::Config::root_cert` holds).
    pub fn ca_der(&self) -> Vec<u8> {
        self.ca.der().to_vec()
    }

    /// A client certificate for `cn`, signed by the CA, and its key: PEM.
    pub fn identity_pem(&self, cn: &str) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client parameters");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().expect("client key");
        let cert = params
            .signed_by(&key, &self.ca)
            .expect("client certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// A client identity for `cn`, signed by the CA.
    pub fn identity(&self, cn: &str) -> ClientIdentity {
        let (chain, key) = self.identity_pem(cn);
        ClientIdentity::from_pem(chain.as_bytes(), key.as_bytes()).expect("client identity")
    }

    /// The TLS configuration of a server on `ip` with a certificate from this CA, checking
    /// client certificates against it as `auth` says.
    pub fn server_config(&self, ip: Ipv4Addr, auth: ClientAuth) -> Arc<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .expect("TLS versions");
        let builder = if auth == ClientAuth::None {
            builder.with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            roots
                .add(CertificateDer::from(self.ca_der()))
                .expect("CA root");
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().expect("client verifier"))
        };
        let (chain, key) = self.serving(ip);
        Arc::new(
            builder
                .with_single_cert(chain, key)
                .expect("server certificate"),
        )
    }

    fn serving(&self, ip: Ipv4Addr) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let mut params = CertificateParams::new(vec![ip.to_string()]).expect("server parameters");
        params.distinguished_name.push(DnType::CommonName, "server");
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &self.ca)
            .expect("server certificate");
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("key PEM");
        (vec![cert.der().clone()], key)
    }
}
