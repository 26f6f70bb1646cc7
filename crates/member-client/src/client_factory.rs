//! Builds a member's `kube::Client` on kube's own stack, with the token coming from the cache.

use bytes::Bytes;
use kube::{Client, client::ClientBuilder};
use rustls_pki_types::{CertificateDer, pem::PemObject as _};
use tower::{layer::layer_fn, limit::ConcurrencyLimitLayer};

use crate::{
    BearerLayer, CredentialHealth, Error, Result, SecretRef, TokenCache,
    shared_service::SharedService,
};

/// Everything needed to reach one member cluster.
///
/// ```
/// use member_client::{MemberClientConfig, SecretRef};
/// let config = MemberClientConfig::new(
///     "member1",
///     "https://10.0.0.1:6443",
///     SecretRef::new("karmada-cluster", "member1"),
/// )
/// .with_ca_bundle(&b"-----BEGIN CERTIFICATE-----\n..."[..]);
/// ```
#[derive(Clone, Debug)]
pub struct MemberClientConfig {
    /// The member cluster's name; used in errors and logs.
    pub member: String,
    /// The member apiserver's URL, `https://host[:port][/path]` (`http` for local tests).
    pub api_endpoint: String,
    /// PEM CA bundle that verifies the apiserver's serving certificate; the system roots are
    /// used when `None`.
    pub ca_bundle: Option<Bytes>,
    /// Skip verifying the serving certificate (Karmada's `insecureSkipTLSVerification`).
    pub insecure_skip_tls_verify: bool,
    /// An `http://` or `https://` proxy to tunnel through.
    pub proxy_url: Option<String>,
    /// Where the bearer token comes from; the [`TokenCache`] key.
    pub secret_ref: SecretRef,
    /// Requests in flight to this member at once; more wait. Watches hold a slot only until
    /// their response headers arrive. Default: 64.
    pub max_concurrent_requests: usize,
}

impl MemberClientConfig {
    /// A config with no CA bundle (system roots), TLS verified, no proxy.
    pub fn new(
        member: impl Into<String>,
        api_endpoint: impl Into<String>,
        secret_ref: SecretRef,
    ) -> Self {
        Self {
            member: member.into(),
            api_endpoint: api_endpoint.into(),
            ca_bundle: None,
            insecure_skip_tls_verify: false,
            proxy_url: None,
            secret_ref,
            max_concurrent_requests: 64,
        }
    }

    /// Verify the member with this PEM CA bundle.
    #[must_use]
    pub fn with_ca_bundle(mut self, pem: impl Into<Bytes>) -> Self {
        self.ca_bundle = Some(pem.into());
        self
    }
}

/// Builds member clients that share one [`TokenCache`].
///
/// The client's own auth is cleared: the only `Authorization` header is the one
/// [`BearerLayer`] sets from the cache, so a rotated token is used by the next request without
/// rebuilding anything. A changed CA bundle or endpoint, on the other hand, needs a new client.
#[derive(Clone, Debug)]
pub struct ClientFactory {
    tokens: TokenCache,
}

impl ClientFactory {
    /// A factory whose clients read tokens from `tokens`.
    pub fn new(tokens: TokenCache) -> Self {
        Self { tokens }
    }

    /// The cache its clients read from.
    pub fn tokens(&self) -> &TokenCache {
        &self.tokens
    }

    /// Builds the client for one member; `health` receives what the member says of its
    /// credential.
    ///
    /// The stack, outermost first: kube's buffer (from `Client::new`) → [`BearerLayer`] → a
    /// concurrency limit → a shared handle that makes the inner stack cloneable for the one
    /// retry → kube's default stack (base URI, retries of 429/503/504, tracing, TLS, timeouts).
    ///
    /// # Errors
    /// [`Error::InvalidEndpoint`], [`Error::InvalidProxyUrl`], [`Error::InvalidCaBundle`] or
    /// [`Error::BuildClient`].
    ///
    /// # Panics
    /// Outside a Tokio runtime, like `kube::Client::try_from`.
    pub fn build(&self, config: &MemberClientConfig, health: &CredentialHealth) -> Result<Client> {
        let mut kube_config = kube::Config::new(parse_endpoint(config)?);
        kube_config.proxy_url = config
            .proxy_url
            .as_deref()
            .map(|url| parse_proxy(config, url))
            .transpose()?;
        if config.insecure_skip_tls_verify {
            kube_config.accept_invalid_certs = true;
        } else if let Some(pem) = &config.ca_bundle {
            kube_config.root_cert = Some(parse_ca_bundle(&config.member, pem)?);
        }
        // Config::new leaves auth_info empty; nothing below BearerLayer may set the header.
        debug_assert!(kube_config.auth_info.token.is_none());

        let bearer = BearerLayer::new(
            config.member.clone(),
            config.secret_ref.clone(),
            self.tokens.clone(),
            health.clone(),
        );
        let client = ClientBuilder::try_from(kube_config)
            .map_err(|source| Error::BuildClient {
                member: config.member.clone(),
                source,
            })?
            .with_layer(&layer_fn(SharedService::new))
            .with_layer(&ConcurrencyLimitLayer::new(
                config.max_concurrent_requests.max(1),
            ))
            .with_layer(&bearer)
            .build();
        Ok(client)
    }
}

fn parse_endpoint(config: &MemberClientConfig) -> Result<http::Uri> {
    let invalid = |reason: &str| Error::InvalidEndpoint {
        member: config.member.clone(),
        endpoint: config.api_endpoint.clone(),
        reason: reason.to_owned(),
    };
    let uri: http::Uri = config
        .api_endpoint
        .parse()
        .map_err(|_| invalid("not a URL"))?;
    match uri.scheme_str() {
        Some("https" | "http") => {}
        Some(_) => return Err(invalid("the scheme must be https")),
        None => return Err(invalid("no scheme; expected https://host[:port]")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    Ok(uri)
}

fn parse_proxy(config: &MemberClientConfig, proxy_url: &str) -> Result<http::Uri> {
    let invalid = |source: Box<dyn std::error::Error + Send + Sync>| Error::InvalidProxyUrl {
        member: config.member.clone(),
        proxy_url: proxy_url.to_owned(),
        source,
    };
    let uri: http::Uri = proxy_url.parse().map_err(|err| invalid(Box::new(err)))?;
    match uri.scheme_str() {
        Some("http" | "https") => Ok(uri),
        _ => Err(invalid(
            "only http:// and https:// proxies are supported".into(),
        )),
    }
}

/// Parses a PEM bundle into the DER certificates kube wants, refusing anything that is not PEM
/// with at least one certificate (kube would otherwise fail only at the first handshake).
fn parse_ca_bundle(member: &str, pem: &[u8]) -> Result<Vec<Vec<u8>>> {
    let invalid = |reason: String| Error::InvalidCaBundle {
        member: member.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|cert| cert.map(|der| der.as_ref().to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| invalid(format!("not PEM: {err}")))?;
    if certs.is_empty() {
        return Err(invalid("no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CredentialSource, SourceError, TokenCacheConfig};
    use rstest::rstest;

    struct NoSource;

    #[async_trait::async_trait]
    impl CredentialSource for NoSource {
        async fn fetch(&self, key: &SecretRef) -> Result<crate::Credential, SourceError> {
            Err(SourceError::NotFound { key: key.clone() })
        }
    }

    fn factory() -> ClientFactory {
        ClientFactory::new(TokenCache::new(NoSource, TokenCacheConfig::default()))
    }

    fn build_err(config: &MemberClientConfig) -> Error {
        match factory().build(config, &CredentialHealth::new()) {
            Ok(_) => panic!("{config:?} must be refused"),
            Err(err) => err,
        }
    }

    fn config(endpoint: &str) -> MemberClientConfig {
        MemberClientConfig::new("m1", endpoint, SecretRef::new("ns", "m1"))
    }

    #[rstest]
    #[case::not_a_url("::::", "not a URL")]
    #[case::no_scheme("10.0.0.1:6443", "no scheme")]
    #[case::wrong_scheme("ftp://10.0.0.1", "scheme must be https")]
    #[case::space("https://exa mple", "not a URL")]
    #[tokio::test]
    async fn bad_endpoints_are_typed_errors(#[case] endpoint: &str, #[case] want: &str) {
        let err = build_err(&config(endpoint));
        assert!(matches!(err, Error::InvalidEndpoint { .. }), "{err:?}");
        assert!(err.to_string().contains(want), "{err}");
    }

    #[rstest]
    #[case::garbage(&b"not a certificate"[..], "no CERTIFICATE block")]
    #[case::empty(&b""[..], "no CERTIFICATE block")]
    #[case::bad_base64(&b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"[..], "not PEM")]
    #[case::unterminated(&b"-----BEGIN CERTIFICATE-----\nMIIB\n"[..], "not PEM")]
    #[case::only_a_key(&b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"[..], "no CERTIFICATE block")]
    #[tokio::test]
    async fn bad_ca_bundles_are_typed_errors(#[case] pem: &'static [u8], #[case] want: &str) {
        let err = build_err(&config("https://127.0.0.1:6443").with_ca_bundle(pem));
        assert!(matches!(err, Error::InvalidCaBundle { .. }), "{err:?}");
        assert!(err.to_string().contains(want), "{err}");
    }

    #[tokio::test]
    async fn insecure_skip_ignores_the_ca_bundle() {
        let mut config = config("https://127.0.0.1:6443").with_ca_bundle(&b"garbage"[..]);
        config.insecure_skip_tls_verify = true;
        assert!(factory().build(&config, &CredentialHealth::new()).is_ok());
    }

    #[rstest]
    #[case::socks("socks5://127.0.0.1:1080")]
    #[case::no_scheme("127.0.0.1:3128")]
    #[case::garbage("http://[::1")]
    #[tokio::test]
    async fn bad_proxies_are_typed_errors(#[case] proxy: &str) {
        let mut config = config("https://127.0.0.1:6443");
        config.proxy_url = Some(proxy.to_owned());
        let err = build_err(&config);
        assert!(matches!(err, Error::InvalidProxyUrl { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn http_proxy_is_accepted() {
        let mut config = config("https://127.0.0.1:6443");
        config.proxy_url = Some("http://127.0.0.1:3128".to_owned());
        assert!(factory().build(&config, &CredentialHealth::new()).is_ok());
    }
}
