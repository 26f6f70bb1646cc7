//! What a caller of the collector's port cannot do to the broker, against the real `collector`
//! binary and a real control plane:
//! - 600 slow connections (one header byte every few seconds, reconnecting when cut off) from
//!   30 source addresses fill the API port, and `/healthz` on the probe port still answers
//!   every time within 1 s;
//! - 2,000 requests with random bearer tokens cost the control plane no more TokenReviews than
//!   the review budget allows, the rest get 429 at once, and the leader Lease's `renewTime`
//!   keeps moving throughout.
//!
//! Build the binary first: `cargo build -p collector --bin collector`.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use e2e::{
    collector_run::{admin_args, candidate, spawn_healthy, temp_dir},
    scenario::karmada_environment,
};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use testkit::{CollectorProcess, Environment, http_get, http_get_as};
use tokio::io::AsyncWriteExt as _;

const START: Duration = Duration::from_secs(60);
/// What a probe may take: the kubelet's default `timeoutSeconds` is 1.
const PROBE_DEADLINE: Duration = Duration::from_secs(1);
const PROBES: usize = 30;
const SLOW_CONNECTIONS: usize = 600;
/// Source addresses of the slow connections, 20 each: under the per-peer cap, as a
/// distributed attacker would be, so that only the probe port's own cap keeps probes apart.
const SLOW_SOURCES: u8 = 30;
const RANDOM_TOKEN_REQUESTS: usize = 2_000;
/// Random-token requests in flight at once: under the per-peer connection cap (32).
const AT_ONCE: usize = 25;
const LEASE_SECONDS: u64 = 6;
const REVIEW_RATE: u32 = 10;
const REVIEW_BURST: u32 = 20;

/// A collector binary against a Karmada control plane ([`karmada_environment`]), electing a leader with a
/// short Lease and a small review budget.
async fn start_collector(env: &Environment) -> CollectorProcess {
    let control_plane = env.control_plane();
    let mut args = admin_args(control_plane).unwrap();
    let lease = LEASE_SECONDS.to_string();
    let (rate, burst) = (REVIEW_RATE.to_string(), REVIEW_BURST.to_string());
    let rate = ["--access-review-rate", &rate];
    let burst = ["--access-review-burst", &burst];
    let namespace = ["--leader-election-namespace", "tether-system"];
    let candidate = candidate("serving-a", &lease);
    let flags = [&candidate[..], &namespace, &rate, &burst].concat();
    args.extend(flags.into_iter().map(str::to_owned));
    spawn_healthy(&args, &temp_dir("serving").unwrap(), START)
        .await
        .unwrap()
}

/// One slow client: connects from `source`, sends one header byte every 3 s and never
/// finishes; reconnects when cut off, until `stop`.
async fn slowloris(source: SocketAddr, target: SocketAddr, stop: Arc<AtomicBool>) {
    const HEAD: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    while !stop.load(Ordering::Relaxed) {
        let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
            return;
        };
        if socket.bind(source).is_err() {
            return;
        }
        let Ok(Ok(mut stream)) =
            tokio::time::timeout(Duration::from_secs(2), socket.connect(target)).await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        for byte in HEAD.iter().chain(std::iter::repeat(&b'a')) {
            if stop.load(Ordering::Relaxed) || stream.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `GET /healthz` on `addr`: whether it answered 200 within [`PROBE_DEADLINE`], and how long
/// it took.
async fn probe(addr: SocketAddr) -> (bool, Duration) {
    let started = Instant::now();
    let answered = tokio::time::timeout(PROBE_DEADLINE, http_get(addr, "/healthz")).await;
    let ok = matches!(answered, Ok(Ok((200, ref body))) if body == "ok");
    (ok, started.elapsed())
}

#[tokio::test]
async fn probes_answer_and_the_lease_renews_whatever_callers_of_the_api_port_do()
-> anyhow::Result<()> {
    let (env, _) = karmada_environment(0).await?;
    let collector = start_collector(&env).await;
    let (api, probes) = (collector.addr, collector.probe_addr);

    // 1. The slow-connection flood.
    let stop = Arc::new(AtomicBool::new(false));
    let mut flood = tokio::task::JoinSet::new();
    for n in 0..SLOW_CONNECTIONS {
        let last = 10 + u8::try_from(n % usize::from(SLOW_SOURCES))?;
        let source = SocketAddr::from(([127, 0, 0, last], 0));
        flood.spawn(slowloris(source, api, Arc::clone(&stop)));
    }
    // Let the flood take its places.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut probe_port = Vec::with_capacity(PROBES);
    let mut api_port = Vec::with_capacity(PROBES);
    for _ in 0..PROBES {
        let tick = tokio::time::Instant::now();
        let (on_probe_port, on_api_port) = tokio::join!(probe(probes), probe(api));
        probe_port.push(on_probe_port);
        api_port.push(on_api_port);
        tokio::time::sleep_until(tick + Duration::from_secs(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    flood.shutdown().await;

    let slowest = probe_port.iter().map(|(_, took)| *took).max().unwrap();
    let missed = probe_port.iter().filter(|(ok, _)| !ok).count();
    let missed_on_api = api_port.iter().filter(|(ok, _)| !ok).count();
    eprintln!(
        "under {SLOW_CONNECTIONS} slow connections: probe port {missed}/{PROBES} missed, slowest \
         {slowest:?}; the API port's /healthz {missed_on_api}/{PROBES} missed"
    );
    assert!(
        collector_alive(&collector),
        "the collector died under the flood"
    );
    assert_eq!(
        missed, 0,
        "/healthz on the probe port missed {missed} of {PROBES} probes under the flood \
         (slowest {slowest:?})"
    );
    assert!(
        missed_on_api > 0,
        "the flood never filled the API port, so it proves nothing about the probe port"
    );

    // 2. Random tokens, while the Lease is watched.
    let control_plane = env.control_plane();
    let leases: Api<Lease> = Api::namespaced(control_plane.admin_client()?, "tether-system");
    let reviews_before = token_reviews(control_plane).await;
    let renewals = tokio::spawn(watch_renewals(leases, Duration::from_secs(15)));
    let (statuses, took) = random_token_flood(api).await;
    let renewals = renewals.await?;
    let reviews = token_reviews(control_plane).await - reviews_before;
    let unauthorized = statuses.get(&401).copied().unwrap_or(0);
    let throttled = statuses.get(&429).copied().unwrap_or(0);
    eprintln!(
        "{RANDOM_TOKEN_REQUESTS} random-token requests in {took:?}: {statuses:?}; the control \
         plane saw {reviews} TokenReviews; renewTime observed {renewals:?}"
    );
    // The budget: the burst, the rate over the flood, and slack for scheduling.
    let budget = f64::from(REVIEW_BURST) + f64::from(REVIEW_RATE) * took.as_secs_f64() + 10.0;
    assert!(
        (reviews as f64) <= budget,
        "{reviews} TokenReviews reached the control plane, over the budget of {budget}"
    );
    assert_eq!(
        unauthorized + throttled,
        RANDOM_TOKEN_REQUESTS,
        "every random token is refused: {statuses:?}"
    );
    assert!(throttled > 0, "{statuses:?}");
    let distinct: std::collections::BTreeSet<_> = renewals.iter().collect();
    assert!(
        distinct.len() >= 3,
        "the Lease was renewed too rarely during the flood: {renewals:?}"
    );
    assert!(collector_alive(&collector));
    Ok(())
}

fn collector_alive(collector: &CollectorProcess) -> bool {
    testkit::proc_dir(collector.pid()).is_some()
}

/// [`RANDOM_TOKEN_REQUESTS`] requests for `/metrics`, each with a fresh random token,
/// [`AT_ONCE`] at a time (under the per-peer cap) over about 12 s: how many got each status
/// (0: no answer), and how long it all took.
async fn random_token_flood(api: SocketAddr) -> (std::collections::BTreeMap<u16, usize>, Duration) {
    let started = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let mut statuses = std::collections::BTreeMap::new();
    for round in 0..RANDOM_TOKEN_REQUESTS / AT_ONCE {
        let tick = tokio::time::Instant::now();
        let mut batch = tokio::task::JoinSet::new();
        for n in 0..AT_ONCE {
            let done = Arc::clone(&done);
            batch.spawn(async move {
                let token = format!("random-{}-{round}-{n}", std::process::id());
                let answer = tokio::time::timeout(
                    Duration::from_secs(20),
                    http_get_as(api, "/metrics", Some(&token)),
                )
                .await;
                done.fetch_add(1, Ordering::Relaxed);
                match answer {
                    Ok(Ok((status, _))) => status,
                    _ => 0,
                }
            });
        }
        while let Some(status) = batch.join_next().await {
            *statuses.entry(status.unwrap()).or_insert(0) += 1;
        }
        tokio::time::sleep_until(tick + Duration::from_millis(150)).await;
    }
    assert_eq!(done.load(Ordering::Relaxed), RANDOM_TOKEN_REQUESTS);
    (statuses, started.elapsed())
}

/// The leader Lease's `renewTime` as seen every 500 ms for `window`.
async fn watch_renewals(leases: Api<Lease>, window: Duration) -> Vec<String> {
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < window {
        if let Ok(lease) = leases.get("tether-collector").await {
            let spec = lease.spec.unwrap_or_default();
            assert_eq!(spec.holder_identity.as_deref(), Some("serving-a"));
            if let Some(renewed) = spec.renew_time {
                let renewed = renewed.0.to_string();
                if seen.last() != Some(&renewed) {
                    seen.push(renewed);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    seen
}

/// How many TokenReviews the control plane has answered, from its own metrics.
async fn token_reviews(control_plane: &testkit::Cluster) -> usize {
    let client = control_plane.admin_client().unwrap();
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap();
    testkit::metrics::sum(
        &text,
        "apiserver_request_total",
        r#"resource="tokenreviews""#,
    ) as usize
}

/// The DER of the one certificate in `pem`.
fn der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

/// A fresh HTTPS client (a new connection, a new handshake) that trusts `cas` only.
fn client_trusting(addr: SocketAddr, cas: &[&str]) -> kube::Client {
    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.root_cert = Some(cas.iter().map(|pem| der(pem)).collect());
    config.read_timeout = Some(Duration::from_secs(5));
    kube::Client::try_from(config).unwrap()
}

/// `GET /metrics` through a fresh client trusting `cas`: whether it was served.
async fn scrape(addr: SocketAddr, cas: &[&str]) -> Result<(), String> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    match client_trusting(addr, cas).request_text(request).await {
        Ok(text) if text.contains("# EOF") => Ok(()),
        Ok(text) => Err(format!("not the metrics: {text:.200}")),
        Err(err) => Err(format!("{err:#}")),
    }
}

#[tokio::test]
async fn the_serving_certificate_rotates_under_a_running_scrape_without_a_restart()
-> anyhow::Result<()> {
    let one = testkit::CollectorServingCert::generate("tether test CA one")?;
    let two = testkit::CollectorServingCert::generate("tether test CA two")?;
    let dir = temp_dir("serving-tls")?;
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &one.cert_pem)?;
    std::fs::write(&key, &one.key_pem)?;
    let members = dir.join("members");
    std::fs::create_dir_all(&members)?;
    let args = [
        "--members-from",
        "directory",
        "--members-dir",
        members.to_str().unwrap(),
        "--insecure-serve-api",
        "--tls-cert-file",
        cert.to_str().unwrap(),
        "--tls-private-key-file",
        key.to_str().unwrap(),
    ]
    .map(str::to_owned);
    let mut collector = spawn_healthy(&args, &dir, START).await?;
    let (api, pid) = (collector.addr, collector.pid());

    // TLS only: a cleartext request gets no answer.
    let plain = tokio::time::timeout(Duration::from_secs(5), http_get(api, "/healthz")).await;
    assert!(
        !matches!(plain, Ok(Ok((200, _)))),
        "--listen answered plain HTTP: {plain:?}"
    );
    scrape(api, &[&one.ca_pem]).await.unwrap();
    assert!(scrape(api, &[&two.ca_pem]).await.is_err());

    // A scraper trusting both CAs, as Prometheus would across a CA change, every 100 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = {
        let (stop, one, two) = (Arc::clone(&stop), one.ca_pem.clone(), two.ca_pem.clone());
        tokio::spawn(async move {
            let mut results = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                results.push(scrape(api, &[&one, &two]).await);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            results
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Written in place, one file after the other: for a moment the pair does not match.
    std::fs::write(&cert, &two.cert_pem)?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(&key, &two.key_pem)?;
    let swapped = Instant::now();
    while scrape(api, &[&two.ca_pem]).await.is_err() {
        assert!(
            swapped.elapsed() < Duration::from_secs(20),
            "the new certificate was not served within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = swapped.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let results = scraper.await?;
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    eprintln!(
        "the new certificate was served {took:?} after the swap; {} scrapes, {} failed",
        results.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "failed scrapes during the rotation: {failed:?}"
    );
    assert!(results.len() >= 10, "too few scrapes: {}", results.len());
    assert!(
        scrape(api, &[&one.ca_pem]).await.is_err(),
        "the old certificate is still served"
    );
    assert!(
        collector.running() && collector.pid() == pid,
        "the collector restarted"
    );
    Ok(())
}
