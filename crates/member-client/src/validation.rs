//! The one set of rules a member's API endpoint, proxy URL and CA bundle must pass.
//!
//! cluster-registry runs them when it reads a definition, so a bad one becomes that member's
//! invalid state; [`ClientFactory`](crate::ClientFactory) runs them again when it builds, so a
//! config made by hand gets the same answer. One function per rule, one error type.
//!
//! ```
//! use member_client::validation::{self, EndpointSchemes, ValidationError};
//!
//! assert!(validation::endpoint("https://10.0.0.1:6443", EndpointSchemes::HttpsOnly).is_ok());
//! assert!(matches!(
//!     validation::endpoint("http://10.0.0.1", EndpointSchemes::HttpsOnly),
//!     Err(ValidationError::Endpoint(_))
//! ));
//! assert!(validation::proxy_url("socks5://proxy:1080").is_err());
//! ```

use rustls_pki_types::{CertificateDer, pem::PemObject as _};

/// Which schemes an API endpoint may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointSchemes {
    /// `https://` only: what a member definition may name, since its token travels with every
    /// request.
    HttpsOnly,
    /// `https://` or `http://`: what [`ClientFactory`](crate::ClientFactory) accepts, so that
    /// tests can talk to a plain loopback server.
    HttpOrHttps,
}

/// A member's endpoint, proxy URL or CA bundle broke its rule. The `String` says what is wrong
/// for a human; it quotes a URL but never a certificate or a token.
///
/// Deliberately exhaustive: a new rule must make every mapping of these (cluster-registry's
/// `InvalidReason`) decide what it means.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ValidationError {
    /// The API endpoint is missing, not a URL, has the wrong scheme or no host.
    #[error("invalid API endpoint: {0}")]
    Endpoint(String),
    /// The proxy URL is not an `http://` or `https://` URL with a host.
    #[error("invalid proxy URL: {0}")]
    Proxy(String),
    /// The CA bundle is not PEM holding at least one certificate.
    #[error("invalid CA bundle: {0}")]
    CaBundle(String),
}

impl ValidationError {
    /// What is wrong, without saying which rule (the variant says that).
    pub fn detail(&self) -> &str {
        match self {
            Self::Endpoint(detail) | Self::Proxy(detail) | Self::CaBundle(detail) => detail,
        }
    }
}

/// Checks that `endpoint` is a URL with one of `schemes` and a host, and parses it.
///
/// # Errors
/// [`ValidationError::Endpoint`].
pub fn endpoint(endpoint: &str, schemes: EndpointSchemes) -> Result<http::Uri, ValidationError> {
    let invalid = |why: &str| ValidationError::Endpoint(format!("{endpoint:?} {why}"));
    if endpoint.trim().is_empty() {
        return Err(ValidationError::Endpoint("no API endpoint".to_owned()));
    }
    let uri: http::Uri = endpoint.parse().map_err(|_| invalid("is not a URL"))?;
    match (uri.scheme_str(), schemes) {
        (Some("https"), _) | (Some("http"), EndpointSchemes::HttpOrHttps) => {}
        (Some(_), EndpointSchemes::HttpsOnly) => return Err(invalid("is not an https URL")),
        (Some(_), EndpointSchemes::HttpOrHttps) => {
            return Err(invalid("is not an https (or http) URL"));
        }
        (None, _) => return Err(invalid("has no scheme; expected https://host[:port]")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("has no host"));
    }
    Ok(uri)
}

/// Checks that `proxy` is an `http://` or `https://` URL with a host, and parses it.
///
/// NB: Karmada also allows `socks5://`; kube 5 would need its `socks5` feature for that, which
/// Tether does not enable, so such a proxy is refused here rather than failing every request.
///
/// # Errors
/// [`ValidationError::Proxy`].
pub fn proxy_url(proxy: &str) -> Result<http::Uri, ValidationError> {
    let invalid = |why: &str| ValidationError::Proxy(format!("{proxy:?} {why}"));
    let uri: http::Uri = proxy.parse().map_err(|_| invalid("is not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some_and(|h| !h.is_empty()) => Ok(uri),
        Some("http" | "https") => Err(invalid("has no host")),
        _ => Err(invalid("is not an http:// or https:// URL")),
    }
}

/// Checks that `pem` holds at least one `CERTIFICATE` block and nothing that is not PEM, and
/// returns the certificates as DER (what kube wants). Without this, kube would fail only at the
/// first handshake.
///
/// # Errors
/// [`ValidationError::CaBundle`], in words that never quote the input.
pub fn ca_bundle(pem: &[u8]) -> Result<Vec<Vec<u8>>, ValidationError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|cert| cert.map(|der| der.as_ref().to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| ValidationError::CaBundle(format!("not PEM ({err})")))?;
    if certs.is_empty() {
        return Err(ValidationError::CaBundle("no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::https("https://10.0.0.1:6443", EndpointSchemes::HttpsOnly)]
    #[case::https_with_path("https://lb.example.com/k8s/clusters/c-1", EndpointSchemes::HttpsOnly)]
    #[case::ipv6("https://[::1]:6443", EndpointSchemes::HttpsOnly)]
    #[case::http_where_allowed("http://127.0.0.1:8080", EndpointSchemes::HttpOrHttps)]
    fn good_endpoints_pass(#[case] url: &str, #[case] schemes: EndpointSchemes) {
        assert!(endpoint(url, schemes).is_ok(), "{url}");
    }

    #[rstest]
    #[case::empty("", EndpointSchemes::HttpsOnly, "no API endpoint")]
    #[case::http("http://10.0.0.1:6443", EndpointSchemes::HttpsOnly, "not an https URL")]
    #[case::no_scheme("10.0.0.1:6443", EndpointSchemes::HttpsOnly, "no scheme")]
    #[case::space("https://exa mple", EndpointSchemes::HttpsOnly, "not a URL")]
    #[case::colons("::::", EndpointSchemes::HttpOrHttps, "not a URL")]
    #[case::ftp("ftp://example.com", EndpointSchemes::HttpsOnly, "not an https URL")]
    #[case::ftp_where_http_is_allowed(
        "ftp://10.0.0.1",
        EndpointSchemes::HttpOrHttps,
        "not an https (or http) URL"
    )]
    fn other_endpoints_are_refused(
        #[case] url: &str,
        #[case] schemes: EndpointSchemes,
        #[case] want: &str,
    ) {
        let Err(ValidationError::Endpoint(detail)) = endpoint(url, schemes) else {
            panic!("{url:?} must be refused");
        };
        assert!(detail.contains(want), "{detail}");
    }

    #[rstest]
    #[case::http("http://proxy:3128", true)]
    #[case::https("https://proxy:3128", true)]
    #[case::socks("socks5://proxy:1080", false)]
    #[case::no_scheme("proxy:3128", false)]
    #[case::garbage("http://[::1", false)]
    fn proxies_must_be_http(#[case] proxy: &str, #[case] ok: bool) {
        let result = proxy_url(proxy);
        assert_eq!(result.is_ok(), ok, "{proxy}");
        assert!(result.is_ok() || matches!(result, Err(ValidationError::Proxy(_))));
    }

    #[test]
    fn a_certificate_passes() {
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = rcgen::CertificateParams::new(vec!["test-ca".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem();
        assert_eq!(ca_bundle(pem.as_bytes()).map(|certs| certs.len()), Ok(1));
    }

    #[rstest]
    #[case::garbage(&b"not a certificate"[..], "no CERTIFICATE block")]
    #[case::empty(&b""[..], "no CERTIFICATE block")]
    #[case::bad_base64(&b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"[..], "not PEM")]
    #[case::unterminated(&b"-----BEGIN CERTIFICATE-----\nMIIB\n"[..], "not PEM")]
    #[case::only_a_key(&b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"[..], "no CERTIFICATE block")]
    fn anything_else_is_not_a_ca_bundle(#[case] pem: &[u8], #[case] want: &str) {
        let err = ca_bundle(pem).unwrap_err();
        assert!(matches!(err, ValidationError::CaBundle(_)), "{err:?}");
        assert!(err.detail().contains(want), "{err}");
    }
}
