//! Test doubles for member-client and the crates above it; compiled for member-client's own
//! tests and, elsewhere, with the `test-util` feature (take it under `[dev-dependencies]`
//! only).
//!
//! - [`FakeSource`]: a credential source whose answer, pace and failures the test sets.
//! - [`LoopbackServer`]: the HTTP(S) server loop of every stand-in for a member apiserver, on a
//!   loopback address, with the test's handler.
//! - [`TestPki`]: a throwaway CA for its TLS and the client identities it sees.
//! - [`TestMember`]: a member client over a fake source, built as the collector builds one.
//! - [`jwt`]: a token with claims.
//! - [`LogBuffer`]: where a test's log subscriber writes, for the test to read.
//! - [`proptest_config`]: how many cases a property test runs.

use std::{
    io,
    sync::{Arc, Mutex, PoisonError},
};

use base64::Engine as _;
use http::Request;

use crate::{
    ClientFactory, CredentialCache, CredentialCacheConfig, CredentialHealth, CredentialKey,
    MemberClientConfig, validation::EndpointPolicy,
};

mod fake_source;
mod loopback_server;
mod test_pki;

pub use fake_source::FakeSource;
pub use loopback_server::{DEFAULT_MAX_CONCURRENT_STREAMS, LoopbackServer, Peer, Reply};
pub use test_pki::{ClientAuth, TestPki};

/// A JWT whose payload is `claims` (JSON), with a dummy signature: the client reads a token's
/// claims (its `exp`) but never checks a signature, which is the apiserver's job.
pub fn jwt(claims: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("{}.{}.c2ln", b64(r#"{"alg":"RS256"}"#), b64(claims))
}

/// `cases` per property in CI; `PROPTEST_CASES=<n>` runs `n` instead. Nothing is persisted:
/// a failure prints its input, and the tree stays clean.
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    let more = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    proptest::test_runner::Config {
        cases: more.unwrap_or(cases),
        failure_persistence: None,
        ..Default::default()
    }
}

/// An in-memory sink for a `tracing_subscriber::fmt()` subscriber: give the builder
/// `.with_writer(move || logs.clone())` and read what it wrote with [`text`](Self::text).
/// Clones share one buffer.
#[derive(Clone, Debug, Default)]
pub struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    /// Everything written so far (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl io::Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut buffer = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

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
