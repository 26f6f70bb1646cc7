//! What the CredentialLayer costs per request, against a plain kube client with a static token,
//! over the same loopback server; plus the cost of a token-cache hit.
//!
//! `cargo bench -p member-client` runs the criterion groups, then an interleaved A/B run that
//! prints the ratio (both clients measured side by side in one process, alternating batches, so
//! machine noise hits both alike).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    reason = "a bench, not a library"
)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use criterion::Criterion;
use http::Request;
use member_client::{CredentialKey, test_util::FakeSource};
use secrecy::SecretString;
use support::{LoopbackApiserver, Member};

const TOKEN: &str = "bench-token";
const PATH: &str = "/api/v1/namespaces/default/configmaps/cm";

struct Clients {
    _server: LoopbackApiserver,
    plain: kube::Client,
    member: Member,
}

async fn clients() -> Clients {
    let server = LoopbackApiserver::start(&[TOKEN]).await;
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.token = Some(SecretString::from(TOKEN));
    let plain = kube::Client::try_from(config).unwrap();
    let member = Member::new(&server.url(), &Arc::new(FakeSource::token(TOKEN)));
    Clients {
        _server: server,
        plain,
        member,
    }
}

async fn get(client: &kube::Client) {
    client
        .request_text(Request::get(PATH).body(Vec::new()).unwrap())
        .await
        .unwrap();
}

fn criterion_groups(c: &mut Criterion, rt: &tokio::runtime::Runtime, clients: &Clients) {
    let mut group = c.benchmark_group("request");
    group.bench_function("static_token", |b| {
        b.to_async(rt).iter(|| get(&clients.plain))
    });
    group.bench_function("credential_layer", |b| {
        b.to_async(rt).iter(|| get(&clients.member.client))
    });
    group.finish();

    let key: CredentialKey = clients.member.key.clone();
    let tokens = clients.member.tokens.clone();
    c.bench_function("credential_cache_hit", |b| {
        b.to_async(rt)
            .iter(|| async { tokens.get(&key).await.unwrap() })
    });
}

/// Per-request times of the two clients in alternating batches, paired per round.
struct Rounds {
    plain: Vec<Duration>,
    layered: Vec<Duration>,
}

impl Rounds {
    fn median(values: &mut [f64]) -> f64 {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    }

    /// Median of the per-round ratios, with the 25th and 75th percentiles.
    fn ratio(&self) -> (f64, f64, f64) {
        let mut ratios: Vec<f64> = self
            .plain
            .iter()
            .zip(&self.layered)
            .map(|(p, l)| l.as_secs_f64() / p.as_secs_f64())
            .collect();
        let median = Self::median(&mut ratios);
        let n = ratios.len();
        (median, ratios[n / 4], ratios[3 * n / 4])
    }

    fn median_us(values: &[Duration]) -> f64 {
        Self::median(
            &mut values
                .iter()
                .map(|d| d.as_secs_f64() * 1e6)
                .collect::<Vec<_>>(),
        )
    }
}

async fn interleaved(clients: &Clients, rounds: usize, batch: usize) -> Rounds {
    let mut result = Rounds {
        plain: Vec::with_capacity(rounds),
        layered: Vec::with_capacity(rounds),
    };
    for round in 0..rounds {
        // Alternate which goes first so neither always runs on the warmer machine.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for use_layer in order {
            let client = if use_layer {
                &clients.member.client
            } else {
                &clients.plain
            };
            let start = Instant::now();
            for _ in 0..batch {
                get(client).await;
            }
            let per_request = start.elapsed() / batch as u32;
            if use_layer {
                result.layered.push(per_request)
            } else {
                result.plain.push(per_request)
            }
        }
    }
    result
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let clients = rt.block_on(clients());
    // Warm both connection pools and the cache.
    rt.block_on(async {
        get(&clients.plain).await;
        get(&clients.member.client).await;
    });

    let mut criterion = Criterion::default().configure_from_args();
    criterion_groups(&mut criterion, &rt, &clients);
    criterion.final_summary();

    // `cargo test --benches` runs this binary without `--bench`: check it works, skip the A/B.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    const ROUNDS: usize = 61;
    const BATCH: usize = 300;
    let rounds = rt.block_on(interleaved(&clients, ROUNDS, BATCH));
    let (ratio, p25, p75) = rounds.ratio();
    println!();
    println!("interleaved A/B: {ROUNDS} rounds x {BATCH} sequential GETs per client, same server");
    println!(
        "  static token client : {:>8.1} us/request (median)",
        Rounds::median_us(&rounds.plain)
    );
    println!(
        "  CredentialLayer client  : {:>8.1} us/request (median)",
        Rounds::median_us(&rounds.layered)
    );
    println!(
        "  ratio layer/static  : {ratio:.3}x median of rounds (p25 {p25:.3}, p75 {p75:.3}); goal <= 1.05x"
    );
    let stats = clients.member.tokens.stats();
    println!(
        "  token cache: {} hits, {} misses, {} fetches",
        stats.hits, stats.misses, stats.fetches
    );
}
