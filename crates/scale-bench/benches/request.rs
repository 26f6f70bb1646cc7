//! One GET by kube's static-token client and by Tether's member client, over the per-request
//! A/B's loopback server, and a credential-cache hit, with criterion: `cargo bench -p
//! scale-bench --bench request`. The interleaved A/B with its A/A control is the bench's
//! section 4 (`hack/bench.sh`), and the instruction counts are `hack/instructions.sh`.

#![allow(clippy::unwrap_used, missing_docs, reason = "a bench, not a library")]

use criterion::Criterion;
use member_client::{CredentialCache, CredentialCacheConfig, CredentialKey, test_util::FakeSource};
use scale_bench::overhead::{Loopback, TOKEN, get};

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Loopback::start()).unwrap();
    let (plain, layered) = rt
        .block_on(async {
            let clients = (server.static_client()?, server.layered_client()?);
            // Warm both connection pools and the cache.
            get(&clients.0).await?;
            get(&clients.1).await?;
            anyhow::Ok(clients)
        })
        .unwrap();

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("request");
    group.bench_function("static_token", |b| b.to_async(&rt).iter(|| get(&plain)));
    group.bench_function("credential_layer", |b| {
        b.to_async(&rt).iter(|| get(&layered))
    });
    group.finish();

    let key = CredentialKey::new("bench", "bench");
    let tokens = CredentialCache::new(FakeSource::token(TOKEN), CredentialCacheConfig::default());
    criterion.bench_function("credential_cache_hit", |b| {
        b.to_async(&rt)
            .iter(|| async { tokens.get(&key).await.unwrap() })
    });
    criterion.final_summary();
}
