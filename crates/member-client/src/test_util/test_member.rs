//! [`TestMember`]: a member client over a [`FakeSource`], built as the collector builds one.

use std::sync::Arc;

use http::Request;

use super::FakeSource;
use crate::{
    ClientFactory, CredentialCache, CredentialCacheConfig, CredentialHealth, CredentialKey,
    EndpointPolicy, MemberClientConfig,
};

/// A member's client, the cache it reads its credential from (fresh, over one fake Secret)
/// and the health it reports to. Its endpoint policy lets loopback addresses in.
pub struct TestMember {
    /// The client.
    pub client: kube::Client,
    /// The cache between the client and the source.
    pub tokens: CredentialCache,
    /// What the member said of the credential.
    pub health: CredentialHealth,
    /// The key the client reads its credential by.
    pub key: CredentialKey,
}

impl TestMember {
    /// `member1` at `url`, its Secret `karmada-cluster/member1` read from `source`.
    pub fn new(url: &str, source: &Arc<FakeSource>) -> Self {
        Self::with_cache_config(url, source, CredentialCacheConfig::default())
    }

    /// [`new`](Self::new), with a cache configured by `cache`.
    pub fn with_cache_config(
        url: &str,
        source: &Arc<FakeSource>,
        cache: CredentialCacheConfig,
    ) -> Self {
        Self::build(source, Self::config(url), cache)
    }

    /// [`new`](Self::new), letting `n` requests be in flight at once.
    pub fn with_in_flight_limit(url: &str, source: &Arc<FakeSource>, n: usize) -> Self {
        let mut config = Self::config(url);
        config.limits.max_concurrent_requests = n;
        Self::build(source, config, CredentialCacheConfig::default())
    }

    /// The member `config` describes (its `secret_ref` is the key), reading `source` through a
    /// cache configured by `cache`.
    ///
    /// # Panics
    /// The factory refuses `config`: the test's setup is wrong.
    pub fn build(
        source: &Arc<FakeSource>,
        config: MemberClientConfig,
        cache: CredentialCacheConfig,
    ) -> Self {
        let tokens = CredentialCache::from_arc(source.clone(), cache);
        let health = CredentialHealth::new();
        let client = ClientFactory::new(tokens.clone())
            .with_policy(EndpointPolicy::loopback())
            .build(&config, &health)
            .unwrap_or_else(|err| panic!("the factory refused {}: {err}", config.member));
        Self {
            client,
            tokens,
            health,
            key: config.secret_ref,
        }
    }

    /// `GET path`: the body as text.
    ///
    /// # Errors
    /// The request failed.
    pub async fn get(&self, path: &str) -> Result<String, kube::Error> {
        let request = Request::get(path)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        self.client.request_text(request).await
    }

    fn config(url: &str) -> MemberClientConfig {
        let key = CredentialKey::new("karmada-cluster", "member1");
        MemberClientConfig::new("member1", url, key)
    }
}
