//! The one set of rules a member's API endpoint, proxy URL and CA bundle must pass, and the
//! [`EndpointPolicy`] that says where its token may go.
//!
//! cluster-registry runs them when it reads a definition, so a bad one becomes that member's
//! invalid state; [`ClientFactory`](crate::ClientFactory) runs them again when it builds (and
//! the policy once more on every address a host name resolves to), so a config made by hand
//! gets the same answer. One function per rule, one error type.
//!
//! ```
//! use member_client::{validation::MemberEndpoint, validation::{self, EndpointPolicy, ValidationError}};
//!
//! let policy = EndpointPolicy::default();
//! let route = |url| validation::route(&policy, &MemberEndpoint::new(url));
//! assert!(route("https://10.0.0.1:6443").is_ok());
//! assert!(matches!(
//!     route("http://10.0.0.1"),
//!     Err(ValidationError::Forbidden(_))
//! ));
//! assert!(matches!(
//!     route("https://169.254.169.254"),
//!     Err(ValidationError::Forbidden(_))
//! ));
//! assert!(validation::proxy_url("socks5://proxy:1080").is_err());
//! ```

mod cidr;
mod endpoint_policy;

pub use cidr::{Cidr, CidrError};
pub use endpoint_policy::EndpointPolicy;

use rustls_pki_types::{CertificateDer, pem::PemObject as _};

use crate::Text;

/// A member's endpoint, proxy URL or CA bundle broke its rule. The `String` says what is wrong
/// for a human; it quotes a URL (sanitized, and never one holding user info) but never a
/// certificate or a token.
///
/// Deliberately exhaustive: a new rule must make every mapping of these (cluster-registry's
/// `InvalidReason`) decide what it means.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ValidationError {
    /// The API endpoint is missing, not a URL, has the wrong scheme or no host.
    #[error("invalid API endpoint: {0}")]
    Endpoint(String),
    /// The endpoint or proxy is well formed, but the [`EndpointPolicy`] does not let a token
    /// go there (a loopback, link-local or metadata address, `http://`, user info, skipping
    /// TLS verification).
    #[error("forbidden endpoint: {0}")]
    Forbidden(String),
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
            Self::Endpoint(detail)
            | Self::Forbidden(detail)
            | Self::Proxy(detail)
            | Self::CaBundle(detail) => detail,
        }
    }
}

/// Where a member's requests go, every rule checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The API endpoint.
    pub endpoint: http::Uri,
    /// The proxy, if any.
    pub proxy: Option<http::Uri>,
}

/// Checks a member's endpoint and proxy against their shape rules and `policy`, and whether
/// `policy` lets it skip TLS verification. The one entry point for both, so that a definition
/// and a hand-made client config get the same answer.
///
/// # Errors
/// [`ValidationError::Endpoint`], [`ValidationError::Proxy`] or
/// [`ValidationError::Forbidden`].
pub fn route(policy: &EndpointPolicy, member: &MemberEndpoint) -> Result<Route, ValidationError> {
    let endpoint = self::endpoint(&member.url)?;
    policy.check_uri(&endpoint)?;
    policy.check_insecure(member.insecure_skip_tls_verify)?;
    let proxy = member.proxy_url.as_deref().map(proxy_url).transpose()?;
    if let Some(proxy) = &proxy {
        policy.check_proxy(proxy)?;
    }
    Ok(Route { endpoint, proxy })
}

/// The [`EndpointPolicy`]'s refusal somewhere in `err`'s chain of causes: how a request that
/// failed because its host name resolved to a forbidden address is told from an unreachable
/// member.
pub fn refusal_in<'e>(err: &'e (dyn std::error::Error + 'static)) -> Option<&'e ValidationError> {
    crate::error::causes(err).find_map(|cause| match cause.downcast_ref() {
        Some(refusal @ ValidationError::Forbidden(_)) => Some(refusal),
        _ => None,
    })
}

/// `url` as an error message may quote it: sanitized, or not at all if it holds user info.
fn quoted(url: &str) -> String {
    if url.contains('@') {
        "the URL (not shown: it may hold user info)".to_owned()
    } else {
        format!("{:?}", Text::new(url).as_str())
    }
}

/// Checks that `endpoint` is an `https://` or `http://` URL with a host, and parses it.
/// Whether `http://` (or that host) is acceptable is the [`EndpointPolicy`]'s call.
///
/// # Errors
/// [`ValidationError::Endpoint`].
pub fn endpoint(endpoint: &str) -> Result<http::Uri, ValidationError> {
    let invalid = |why: &str| ValidationError::Endpoint(format!("{} {why}", quoted(endpoint)));
    if endpoint.trim().is_empty() {
        return Err(ValidationError::Endpoint("no API endpoint".to_owned()));
    }
    let uri: http::Uri = endpoint.parse().map_err(|_| invalid("is not a URL"))?;
    match uri.scheme_str() {
        Some("https" | "http") => {}
        Some(_) => return Err(invalid("is not an https URL")),
        None => return Err(invalid("has no scheme; expected https://host[:port]")),
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
    let invalid = |why: &str| ValidationError::Proxy(format!("{} {why}", quoted(proxy)));
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
        .map_err(|err| {
            ValidationError::CaBundle(format!("not PEM ({})", Text::new(&err.to_string())))
        })?;
    if certs.is_empty() {
        return Err(ValidationError::CaBundle("no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

/// Where a member's apiserver is, the route to it, and the name its serving certificate is
/// verified against. The CA bundle is not part of it: it travels with the credential.
///
/// ```
/// use member_client::validation::MemberEndpoint;
/// let endpoint = MemberEndpoint::new("https://10.0.0.1:6443");
/// assert!(endpoint.proxy_url.is_none() && !endpoint.insecure_skip_tls_verify);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberEndpoint {
    /// The apiserver's URL, `https://host[:port][/path]` (`http` for local tests).
    pub url: String,
    /// Skip verifying the serving certificate (Karmada's `insecureSkipTLSVerification`).
    pub insecure_skip_tls_verify: bool,
    /// An `http://` or `https://` proxy to tunnel through.
    pub proxy_url: Option<String>,
    /// The name to verify the serving certificate against (and send as SNI), when it is not
    /// the URL's host (a kubeconfig's `tls-server-name`, Argo CD's
    /// `tlsClientConfig.serverName`).
    pub tls_server_name: Option<String>,
}

impl MemberEndpoint {
    /// `url`, reached directly, its certificate verified against its host.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }
}

impl<T: AsRef<str>> From<T> for MemberEndpoint {
    fn from(url: T) -> Self {
        Self::new(url.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::https("https://10.0.0.1:6443")]
    #[case::https_with_path("https://lb.example.com/k8s/clusters/c-1")]
    #[case::ipv6("https://[fd00::1]:6443")]
    #[case::http_is_the_policys_call("http://10.0.0.1:8080")]
    fn well_formed_endpoints_parse(#[case] url: &str) {
        assert!(endpoint(url).is_ok(), "{url}");
    }

    #[rstest]
    #[case::empty("", "no API endpoint")]
    #[case::no_scheme("10.0.0.1:6443", "no scheme")]
    #[case::space("https://exa mple", "not a URL")]
    #[case::colons("::::", "not a URL")]
    #[case::ftp("ftp://example.com", "not an https URL")]
    fn malformed_endpoints_are_refused(#[case] url: &str, #[case] want: &str) {
        let Err(ValidationError::Endpoint(detail)) = endpoint(url) else {
            panic!("{url:?} must be refused");
        };
        assert!(detail.contains(want), "{detail}");
    }

    /// `url` reached through `proxy`, skipping TLS verification when `insecure`.
    fn at(url: &str, proxy: Option<&str>, insecure: bool) -> MemberEndpoint {
        MemberEndpoint {
            insecure_skip_tls_verify: insecure,
            proxy_url: proxy.map(str::to_owned),
            ..MemberEndpoint::new(url)
        }
    }

    #[rstest]
    #[case::endpoint_userinfo("https://admin:hunter2@10.0.0.1", None)]
    #[case::unparsable_userinfo("https://admin:hunter2@exa mple", None)]
    #[case::proxy_userinfo("https://10.0.0.1", Some("http://u:hunter2@proxy:3128"))]
    #[case::unparsable_proxy_userinfo("https://10.0.0.1", Some("socks5://u:hunter2@p"))]
    fn user_info_is_refused_and_never_echoed(#[case] url: &str, #[case] proxy: Option<&str>) {
        let err = route(&EndpointPolicy::default(), &at(url, proxy, false)).unwrap_err();
        assert!(!format!("{err} {err:?}").contains("hunter2"), "{err:?}");
    }

    #[test]
    fn a_refusal_is_found_inside_the_io_error_a_connector_wraps_it_in() {
        let io = std::io::Error::other(ValidationError::Forbidden("loopback".into()));
        assert!(matches!(
            refusal_in(&io),
            Some(ValidationError::Forbidden(_))
        ));
    }

    #[test]
    fn route_applies_the_policy_to_endpoint_proxy_and_tls() {
        let strict = EndpointPolicy::default();
        let refused = |url, proxy, insecure| {
            matches!(
                route(&strict, &at(url, proxy, insecure)),
                Err(ValidationError::Forbidden(_))
            )
        };
        assert!(refused("https://127.0.0.1", None, false));
        let metadata_proxy = Some("http://169.254.169.254:80");
        assert!(refused("https://10.0.0.1", metadata_proxy, false));
        assert!(refused("https://10.0.0.1", None, true));
        let proxied = at("https://10.0.0.1", Some("http://proxy:3128"), false);
        let route = route(&strict, &proxied).unwrap();
        assert_eq!(route.proxy.unwrap().host(), Some("proxy"));
    }

    #[test]
    fn quoted_urls_are_sanitized() {
        let err = endpoint("https://exa mple\n\x1b[31m").unwrap_err();
        assert!(!err.detail().contains('\n'), "{err:?}");
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
        let pem = crate::test_util::TestPki::new().ca_pem();
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
