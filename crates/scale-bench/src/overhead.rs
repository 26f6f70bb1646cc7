//! What the `BearerLayer` costs per request, against a plain kube client with a static token,
//! over the same loopback HTTP server, measured in this process: the interleaved A/B of
//! `crates/member-client/benches/bearer_overhead.rs` (alternating batches of GETs, the median
//! of the per-round ratios), so machine noise hits both clients alike. A batch keeps
//! `concurrency` GETs in flight, so that a cost that only shows when requests share the
//! layer's stack (its lock, its concurrency limit) shows too.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use member_client::{
    ClientFactory, Credential, CredentialHealth, CredentialSource, EndpointPolicy,
    MemberClientConfig, SecretRef, SourceError, TokenCache, TokenCacheConfig,
};
use secrecy::SecretString;
use tokio::net::TcpListener;

const TOKEN: &str = "bench-token";
const PATH: &str = "/api/v1/namespaces/default/configmaps/cm";

/// The result of the A/B run.
#[derive(Clone, Copy, Debug)]
pub struct OverheadReport {
    /// Rounds (each one batch per client).
    pub rounds: usize,
    /// GETs per batch.
    pub batch: usize,
    /// GETs in flight at once within a batch.
    pub concurrency: usize,
    /// Median per-request time of the static-token client.
    pub static_us: f64,
    /// Median per-request time of the BearerLayer client.
    pub layered_us: f64,
    /// Median of the per-round ratios layered/static, with the 25th and 75th percentiles.
    pub ratio: (f64, f64, f64),
}

/// Always the same token, as a Secret that never changes.
struct StaticSource;

#[async_trait::async_trait]
impl CredentialSource for StaticSource {
    async fn fetch(&self, _key: &SecretRef) -> Result<Credential, SourceError> {
        Credential::from_token_bytes(TOKEN.as_bytes())
    }
}

/// Runs `rounds` rounds of `batch` GETs per client, `concurrency` at a time.
///
/// # Errors
/// The loopback server or a client failing.
pub async fn measure(
    rounds: usize,
    batch: usize,
    concurrency: usize,
) -> anyhow::Result<OverheadReport> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(serve(listener));
    let url = format!("http://{addr}");

    let mut config = kube::Config::new(url.parse()?);
    config.auth_info.token = Some(SecretString::from(TOKEN));
    let plain = kube::Client::try_from(config)?;
    let tokens = TokenCache::new(StaticSource, TokenCacheConfig::default());
    let layered = ClientFactory::new(tokens)
        .with_policy(EndpointPolicy::loopback())
        .build(
            &MemberClientConfig::new("bench", &url, SecretRef::new("bench", "bench")),
            &CredentialHealth::new(),
        )?;
    let report = interleaved(&plain, &layered, rounds, batch, concurrency).await;
    server.abort();
    report
}

/// Warms both clients, then runs `rounds` rounds of `batch` GETs per client, `concurrency` in
/// flight at once, alternating which goes first: `static_us` is `plain`'s, `layered_us` is
/// `layered`'s (wall time per request: with 16 in flight, a sixteenth of a GET's latency).
///
/// # Errors
/// A GET failing.
pub async fn interleaved(
    plain: &kube::Client,
    layered: &kube::Client,
    rounds: usize,
    batch: usize,
    concurrency: usize,
) -> anyhow::Result<OverheadReport> {
    let concurrency = concurrency.max(1);
    // Warm both connection pools (one connection per request in flight) and the cache.
    run_batch(plain, concurrency, concurrency).await?;
    run_batch(layered, concurrency, concurrency).await?;

    let (mut plain_times, mut layered_times, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first so neither always runs on the warmer machine.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut times = [Duration::ZERO; 2];
        for use_layer in order {
            let client = if use_layer { layered } else { plain };
            let start = Instant::now();
            run_batch(client, batch, concurrency).await?;
            times[usize::from(use_layer)] = start.elapsed() / u32::try_from(batch)?;
        }
        plain_times.push(times[0].as_secs_f64() * 1e6);
        layered_times.push(times[1].as_secs_f64() * 1e6);
        ratios.push(times[1].as_secs_f64() / times[0].as_secs_f64());
    }
    let n = ratios.len();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let ratio = median(&mut ratios);
    Ok(OverheadReport {
        rounds,
        batch,
        concurrency,
        static_us: median(&mut plain_times),
        layered_us: median(&mut layered_times),
        ratio: (
            ratio,
            ratios.get(n / 4).copied().unwrap_or(f64::NAN),
            ratios.get(3 * n / 4).copied().unwrap_or(f64::NAN),
        ),
    })
}

/// `count` GETs, `concurrency` in flight at once.
async fn run_batch(client: &kube::Client, count: usize, concurrency: usize) -> anyhow::Result<()> {
    futures::stream::iter(0..count)
        .map(|_| get(client))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await
        .map(drop)
}

async fn get(client: &kube::Client) -> anyhow::Result<()> {
    client
        .request_text(Request::get(PATH).body(Vec::new())?)
        .await
        .context("GET over loopback")?;
    Ok(())
}

/// A loopback apiserver stand-in: 200 `{}` for the right bearer token, 401 otherwise.
async fn serve(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let service = service_fn(respond);
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn respond(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let accepted = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .is_some_and(|v| v.as_bytes() == format!("Bearer {TOKEN}").as_bytes());
    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
    if !accepted {
        *response.status_mut() = StatusCode::UNAUTHORIZED;
    }
    Ok(response)
}
