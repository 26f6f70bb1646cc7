//! Builds a member's `kube::Client` on kube's own stack, with the token coming from the cache.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use kube::{Client, client::ClientBuilder};
use tower::limit::ConcurrencyLimitLayer;

use crate::{
    CredentialCache, CredentialHealth, CredentialKey, CredentialLayer, Error, MemberEndpoint,
    RequestDeadlineLayer, ResponseLimits, Result,
    guarded_resolver::{self, GuardedResolver, Lookup},
    transport,
    validation::{self, EndpointPolicy},
};

/// Everything needed to reach one member cluster.
///
/// ```
/// use member_client::{MemberClientConfig, CredentialKey};
/// let config = MemberClientConfig::new(
///     "member1",
///     "https://10.0.0.1:6443",
///     CredentialKey::new("karmada-cluster", "member1"),
/// )
/// .with_ca_bundle(&b"-----BEGIN CERTIFICATE-----\n..."[..]);
/// ```
#[derive(Clone, Debug)]
pub struct MemberClientConfig {
    /// The member cluster's name; used in errors and logs.
    pub member: String,
    /// How to reach it.
    pub endpoint: MemberEndpoint,
    /// PEM CA bundle that verifies the apiserver's serving certificate; the system roots are
    /// used when `None`.
    pub ca_bundle: Option<Bytes>,
    /// Where the credential comes from; the [`CredentialCache`] key.
    pub secret_ref: CredentialKey,
    /// Its in-flight cap, request timeout and response limits.
    pub limits: ClientLimits,
    /// The user to act as (`Impersonate-User`, a kubeconfig's `as`). Default: none.
    pub impersonate: Option<String>,
    /// The groups to act as (`Impersonate-Group`, a kubeconfig's `as-groups`). Default: none.
    pub impersonate_groups: Vec<String>,
}

impl MemberClientConfig {
    /// A config with no CA bundle (system roots) that reaches `endpoint`: a URL alone means
    /// directly, TLS verified against its host.
    pub fn new(
        member: impl Into<String>,
        endpoint: impl Into<MemberEndpoint>,
        secret_ref: CredentialKey,
    ) -> Self {
        Self {
            member: member.into(),
            endpoint: endpoint.into(),
            ca_bundle: None,
            secret_ref,
            limits: ClientLimits::default(),
            impersonate: None,
            impersonate_groups: Vec::new(),
        }
    }

    /// Verify the member with this PEM CA bundle.
    #[must_use]
    pub fn with_ca_bundle(mut self, pem: impl Into<Bytes>) -> Self {
        self.ca_bundle = Some(pem.into());
        self
    }
}

/// Builds member clients that share one [`CredentialCache`].
///
/// The client's own auth is cleared: the only `Authorization` header is the one
/// [`CredentialLayer`] sets from the cache, so a rotated token is used by the next request without
/// rebuilding anything. A changed CA bundle or endpoint, on the other hand, needs a new client.
///
/// Every client checks its endpoint against the factory's [`EndpointPolicy`] when it is built,
/// and every address a host name resolves to before it dials it. The default policy refuses
/// loopback; tests against a loopback apiserver use [`EndpointPolicy::loopback`].
#[derive(Clone)]
pub struct ClientFactory {
    tokens: CredentialCache,
    policy: Arc<EndpointPolicy>,
    lookup: Lookup,
    /// `None`: HTTP/1.1 only.
    http2: Option<transport::Http2Settings>,
}

impl std::fmt::Debug for ClientFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFactory")
            .field("tokens", &self.tokens)
            .field("policy", &self.policy)
            .field("http2", &self.http2.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientFactory {
    /// A factory whose clients read tokens from `tokens`, under the default (strict)
    /// [`EndpointPolicy`].
    pub fn new(tokens: CredentialCache) -> Self {
        Self {
            tokens,
            policy: Arc::new(EndpointPolicy::default()),
            lookup: guarded_resolver::system_lookup(),
            http2: Some(transport::Http2Settings::default()),
        }
    }

    /// Whether clients offer HTTP/2 to members (on by default).
    ///
    /// With HTTP/2, a member that negotiates `h2` by ALPN gets one TLS connection per client
    /// identity, carrying all of its watches, probes and requests up to the member's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (another connection is opened past it), and PINGed
    /// after 30 s of silence, failing after 15 s more without an answer, as client-go does. A
    /// member (or proxy) that does not offer `h2`, a plain `http://` endpoint and a protocol
    /// upgrade get HTTP/1.1: one connection per request in flight. Off, every member gets
    /// HTTP/1.1.
    #[must_use]
    pub fn with_http2(mut self, enabled: bool) -> Self {
        self.http2 = enabled.then(transport::Http2Settings::default);
        self
    }

    /// Judge endpoints by `policy` instead.
    #[must_use]
    pub fn with_policy(mut self, policy: EndpointPolicy) -> Self {
        self.policy = Arc::new(policy);
        self
    }

    /// Where this factory's clients may connect.
    pub fn policy(&self) -> &EndpointPolicy {
        &self.policy
    }

    /// Resolve host names with `lookup` instead of the system resolver (tests).
    #[cfg(test)]
    pub(crate) fn with_lookup(mut self, lookup: Lookup) -> Self {
        self.lookup = lookup;
        self
    }

    /// Builds the client for one member; `health` receives what the member says of its
    /// credential.
    ///
    /// The stack, outermost first: kube's buffer (from `Client::new`) → [`CredentialLayer`]
    /// (which also retries 429/503/504 as kube does, for up to the request timeout) →
    /// the member's in-flight limit
    /// ([`max_concurrent_requests`](ClientLimits::max_concurrent_requests), tower's
    /// `ConcurrencyLimitLayer`) → a deadline for requests that are not watches
    /// ([`RequestDeadlineLayer`]) → kube's default stack (base URI,
    /// impersonation and extra headers, request spans, TLS, timeouts), rebuilt cloneable: the
    /// one retry after a 401 calls a clone of it, and concurrent requests share no lock on
    /// their way to the connection pool.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the endpoint, proxy or CA bundle breaks its
    /// [`validation`](crate::validation) rule or the policy, or [`Error::BuildClient`].
    ///
    /// # Panics
    /// Outside a Tokio runtime, like `kube::Client::try_from`.
    pub fn build(&self, config: &MemberClientConfig, health: &CredentialHealth) -> Result<Client> {
        let invalid = |source| Error::Invalid {
            member: config.member.clone(),
            source,
        };
        let route = validation::route(&self.policy, &config.endpoint).map_err(invalid)?;
        let mut kube_config = kube::Config::new(route.endpoint);
        kube_config.proxy_url = route.proxy;
        kube_config.tls_server_name = config.endpoint.tls_server_name.clone();
        if config.endpoint.insecure_skip_tls_verify {
            kube_config.accept_invalid_certs = true;
        } else if let Some(pem) = &config.ca_bundle {
            kube_config.root_cert = Some(validation::ca_bundle(pem).map_err(invalid)?);
        }
        // Config::new leaves auth_info empty; nothing below CredentialLayer may set the header.
        debug_assert!(kube_config.auth_info.token.is_none());
        kube_config.auth_info.impersonate = config.impersonate.clone();
        kube_config.auth_info.impersonate_groups =
            (!config.impersonate_groups.is_empty()).then(|| config.impersonate_groups.clone());

        let bearer = CredentialLayer::new(
            config.member.clone(),
            config.secret_ref.clone(),
            self.tokens.clone(),
            health.clone(),
        )
        .with_server_retries(config.limits.request_timeout);
        // A Semaphore panics above MAX_PERMITS, and no slot at all would hold every request.
        let in_flight = config
            .limits
            .max_concurrent_requests
            .clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        let resolver = GuardedResolver::new(Arc::clone(&self.policy), Arc::clone(&self.lookup));
        let service =
            transport::service(&kube_config, resolver, config.limits.response, self.http2)
                .map_err(|source| Error::BuildClient {
                    member: config.member.clone(),
                    source,
                })?;
        let client = ClientBuilder::new(service, kube_config.default_namespace.clone())
            .with_layer(&RequestDeadlineLayer::new(config.limits.request_timeout))
            .with_layer(&ConcurrencyLimitLayer::new(in_flight))
            .with_layer(&bearer)
            .build();
        Ok(client)
    }
}

/// The default [`ClientLimits::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How many requests one member client has in flight, how long each waits, and how much the
/// member may send back: the same for every member of a collector, set by its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Requests in flight to the member at once; more wait. Watches hold a slot only until
    /// their response headers arrive. Default: 64.
    pub max_concurrent_requests: usize,
    /// How long a request that is not a watch may wait for its response headers before it
    /// fails as unreachable. Default: 10 s.
    pub request_timeout: Duration,
    /// How much the member may send back.
    pub response: ResponseLimits,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            max_concurrent_requests: 64,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            response: ResponseLimits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CredentialCacheConfig, test_util::FakeSource, validation::ValidationError};
    use rstest::rstest;

    fn factory() -> ClientFactory {
        let cache = CredentialCache::new(FakeSource::missing(), CredentialCacheConfig::default());
        ClientFactory::new(cache).with_policy(EndpointPolicy::loopback().allow_insecure_tls(true))
    }

    /// The rule `config` broke, by asking the factory to build it.
    fn refusal(config: &MemberClientConfig) -> ValidationError {
        match factory().build(config, &CredentialHealth::new()) {
            Err(Error::Invalid { member, source }) if member == config.member => source,
            Err(other) => panic!("{config:?}: expected Error::Invalid, got {other:?}"),
            Ok(_) => panic!("{config:?} must be refused"),
        }
    }

    fn config(endpoint: &str) -> MemberClientConfig {
        MemberClientConfig::new("m1", endpoint, CredentialKey::new("ns", "m1"))
    }

    fn with_proxy(proxy: &str) -> MemberClientConfig {
        let mut config = config("https://127.0.0.1:6443");
        config.endpoint.proxy_url = Some(proxy.to_owned());
        config
    }

    #[rstest]
    #[case::not_a_url(config("::::"), "Endpoint", "not a URL")]
    #[case::metadata(config("https://169.254.169.254"), "Forbidden", "cloud metadata")]
    #[case::link_local(config("https://[fe80::1]:6443"), "Forbidden", "link-local")]
    #[case::userinfo(config("https://u:p@127.0.0.1:6443"), "Forbidden", "user info")]
    #[case::no_scheme(config("10.0.0.1:6443"), "Endpoint", "no scheme")]
    #[case::wrong_scheme(config("ftp://10.0.0.1"), "Endpoint", "not an https URL")]
    #[case::space(config("https://exa mple"), "Endpoint", "not a URL")]
    #[case::garbage_ca(config("https://127.0.0.1:6443").with_ca_bundle(&b"not a certificate"[..]), "CaBundle", "no CERTIFICATE block")]
    #[case::empty_ca(config("https://127.0.0.1:6443").with_ca_bundle(&b""[..]), "CaBundle", "no CERTIFICATE block")]
    #[case::unterminated_ca(config("https://127.0.0.1:6443").with_ca_bundle(&b"-----BEGIN CERTIFICATE-----\nMIIB\n"[..]), "CaBundle", "not PEM")]
    #[case::socks_proxy(
        with_proxy("socks5://127.0.0.1:1080"),
        "Proxy",
        "not an http:// or https:// URL"
    )]
    #[case::proxy_without_scheme(
        with_proxy("127.0.0.1:3128"),
        "Proxy",
        "not an http:// or https:// URL"
    )]
    #[case::garbage_proxy(with_proxy("http://[::1"), "Proxy", "not a URL")]
    #[tokio::test]
    async fn bad_configs_are_refused_by_their_rule(
        #[case] config: MemberClientConfig,
        #[case] rule: &str,
        #[case] want: &str,
    ) {
        let err = refusal(&config);
        assert!(format!("{err:?}").starts_with(rule), "{err:?}");
        assert!(err.detail().contains(want), "{err}");
    }

    #[rstest]
    #[case::insecure_skip_ignores_the_ca_bundle({
        let mut config = config("https://127.0.0.1:6443").with_ca_bundle(&b"garbage"[..]);
        config.endpoint.insecure_skip_tls_verify = true;
        config
    })]
    #[case::http_proxy(with_proxy("http://127.0.0.1:3128"))]
    #[case::http_endpoint_for_loopback_tests(config("http://127.0.0.1:8080"))]
    #[tokio::test]
    async fn good_configs_build(#[case] config: MemberClientConfig) {
        assert!(factory().build(&config, &CredentialHealth::new()).is_ok());
    }
}

#[cfg(test)]
mod policy_tests {
    use std::{
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    use super::*;
    use crate::{test_util::FakeSource, validation::ValidationError};

    /// A loopback listener that counts the connections it accepts.
    async fn listener() -> (u16, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((_stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        (port, accepted)
    }

    /// `member.test` resolves to 127.0.0.1, by stub: the policy sees only the answer.
    fn factory(policy: EndpointPolicy) -> ClientFactory {
        let lookup: Lookup =
            Arc::new(|_name: String| Box::pin(async { Ok(vec!["127.0.0.1:0".parse().unwrap()]) }));
        let cache = CredentialCache::new(FakeSource::token("t0ken"), Default::default());
        ClientFactory::new(cache)
            .with_policy(policy)
            .with_lookup(lookup)
    }

    async fn get_version(policy: EndpointPolicy, port: u16) -> kube::Error {
        let secret = CredentialKey::new("ns", "m1");
        let config = MemberClientConfig::new("m1", format!("http://member.test:{port}"), secret);
        let client = factory(policy)
            .build(&config, &CredentialHealth::new())
            .unwrap();
        let request = tokio::time::timeout(Duration::from_secs(2), client.apiserver_version());
        match request.await {
            Ok(Err(err)) => err,
            other => panic!("expected a connection error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_a_refused_address_is_never_dialled() {
        let (port, accepted) = listener().await;
        let err = get_version(EndpointPolicy::default().allow_plain_http(true), port).await;
        let chain: Vec<String> = crate::error::causes(&err).map(|e| e.to_string()).collect();
        let chain = chain.join(": ");
        assert!(chain.contains("loopback"), "{chain}");
        assert!(
            matches!(
                validation::refusal_in(&err),
                Some(ValidationError::Forbidden(_))
            ),
            "the refusal is found in {chain}"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 0, "nothing may be dialled");
    }

    #[tokio::test]
    async fn the_same_name_is_dialled_once_its_range_is_allowed() {
        let (port, accepted) = listener().await;
        let _ = get_version(EndpointPolicy::loopback(), port).await;
        assert!(accepted.load(Ordering::SeqCst) >= 1);
    }
}
