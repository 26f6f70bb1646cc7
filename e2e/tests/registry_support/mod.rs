//! Shared by the `registry_*` e2e suites: bounded waits on registry events, member
//! ServiceAccounts, and asking a member who we are.
#![allow(dead_code, reason = "each suite uses a different part")]

pub mod karmada;

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use cluster_registry::{MemberSpec, Registry, RegistryEvent};
use e2e::limits::HOUR;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use member_client::{ClientFactory, CredentialHealth, FailureKind};
use testkit::Cluster;
use tokio::sync::mpsc;

/// Long enough for a watch event on loopback many times over; short enough to fail fast.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// Waits (up to [`EVENT_TIMEOUT`]) for the next event and returns it.
pub async fn next_event(events: &mut mpsc::Receiver<RegistryEvent>) -> Result<RegistryEvent> {
    tokio::time::timeout(EVENT_TIMEOUT, events.recv())
        .await
        .context("no registry event within the timeout")?
        .context("the registry stopped")
}

/// Waits for the next event about `member` and returns it; events about other members are
/// skipped.
pub async fn next_event_of(
    events: &mut mpsc::Receiver<RegistryEvent>,
    member: &str,
) -> Result<RegistryEvent> {
    loop {
        let event = next_event(events).await?;
        if event.member() == member {
            return Ok(event);
        }
    }
}

/// Two ServiceAccounts (`agent-a`, `agent-b`) on `cluster` in a fresh namespace, bound to the
/// reader role, with a token each.
pub struct Agents {
    pub ns: String,
    pub token_a: String,
    pub token_b: String,
}

impl Agents {
    pub async fn create(cluster: &Cluster) -> Result<Self> {
        let ns = cluster.create_namespace("agents").await?;
        cluster.create_service_account(&ns, "agent-a").await?;
        cluster.create_service_account(&ns, "agent-b").await?;
        Ok(Self {
            token_a: cluster.mint_token(&ns, "agent-a", HOUR).await?,
            token_b: cluster.mint_token(&ns, "agent-b", HOUR).await?,
            ns,
        })
    }

    /// The username the member sees for `sa`.
    pub fn user(&self, sa: &str) -> String {
        format!("system:serviceaccount:{}:{sa}", self.ns)
    }
}

/// What the tests' loopback apiservers need: `127.0.0.1` allowed, `http://` still refused.
pub fn loopback_policy() -> member_client::validation::EndpointPolicy {
    member_client::validation::EndpointPolicy::default().allow(
        member_client::validation::Cidr::from_ip(std::net::Ipv4Addr::LOCALHOST.into()),
    )
}

/// Waits for the next event, which must be `Upserted`, and returns what it carries.
pub async fn next_upserted(
    events: &mut mpsc::Receiver<RegistryEvent>,
) -> Result<(MemberSpec, Option<Bytes>)> {
    match next_event(events).await? {
        RegistryEvent::Upserted { spec, ca_bundle } => Ok((spec, ca_bundle)),
        other => bail!("expected Upserted, got {other:?}"),
    }
}

/// Builds the member's client the way the collector does: from an `Upserted` event's spec and
/// CA bundle, with tokens from the registry's cache.
pub fn member_client(
    registry: &Registry,
    (spec, ca_bundle): &(MemberSpec, Option<Bytes>),
) -> Result<kube::Client> {
    let factory = ClientFactory::new(registry.tokens().clone()).with_policy(loopback_policy());
    let config = spec.client_config(ca_bundle.clone());
    Ok(factory.build(&config, &CredentialHealth::new())?)
}

/// Who the member says the client is (`SelfSubjectReview`).
pub async fn whoami(client: &kube::Client) -> Result<String> {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .context("SelfSubjectReview")?;
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .context("SelfSubjectReview without a username")
}

/// Lists namespaces through `client`; `Ok` or the failure's kind.
pub async fn list_namespaces(client: &kube::Client) -> Result<(), FailureKind> {
    Api::<Namespace>::all(client.clone())
        .list_metadata(&ListParams::default().limit(1))
        .await
        .map(|_| ())
        .map_err(|err| FailureKind::of(&err))
}

/// Expects `event` to be `Upserted` (a member usable again) and `client`, built before, to
/// work again.
pub async fn expect_usable_again(event: RegistryEvent, client: &kube::Client) -> Result<()> {
    ensure!(
        matches!(event, RegistryEvent::Upserted { .. }),
        "expected Upserted, got {event:?}"
    );
    list_namespaces(client)
        .await
        .map_err(|kind| anyhow::anyhow!("the client still fails: {kind:?}"))
}

/// Expects `event` to be `Invalid` for `member` with this condition reason.
pub fn expect_invalid(event: &RegistryEvent, member: &str, reason: &str) -> Result<()> {
    match event {
        RegistryEvent::Invalid { name, reason: r }
            if name == member && r.condition_reason() == reason =>
        {
            Ok(())
        }
        other => bail!("expected Invalid({member}, {reason}), got {other:?}"),
    }
}
