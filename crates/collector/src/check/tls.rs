//! One TLS handshake with a member, as its client would make it: the CA it trusts, the
//! serving certificate it is shown, and whether that certificate names the host.
//!
//! The handshake sends no credential: it stops after the server's certificate is verified.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use bytes::Bytes;
use member_client::{MemberClientConfig, validation::EndpointPolicy};
use rustls::{
    DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::CryptoProvider,
};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use serde::Serialize;

use super::credential::rfc3339;

/// What the handshake showed.
#[serde_with::skip_serializing_none]
#[derive(Debug, Default, Serialize)]
pub(crate) struct TlsReport {
    /// The subjects of the CA bundle's certificates, or `system roots`.
    pub(crate) trusted_ca: Vec<String>,
    /// The name the certificate is verified against (`tls-server-name`, else the host).
    pub(crate) server_name: String,
    /// The serving certificate's subject.
    pub(crate) serving_subject: Option<String>,
    /// The serving certificate's `notAfter`, RFC 3339.
    pub(crate) serving_not_after: Option<String>,
    /// Whether the serving certificate is valid for `server_name`.
    pub(crate) hostname_matches: Option<bool>,
    /// Whether the certificate verified against `trusted_ca`.
    pub(crate) verified: bool,
    /// Why the handshake failed, or was not tried.
    pub(crate) error: Option<String>,
}

/// Shakes hands with the member `config` reaches, as its client would, dialling only addresses
/// `policy` allows, within the config's request timeout. A member reached through a proxy is
/// not shaken hands with directly.
pub(crate) async fn probe(config: &MemberClientConfig, policy: &EndpointPolicy) -> TlsReport {
    let mut report = TlsReport {
        trusted_ca: trusted_ca(config.ca_bundle.as_ref()),
        ..TlsReport::default()
    };
    if let Err(why) = handshake(config, policy, &mut report).await {
        report.error = Some(why);
    }
    report
}

async fn handshake(
    config: &MemberClientConfig,
    policy: &EndpointPolicy,
    report: &mut TlsReport,
) -> Result<(), String> {
    let (endpoint, timeout) = (&config.endpoint, config.limits.request_timeout);
    let uri: http::Uri = (endpoint.url.parse()).map_err(|_| "the endpoint is not a URL")?;
    let host = uri.host().ok_or("the endpoint names no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    report.server_name = endpoint
        .tls_server_name
        .as_deref()
        .unwrap_or(host)
        .to_owned();
    if uri.scheme_str() != Some("https") {
        return Err("not https: no TLS to check".to_owned());
    }
    if endpoint.proxy_url.is_some() {
        return Err("not checked: the member is reached through a proxy".to_owned());
    }
    let server_name = ServerName::try_from(report.server_name.clone())
        .map_err(|_| format!("{:?} is not a server name", report.server_name))?;
    let address = allowed_address(host, uri.port_u16().unwrap_or(443), policy).await?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let seen = Arc::new(Mutex::new(None));
    let verifier = Recording {
        inner: verifier(config.ca_bundle.as_ref(), &provider)?,
        seen: Arc::clone(&seen),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| err.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let shake = async {
        let tcp = tokio::net::TcpStream::connect(address).await?;
        connector.connect(server_name.clone(), tcp).await
    };
    let outcome = tokio::time::timeout(timeout, shake).await;
    let certificate = seen.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(der) = certificate {
        describe_certificate(&der, &server_name, report);
    }
    match outcome {
        Ok(Ok(_)) => {
            report.verified = true;
            Ok(())
        }
        Ok(Err(err)) => Err(format!("TLS handshake with {address} failed: {err}")),
        Err(_) => Err(format!(
            "no TLS handshake with {address} within {timeout:?}"
        )),
    }
}

/// The first address `host` resolves to that `policy` lets a member client dial: the check
/// dials nothing the collector would not.
async fn allowed_address(
    host: &str,
    port: u16,
    policy: &EndpointPolicy,
) -> Result<SocketAddr, String> {
    let addresses = tokio::net::lookup_host((host, port))
        .await
        .map_err(|err| format!("resolving {host}: {err}"))?;
    let mut refusals = Vec::new();
    for address in addresses {
        match policy.check_ip(address.ip()) {
            Ok(()) => return Ok(address),
            Err(refusal) => refusals.push(refusal.to_string()),
        }
    }
    Err(format!(
        "{host} resolves to no address a member may be reached at: {}",
        refusals.join("; ")
    ))
}

/// The real verifier the member's client uses: WebPKI over the CA bundle, or the platform's
/// roots as kube does without one.
fn verifier(
    ca_bundle: Option<&Bytes>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, String> {
    let Some(pem) = ca_bundle else {
        let platform = rustls_platform_verifier::Verifier::new(Arc::clone(provider))
            .map_err(|err| format!("loading the system roots: {err}"))?;
        return Ok(Arc::new(platform));
    };
    let mut roots = RootCertStore::empty();
    for der in member_client::validation::ca_bundle(pem).map_err(|err| err.to_string())? {
        roots
            .add(CertificateDer::from(der))
            .map_err(|err| format!("the CA bundle: {err}"))?;
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
        .build()
        .map(|v| v as Arc<dyn ServerCertVerifier>)
        .map_err(|err| format!("the CA bundle: {err}"))
}

fn trusted_ca(ca_bundle: Option<&Bytes>) -> Vec<String> {
    let Some(pem) = ca_bundle else {
        return vec!["system roots".to_owned()];
    };
    match member_client::validation::ca_bundle(pem) {
        Ok(certificates) => certificates
            .iter()
            .map(|der| match x509_parser::parse_x509_certificate(der) {
                Ok((_, cert)) => subject(&cert),
                Err(_) => "(a certificate that does not parse)".to_owned(),
            })
            .collect(),
        Err(err) => vec![format!("(unusable CA bundle: {err})")],
    }
}

/// A certificate's subject as RFC 4514 text, sanitized: whoever issued it chose every byte.
pub(crate) fn subject(cert: &x509_parser::certificate::X509Certificate<'_>) -> String {
    member_client::text::Text::new(&cert.subject().to_string()).into()
}

/// The serving certificate's subject, `notAfter`, and whether it names `server_name`.
fn describe_certificate(
    der: &CertificateDer<'_>,
    server_name: &ServerName<'_>,
    report: &mut TlsReport,
) {
    if let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) {
        report.serving_subject = Some(subject(&cert));
        let not_after = cert.validity().not_after.timestamp();
        report.serving_not_after = u64::try_from(not_after)
            .ok()
            .map(|secs| rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(secs)));
    }
    report.hostname_matches = Some(
        rustls::server::ParsedCertificate::try_from(der)
            .and_then(|parsed| rustls::client::verify_server_name(&parsed, server_name))
            .is_ok(),
    );
}

/// The real verifier, and a note of the end-entity certificate it was shown, kept even when
/// verification fails: that is when it is most worth seeing.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ServerCertVerifier>,
    seen: Arc<Mutex<Option<CertificateDer<'static>>>>,
}

/// The handshake signature checks, left to the real verifier as they are.
macro_rules! signatures_verified_by_inner {
    ($($method:ident),+) => {$(
        fn $method(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.inner.$method(message, cert, dss)
        }
    )+};
}

impl ServerCertVerifier for Recording {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(end_entity.clone().into_owned());
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    signatures_verified_by_inner!(verify_tls12_signature, verify_tls13_signature);

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
