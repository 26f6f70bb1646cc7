//! What the `CredentialLayer` costs per request, against a plain kube client with a static token,
//! over the same loopback HTTP server, measured in this process: the clients take turns in
//! slices of a few milliseconds, and each round also times a second static client against the
//! first, so machine noise hits all alike and the result says how finely it could resolve a
//! difference. A run keeps `concurrency` GETs in flight, so that a cost that only shows when
//! requests share the layer's stack (a lock, its in-flight limit) shows too.

use std::{
    net::Ipv4Addr,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use member_client::{
    ClientFactory, CredentialCache, CredentialCacheConfig, CredentialHealth, CredentialKey,
    MemberClientConfig,
    test_util::{FakeSource, LoopbackServer, Reply},
    validation::EndpointPolicy,
};
use secrecy::SecretString;

/// The one token the loopback server accepts, and both clients send.
pub const TOKEN: &str = "bench-token";
const PATH: &str = "/api/v1/namespaces/default/configmaps/cm";

/// The result of the A/B run.
#[derive(Clone, Copy, Debug)]
pub struct OverheadReport {
    /// Rounds (each one batch per client).
    pub rounds: usize,
    /// GETs per client in a round.
    pub batch: usize,
    /// GETs in flight at once within a batch.
    pub concurrency: usize,
    /// Median per-request time of the static-token client.
    pub static_us: f64,
    /// Median per-request time of the CredentialLayer client.
    pub layered_us: f64,
    /// Median of the per-round ratios layered/static, with the 25th and 75th percentiles.
    pub ratio: (f64, f64, f64),
    /// The same for a second static client against the first in the same rounds: what the
    /// measurement reads where there is no difference, so how finely it resolves one.
    pub control: (f64, f64, f64),
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
    let server = Loopback::start().await?;
    let plain = server.static_client()?;
    let control = server.static_client()?;
    let layered = server.layered_client()?;
    interleaved(&plain, &control, &layered, rounds, batch, concurrency).await
}

/// The loopback apiserver stand-in of the A/B, serving until dropped: 200 `{}` for the right
/// bearer token, 401 otherwise.
#[derive(Debug)]
pub struct Loopback(LoopbackServer);

impl Loopback {
    /// Serves on an ephemeral loopback port.
    ///
    /// # Errors
    /// Binding the port.
    pub async fn start() -> anyhow::Result<Self> {
        let server = LoopbackServer::start(Ipv4Addr::LOCALHOST, None, |request, _| async move {
            respond(&request)
        });
        Ok(Self(server.await?))
    }

    /// A kube client built from a config with the token in it: the baseline.
    ///
    /// # Errors
    /// kube's, building the client.
    pub fn static_client(&self) -> anyhow::Result<kube::Client> {
        let mut config = kube::Config::new(self.0.url().parse()?);
        config.auth_info.token = Some(SecretString::from(TOKEN));
        Ok(kube::Client::try_from(config)?)
    }

    /// Tether's member client for the same server, its token from a cache.
    ///
    /// # Errors
    /// The client factory's.
    pub fn layered_client(&self) -> anyhow::Result<kube::Client> {
        let tokens =
            CredentialCache::new(FakeSource::token(TOKEN), CredentialCacheConfig::default());
        let key = CredentialKey::new("bench", "bench");
        let member = MemberClientConfig::new("bench", self.0.url(), key);
        let factory = ClientFactory::new(tokens).with_policy(EndpointPolicy::loopback());
        Ok(factory.build(&member, &CredentialHealth::new())?)
    }
}

/// Waves of requests in one slice: a round takes turns slice by slice, so that the machine's
/// drift over a slice (a few milliseconds) is all that can favour one client.
pub const WAVES_PER_SLICE: usize = 4;

/// The order of the three runs in a turn (0: the static client, 1: the layered one, 2: a
/// second static client), through every permutation, so that each run holds each place
/// equally often, and in a sequence where no run follows itself and each follows each other
/// run equally often: a switch of client costs all three alike.
const ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [2, 1, 0],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
];

/// Warms the clients, then runs `rounds` rounds of `batch` GETs per client, `concurrency` in
/// flight at once, taking turns slice by slice in the [`ORDERS`]: `static_us` is `plain`'s,
/// `layered_us` is `layered`'s (wall time per request: with 16 in flight, about a sixteenth of
/// a GET's latency); `control`, built as `plain` is with its own connections, is the A/A.
///
/// # Errors
/// A GET failing.
pub async fn interleaved(
    plain: &kube::Client,
    control: &kube::Client,
    layered: &kube::Client,
    rounds: usize,
    batch: usize,
    concurrency: usize,
) -> anyhow::Result<OverheadReport> {
    let concurrency = concurrency.max(1);
    let slice = (concurrency * WAVES_PER_SLICE).clamp(1, batch.max(1));
    let turns = batch.div_ceil(slice).next_multiple_of(ORDERS.len());
    let clients = [plain, layered, control];
    // Warm the connection pools (one connection per request in flight) and the cache.
    for client in clients {
        run_batch(client, concurrency, concurrency).await?;
    }

    let (mut plain_times, mut layered_times) = (Vec::new(), Vec::new());
    let (mut ratios, mut controls) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let mut times = [Duration::ZERO; 3];
        for order in ORDERS.iter().cycle().take(turns) {
            for &run in order {
                let start = Instant::now();
                run_batch(clients[run], slice, concurrency).await?;
                times[run] += start.elapsed();
            }
        }
        let [plain_time, layered_time, control_time] = times.map(|t| t.as_secs_f64());
        let requests = (slice * turns) as f64;
        plain_times.push(plain_time / requests * 1e6);
        layered_times.push(layered_time / requests * 1e6);
        ratios.push(layered_time / plain_time);
        controls.push(control_time / plain_time);
    }
    Ok(OverheadReport {
        rounds,
        batch: slice * turns,
        concurrency,
        static_us: quartiles(&mut plain_times).0,
        layered_us: quartiles(&mut layered_times).0,
        ratio: quartiles(&mut ratios),
        control: quartiles(&mut controls),
    })
}

/// The median, 25th and 75th percentiles of `values` (sorted in place).
fn quartiles(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let at = |q: usize| {
        values
            .get(values.len() * q / 4)
            .copied()
            .unwrap_or(f64::NAN)
    };
    (at(2), at(1), at(3))
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

/// One GET of a small object, as every run of the A/B sends.
///
/// # Errors
/// The GET failing.
pub async fn get(client: &kube::Client) -> anyhow::Result<()> {
    client
        .request_text(Request::get(PATH).body(Vec::new())?)
        .await
        .context("GET over loopback")?;
    Ok(())
}

fn respond<B>(request: &Request<B>) -> Reply {
    let accepted = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .is_some_and(|v| v.as_bytes() == format!("Bearer {TOKEN}").as_bytes());
    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")).boxed());
    if !accepted {
        *response.status_mut() = StatusCode::UNAUTHORIZED;
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the three runs pay for a place in a turn or for following another client, each
    /// pays it equally often, so the A/A reads 1 and the ratio reads only the layer's cost.
    #[test]
    fn every_run_meets_every_place_and_predecessor_alike() {
        let sequence: Vec<usize> = ORDERS.iter().flatten().copied().collect();
        let mut places = [[0; 3]; 3];
        let mut follows = [[0; 3]; 3];
        for order in ORDERS {
            for (place, &run) in order.iter().enumerate() {
                places[run][place] += 1;
            }
        }
        // Rounds chain their turns, so the last run of a round precedes the first of the next.
        for (i, &run) in sequence.iter().enumerate() {
            let before = sequence[(i + sequence.len() - 1) % sequence.len()];
            follows[before][run] += 1;
        }
        assert_eq!(places, [[2; 3]; 3]);
        assert_eq!(follows, [[0, 3, 3], [3, 0, 3], [3, 3, 0]]);
    }

    #[test]
    fn quartiles_are_median_first() {
        let mut values = vec![5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(quartiles(&mut values), (3.0, 2.0, 4.0));
        assert!(quartiles(&mut []).0.is_nan());
    }
}
