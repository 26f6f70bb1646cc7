//! The credential kinds beyond a bearer token, measured in process over loopback:
//! - the client-certificate path: a member client whose identity comes from the cache and
//!   picks its connection pool per request, against a plain kube client with the same
//!   certificate baked in, interleaved as [`overhead`](crate::overhead) does;
//! - the exec single-flight: N concurrent misses on a cold cache over an exec plugin, and how
//!   many times the plugin ran.

use std::{
    net::Ipv4Addr,
    os::unix::fs::PermissionsExt as _,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt as _, Full};
use member_client::{
    ClientFactory, Credential, CredentialCache, CredentialCacheConfig, CredentialHealth,
    CredentialKey, CredentialSource, MemberClientConfig, SourceError,
    client_identity::ClientIdentity,
    exec::{ExecConfig, ExecPolicy},
    test_util::{ClientAuth, FakeSource, LoopbackServer, TestPki},
    validation::EndpointPolicy,
};

use crate::overhead::{self, OverheadReport};

/// What N concurrent misses over an exec plugin cost.
#[derive(Clone, Copy, Debug)]
pub struct ExecSingleFlightReport {
    /// Concurrent `get`s on a cold cache.
    pub misses: usize,
    /// Times the plugin ran.
    pub execs: usize,
    /// From the first `get` to the last answer.
    pub wall: Duration,
}

/// The client-certificate path against a static-certificate kube client: [`OverheadReport`]
/// with `static_us` the plain client and `layered_us` Tether's.
///
/// # Errors
/// The loopback server or a client failing.
pub async fn certificate_overhead(rounds: usize, batch: usize) -> anyhow::Result<OverheadReport> {
    let pki = TestPki::new();
    let (cert_pem, key_pem) = pki.identity_pem("bench");
    let tls = pki.server_config(Ipv4Addr::LOCALHOST, ClientAuth::Required);
    let server = LoopbackServer::start(Ipv4Addr::LOCALHOST, Some(tls), |_, _| async {
        Response::new(Full::new(Bytes::from_static(b"{}")).boxed())
    })
    .await?;
    let url = server.url();

    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let mut config = kube::Config::new(url.parse()?);
    config.root_cert = Some(vec![pki.ca_der()]);
    config.auth_info.client_certificate_data = Some(b64(&cert_pem));
    config.auth_info.client_key_data = Some(b64(&key_pem).into());
    let plain = kube::Client::try_from(config.clone())?;
    let control = kube::Client::try_from(config)?;

    let identity = ClientIdentity::from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?;
    let tokens = CredentialCache::new(
        FakeSource::identity(identity),
        CredentialCacheConfig::default(),
    );
    let member = MemberClientConfig::new("bench", &url, CredentialKey::new("bench", "bench"))
        .with_ca_bundle(pki.ca_pem());
    let layered = ClientFactory::new(tokens)
        .with_policy(EndpointPolicy::loopback())
        .build(&member, &CredentialHealth::new())?;
    overhead::interleaved(&plain, &control, &layered, rounds, batch, 1).await
}

/// Runs `misses` concurrent `get`s of one key on a cold cache over an exec plugin that takes
/// 200 ms, and counts its runs.
///
/// # Errors
/// Writing the plugin, or a `get` failing.
pub async fn exec_single_flight(misses: usize) -> anyhow::Result<ExecSingleFlightReport> {
    let dir = tempfile::tempdir()?;
    let count = dir.path().join("count");
    let plugin = dir.path().join("plugin.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho run >> '{}'\nsleep 0.2\nprintf '%s' '{}'\n",
            count.display(),
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"bench-exec-token"}}"#
        ),
    )?;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755))?;
    let source = Exec {
        config: ExecConfig::new(plugin.display().to_string()),
        policy: ExecPolicy::new([plugin]),
    };
    let cache = CredentialCache::new(source, CredentialCacheConfig::default());
    let key = CredentialKey::new("bench", "exec");
    let started = Instant::now();
    let gets = (0..misses).map(|_| {
        let (cache, key) = (cache.clone(), key.clone());
        tokio::spawn(async move { cache.get(&key).await })
    });
    for got in futures::future::join_all(gets).await {
        got?.map_err(|err| anyhow::anyhow!("{err}"))?;
    }
    let wall = started.elapsed();
    let execs = std::fs::read_to_string(&count)
        .context("the plugin never ran")?
        .lines()
        .count();
    Ok(ExecSingleFlightReport {
        misses,
        execs,
        wall,
    })
}

/// An exec plugin as the registry's Secret store runs one.
struct Exec {
    config: ExecConfig,
    policy: ExecPolicy,
}

#[async_trait::async_trait]
impl CredentialSource for Exec {
    async fn fetch(&self, _key: &CredentialKey) -> Result<Credential, SourceError> {
        let output = member_client::exec::run(&self.config, &self.policy).await?;
        Credential::from_exec(&output)
    }
}
