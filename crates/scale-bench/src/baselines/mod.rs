//! The anchors: the same members, the same apiservers, the same run, with the credential
//! handling of other systems ([`models`]) beside Tether's.
//!
//! On a subset of members that share one member apiserver, every model gets a client per
//! member, and each client runs what a controller runs: a Deployment watch (a reflector) and a
//! request every `probe_period` (a `SelfSubjectReview`, whose answer names the ServiceAccount the
//! token belongs to, so each request shows which token it carried). Then:
//! 1. steady state for `window`: Secret reads per second of each model;
//! 2. rotation: each member's Secret gets a token of a new ServiceAccount and the old
//!    ServiceAccount is deleted (as in the mass rotation); per member, the time from the write's
//!    acknowledgement to the first request that carried the new token, and the requests that
//!    failed with 401 until every model has switched (or `limit`);
//! 3. one forced reconnect: the apiserver restarts, a Deployment's status changes, and
//!    `blind_after` later the members whose watch has not seen the change are counted as blind.

pub mod models;
mod probe;

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use anyhow::Context as _;
use cluster_registry::{RegistryBuilder, RegistryEvent};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, api::PostParams};
use member_client::{ClientFactory, CredentialHealth, EndpointPolicy};
use testkit::RestartOptions;

use crate::scale::{
    fleet::{Fleet, Member, SECRET_NAMESPACE},
    percentiles::Percentiles,
};
use models::{Model, ModelAuthLayer, SecretReader, TTL};
use probe::{Probe, lock, start_probe};

/// The canary Deployment whose status change the watches must see after the restart.
const CANARY: &str = "canary";

/// Knobs of the baseline run.
#[derive(Clone, Debug)]
pub struct BaselineOptions {
    /// Members in the subset (all on one apiserver).
    pub members: usize,
    /// Period of each client's request.
    pub probe_period: Duration,
    /// Steady-state window for Secret reads.
    pub window: Duration,
    /// How long after the restart blindness is counted.
    pub blind_after: Duration,
    /// Give up waiting for syncs and switches after this long.
    pub limit: Duration,
}

/// What one model did.
#[derive(Clone, Debug, Default)]
pub struct ModelReport {
    /// Secret reads per second at steady state (Tether: token-cache fetches from the registry's
    /// in-memory store, which cost no API call).
    pub reads_per_second: f64,
    /// Secret write acknowledged → first request with the new token, per member that switched.
    pub rotation_to_use: Percentiles,
    /// Members whose requests never carried the new token before the bench stopped looking.
    pub never_switched: usize,
    /// Requests and watch calls that failed with 401 from the rotation to the end.
    pub failed_401: u64,
    /// Members whose watch had not seen the post-restart change `blind_after` later.
    pub blind: usize,
}

/// What the baseline run measured.
#[derive(Clone, Debug)]
pub struct BaselineReport {
    /// Members in the subset.
    pub members: usize,
    /// The options it ran with.
    pub options: BaselineOptions,
    /// Per model.
    pub models: BTreeMap<Model, ModelReport>,
    /// Rotation start → every old token rejected.
    pub revoked_after: Duration,
}

/// Runs the baselines on the first `options.members` members served by `member1`'s apiserver
/// (so that one restart reconnects them all).
///
/// # Errors
/// API errors, or syncs and revocations not done within `options.limit`.
pub async fn run(fleet: &mut Fleet, options: &BaselineOptions) -> anyhow::Result<BaselineReport> {
    let server_index = fleet.members.first().map_or(0, |m| m.apiserver);
    let subset: Vec<Member> = fleet
        .members
        .iter()
        .filter(|m| m.apiserver == server_index)
        .take(options.members)
        .cloned()
        .collect();
    anyhow::ensure!(!subset.is_empty(), "no members for the baselines");
    let server = &fleet.apiservers[server_index];
    let (endpoint, ca_pem, namespace) = (
        server.endpoint.clone(),
        server.ca_pem.clone(),
        server.namespace.clone(),
    );
    let admin = server.admin.clone();

    // The canary, ready=1.
    Api::<Deployment>::namespaced(admin.clone(), &namespace)
        .create(
            &PostParams::default(),
            &testkit::deployment(&namespace, CANARY, 3),
        )
        .await
        .context("creating the canary Deployment")?;
    testkit::set_deployment_status(&admin, &namespace, CANARY, 1).await?;

    // Tether: the registry over the control plane, its token cache, the collector's factory.
    let (registry, mut events, driver) = RegistryBuilder::new()
        .endpoint_policy(EndpointPolicy::loopback())
        .karmada(fleet.control_plane.clone())
        .build();
    let driver = AbortOnDrop(tokio::spawn(driver.run()));
    let factory =
        ClientFactory::new(registry.tokens().clone()).with_policy(EndpointPolicy::loopback());
    // Each member's client config, from its Upserted event (which carries the CA bundle).
    let mut configs = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + options.limit;
    while subset.iter().any(|m| !configs.contains_key(&m.name)) {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .context("the registry never saw every member")?
            .context("the registry stopped")?;
        if let RegistryEvent::Upserted { spec, ca_bundle } = event {
            configs.insert(spec.name.clone(), spec.client_config(ca_bundle));
        }
    }
    let _drain = AbortOnDrop(tokio::spawn(async move {
        while events.recv().await.is_some() {}
    }));

    let reads: BTreeMap<Model, Arc<AtomicU64>> = Model::ALL
        .iter()
        .map(|m| (*m, Arc::new(AtomicU64::new(0))))
        .collect();
    let next = subset[0].generation + 1;
    let mut probes = Vec::new();
    for member in &subset {
        let reader = |model: Model| {
            SecretReader::new(
                fleet.control_plane.clone(),
                SECRET_NAMESPACE,
                &member.name,
                Arc::clone(&reads[&model]),
            )
        };
        for model in Model::ALL {
            let client = match model {
                Model::BakedIn => {
                    let token = reader(model).read().await?;
                    models::baked_in_client(&endpoint, &ca_pem, &token)?
                }
                Model::TtlOnly => models::layered_client(
                    &endpoint,
                    &ca_pem,
                    &ModelAuthLayer::ttl(reader(model), TTL),
                )?,
                Model::EveryRequest => models::layered_client(
                    &endpoint,
                    &ca_pem,
                    &ModelAuthLayer::every_request(reader(model)),
                )?,
                Model::Tether => {
                    let config = configs
                        .get(&member.name)
                        .with_context(|| format!("no Upserted for {}", member.name))?;
                    factory.build(config, &CredentialHealth::new())?
                }
            };
            probes.push(start_probe(
                model,
                member,
                &namespace,
                next,
                client,
                options.probe_period,
            ));
        }
    }

    // Every watch synced (sees the canary).
    let deadline = Instant::now() + options.limit;
    while probes.iter().any(|p| p.canary_ready() != Some(1)) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the baseline watches did not sync"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 1. Steady state.
    let reads_at = |reads: &BTreeMap<Model, Arc<AtomicU64>>| -> BTreeMap<Model, u64> {
        let mut now: BTreeMap<Model, u64> = reads
            .iter()
            .map(|(m, r)| (*m, r.load(Ordering::Relaxed)))
            .collect();
        now.insert(Model::Tether, registry.tokens().stats().fetches);
        now
    };
    let before = reads_at(&reads);
    let started = Instant::now();
    tokio::time::sleep(options.window).await;
    let after = reads_at(&reads);
    let seconds = started.elapsed().as_secs_f64();
    let mut report: BTreeMap<Model, ModelReport> = Model::ALL
        .iter()
        .map(|m| {
            let delta = after[m].saturating_sub(before[m]) as f64;
            (
                *m,
                ModelReport {
                    reads_per_second: delta / seconds,
                    ..ModelReport::default()
                },
            )
        })
        .collect();

    // 2. Rotation: new ServiceAccounts, tokens, Secrets; old ServiceAccounts deleted.
    let f: &Fleet = fleet;
    f.bounded(subset.iter(), |m| f.create_service_account(m, next))
        .await?;
    let tokens = f.bounded(subset.iter(), |m| f.mint(m, next)).await?;
    for probe in &probes {
        probe.failed_401.store(0, Ordering::Relaxed);
    }
    let rotation = Instant::now();
    let acks = f
        .bounded(subset.iter().zip(&tokens), |(m, t)| f.write_token(m, t))
        .await?;
    let acked: BTreeMap<&str, SystemTime> =
        subset.iter().map(|m| m.name.as_str()).zip(acks).collect();
    for probe in &mut probes {
        probe.acked = acked.get(probe.member.as_str()).copied();
    }
    f.bounded(subset.iter(), |m| f.delete_service_account(m, m.generation))
        .await?;
    f.wait_until_rejected(subset.iter(), rotation + options.limit)
        .await
        .context("revoking the old tokens")?;
    let revoked_after = rotation.elapsed();
    // Until every model but the baked-in one has switched, or the limit.
    let switched = |p: &Probe| lock(&p.first_new).is_some();
    while probes
        .iter()
        .any(|p| p.model != Model::BakedIn && !switched(p))
        && rotation.elapsed() < options.limit
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // At least two more requests per client after the revocation.
    tokio::time::sleep(options.probe_period * 2).await;

    // 3. One forced reconnect, then a change every watch should see.
    fleet
        .env
        .restart(
            fleet.apiservers[server_index].env_index,
            RestartOptions::default(),
        )
        .await
        .context("restarting the member apiserver")?;
    let admin = fleet
        .env
        .cluster(fleet.apiservers[server_index].env_index)
        .admin_client()?;
    let changed = Instant::now();
    loop {
        match testkit::set_deployment_status(&admin, &namespace, CANARY, 3).await {
            Ok(_) => break,
            Err(err) if changed.elapsed() < options.limit => {
                tracing::debug!(error = %err, "canary update failed; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => return Err(err),
        }
    }
    tokio::time::sleep(options.blind_after).await;

    for model in Model::ALL {
        let of_model: Vec<&Probe> = probes.iter().filter(|p| p.model == model).collect();
        let entry = report.entry(model).or_default();
        entry.rotation_to_use = Percentiles::of(of_model.iter().filter_map(|p| {
            let used = (*lock(&p.first_new))?;
            Some(used.duration_since(p.acked?).unwrap_or(Duration::ZERO))
        }));
        entry.never_switched = of_model.iter().filter(|p| !switched(p)).count();
        entry.failed_401 = of_model
            .iter()
            .map(|p| p.failed_401.load(Ordering::Relaxed))
            .sum();
        entry.blind = of_model
            .iter()
            .filter(|p| p.canary_ready() != Some(3))
            .count();
    }
    drop(probes);
    drop(driver);
    for (member, token) in fleet
        .members
        .iter_mut()
        .filter(|m| subset.iter().any(|s| s.n == m.n))
        .zip(tokens)
    {
        member.generation = next;
        member.token = token;
    }
    Ok(BaselineReport {
        members: subset.len(),
        options: options.clone(),
        models: report,
        revoked_after,
    })
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
