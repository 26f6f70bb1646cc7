//! Measures rotation-to-use latency against real apiservers (the testkit harness): how long
//! after a member's Secret is updated on the control plane the first request to the member
//! carries the new token.
//!
//! ```sh
//! cargo run -p tether-cluster-registry --example rotation_latency            # 50 rotations
//! cargo run -p tether-cluster-registry --example rotation_latency -- 200     # or another count
//! ```
//!
//! Each rotation writes a freshly minted token of the *other* ServiceAccount (`agent-a` ↔
//! `agent-b`) into the Karmada Secret. The clock starts when the write returns (the control
//! plane has acknowledged it). The member client then sends `SelfSubjectReview`s back to
//! back; the first whose answer names the new ServiceAccount carried the new token. Reported:
//! - **used**: clock start → that request was sent;
//! - **confirmed**: clock start → its answer arrived;
//! - **event**: clock start → the registry's `CredentialsRotated` was received (the cache was
//!   invalidated just before). Zero when it came before the write returned, which is common:
//!   the apiserver fans the watch event out while it answers the write;
//! - **event since write sent**: the same, timed from when the write was sent.
//!
//! Needs the kube-apiserver and etcd binaries, as the e2e tests do (`hack/envtest.sh`).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cluster_registry::{RegistryBuilder, RegistryEvent};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, PostParams};
use member_client::{ClientFactory, CredentialHealth, validation::EndpointPolicy};
use testkit::{
    Environment,
    karmada::{Karmada, PushMember},
};

const HOUR: Duration = Duration::from_secs(3600);
/// A rotation that takes longer than this is a failure, not a slow sample.
const GIVE_UP: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> Result<()> {
    let rotations: usize = match std::env::args().nth(1) {
        Some(n) => n
            .parse()
            .context("the argument is the number of rotations")?,
        None => 50,
    };
    let env = Environment::with_members(1).await?;
    let (cp, member) = (env.control_plane(), env.cluster(1));

    // Control plane: Karmada, with the member registered. Member: two ServiceAccounts.
    let karmada = Karmada::install(cp).await?;
    let agents_ns = member.create_namespace("agents").await?;
    for sa in ["agent-a", "agent-b"] {
        member.create_service_account(&agents_ns, sa).await?;
    }
    let first = member.mint_token(&agents_ns, "agent-a", HOUR).await?;
    karmada.register(&PushMember::of(member, &first)).await?;

    // The registry, and a member client built the way the collector builds it.
    let (registry, mut events, driver) = RegistryBuilder::new()
        .endpoint_policy(EndpointPolicy::loopback())
        .karmada(karmada.client().clone())
        .build();
    let driver = tokio::spawn(driver.run());
    let config = match tokio::time::timeout(GIVE_UP, events.recv()).await? {
        Some(RegistryEvent::Upserted { spec, ca_bundle }) => spec.client_config(ca_bundle),
        other => bail!("expected Upserted, got {other:?}"),
    };
    let client = ClientFactory::new(registry.tokens().clone())
        .with_policy(EndpointPolicy::loopback())
        .build(&config, &CredentialHealth::new())?;
    let (tx, mut rotated_at) = tokio::sync::mpsc::unbounded_channel();
    let drain = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if matches!(event, RegistryEvent::CredentialsRotated { .. }) {
                let _ = tx.send(Instant::now());
            }
        }
    });
    anyhow::ensure!(
        whoami(&client).await? == format!("system:serviceaccount:{agents_ns}:agent-a"),
        "the first token authenticates as agent-a"
    );

    let (mut used, mut confirmed, mut event) = (Vec::new(), Vec::new(), Vec::new());
    let mut event_since_write = Vec::new();
    for i in 0..rotations {
        let sa = if i % 2 == 0 { "agent-b" } else { "agent-a" };
        let want = format!("system:serviceaccount:{agents_ns}:{sa}");
        let token = member.mint_token(&agents_ns, sa, HOUR).await?;
        let write = Instant::now();
        (karmada.write_secret(member.name(), &token, member.ca_pem())).await?;
        let start = Instant::now();
        loop {
            let sent = Instant::now();
            let user = whoami(&client).await?;
            if user == want {
                used.push(sent.saturating_duration_since(start));
                confirmed.push(start.elapsed());
                break;
            }
            if start.elapsed() > GIVE_UP {
                bail!("rotation {i}: still {user} after {GIVE_UP:?}");
            }
        }
        let at = tokio::time::timeout(GIVE_UP, rotated_at.recv())
            .await?
            .context("the registry stopped")?;
        event.push(at.saturating_duration_since(start));
        event_since_write.push(at.saturating_duration_since(write));
    }

    println!(
        "rotation-to-use latency over {rotations} rotations (Karmada Secret write → member request)"
    );
    report("used (request with the new token sent)", &mut used);
    report("confirmed (its answer received)", &mut confirmed);
    report("event (CredentialsRotated received)", &mut event);
    report("event since write sent", &mut event_since_write);
    let stats = registry.tokens().stats();
    println!(
        "token cache: {} fetches, {} invalidations, {} hits, {} misses",
        stats.fetches, stats.invalidations, stats.hits, stats.misses
    );
    drain.abort();
    driver.abort();
    Ok(())
}

async fn whoami(client: &kube::Client) -> Result<String> {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .context("SelfSubjectReview without a username")
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let pick = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i]
    };
    if samples.is_empty() {
        return;
    }
    println!(
        "  {what:<40} p50 {:>8.1?}  p99 {:>8.1?}  max {:>8.1?}",
        pick(0.50),
        pick(0.99),
        samples[samples.len() - 1]
    );
}
