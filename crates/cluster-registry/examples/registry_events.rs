//! The registry's events keeping a map of member clients: one client per member, built when
//! the member appears, kept through credential rotations, dropped when the member goes.
//!
//! The program reads Karmada `Cluster`s (and the Secrets they reference) from the control plane
//! and, per event, asks the member who its client is, until SIGTERM or Ctrl-C.
//!
//! ```sh
//! KUBECONFIG=control-plane.kubeconfig cargo run -p tether-cluster-registry --example registry_events
//! ```
//!
//! `ALLOW_ENDPOINT` (a CIDR) lets members have addresses the default policy refuses, such as
//! loopback. It prints one line per event, `upserted <member> as <user> (<n> members)`,
//! `rotated <member>: now <user>`, `removed <member> (<n> members)` or
//! `invalid <member>: <reason>` (or `skipped <member>: <error>` when no client can be built for
//! it), and at the end `members: <names>; <m> failed requests`; it exits non-zero if a request
//! failed.

use std::collections::BTreeMap;

use anyhow::Context as _;
use cluster_registry::{RegistryBuilder, RegistryEvent};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::{Api, Client, api::PostParams};
use member_client::{ClientFactory, CredentialHealth, validation::EndpointPolicy};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let policy = endpoint_policy()?;
    // ANCHOR: registry
    let control_plane = Client::try_default().await?;
    let (registry, mut events, driver) = RegistryBuilder::new()
        .endpoint_policy(policy.clone())
        .karmada(control_plane)
        .build();
    // Every client reads its credential from the registry's cache, which the Secret watches
    // keep current: a rotation needs no new client.
    let factory = ClientFactory::new(registry.tokens().clone()).with_policy(policy);
    // ANCHOR_END: registry
    let mut driver = tokio::spawn(driver.run());
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);

    // ANCHOR: events
    let mut members = BTreeMap::<String, Client>::new();
    let mut failed = 0;
    loop {
        let event = tokio::select! {
            signalled = &mut shutdown => break signalled?,
            ended = &mut driver => anyhow::bail!("the registry stopped: {ended:?}"),
            event = events.recv() => event.context("the registry stopped")?,
        };
        let name = event.member().to_owned();
        match event {
            RegistryEvent::Upserted { spec, ca_bundle } => {
                let config = spec.client_config(ca_bundle);
                match factory.build(&config, &CredentialHealth::new()) {
                    Ok(client) => members.insert(name.clone(), client),
                    Err(err) => {
                        println!("skipped {name}: {err}");
                        continue;
                    }
                };
                let user = whoami(&members[&name]).await;
                println!(
                    "upserted {name} as {} ({} members)",
                    shown(user, &mut failed),
                    members.len()
                );
            }
            RegistryEvent::CredentialsRotated { .. } => {
                // The same client as before: its next request carries the new token.
                if let Some(client) = members.get(&name) {
                    println!(
                        "rotated {name}: now {}",
                        shown(whoami(client).await, &mut failed)
                    );
                }
            }
            RegistryEvent::Removed(_) => {
                members.remove(&name);
                println!("removed {name} ({} members)", members.len());
            }
            RegistryEvent::Invalid { reason, .. } => {
                members.remove(&name);
                println!("invalid {name}: {reason:?}");
            }
            // The enum is `non_exhaustive`: a later version may say more.
            _ => {}
        }
    }
    // ANCHOR_END: events
    let names: Vec<&String> = members.keys().collect();
    println!("members: {names:?}; {failed} failed requests");
    anyhow::ensure!(failed == 0, "{failed} requests failed");
    Ok(())
}

/// Who the member says the client is (a `SelfSubjectReview`, which every user may create).
async fn whoami(client: &Client) -> kube::Result<String> {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    let user = review.status.and_then(|s| s.user_info?.username);
    Ok(user.unwrap_or_default())
}

/// The user, or the failure (counted in `failed`).
fn shown(user: kube::Result<String>, failed: &mut u32) -> String {
    user.unwrap_or_else(|err| {
        *failed += 1;
        format!("<request failed: {err}>")
    })
}

/// The default endpoint policy, plus the range in `ALLOW_ENDPOINT` if it is set.
fn endpoint_policy() -> anyhow::Result<EndpointPolicy> {
    Ok(match std::env::var("ALLOW_ENDPOINT") {
        Ok(range) => EndpointPolicy::default().allow(range.parse()?),
        Err(_) => EndpointPolicy::default(),
    })
}

/// SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => Ok(()),
        pressed = tokio::signal::ctrl_c() => pressed,
    }
}
