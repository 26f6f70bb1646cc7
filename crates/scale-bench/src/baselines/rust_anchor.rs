//! The Rust baselines' side of a baseline process (`rust-anchor`): Tether's member client over
//! its registry, or kube-rs with the token baked in, on every member of a [`FleetFile`], each
//! with a Deployment and a Node watch and a `SelfSubjectReview` every probe period, reported
//! as [`Observation`] lines on stdout, exactly as the Go anchors report theirs.

use std::{
    collections::BTreeSet,
    io::Write as _,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime},
};

use anyhow::Context as _;
use cluster_registry::{RegistryBuilder, RegistryEvent, karmada::TOKEN_KEY};
use futures::StreamExt as _;
use k8s_openapi::api::{
    apps::v1::Deployment,
    authentication::v1::SelfSubjectReview,
    core::v1::{Node, Secret},
};
use kube::{
    Api, Client, ResourceExt as _,
    api::PostParams,
    runtime::{WatchStreamExt as _, watcher},
};
use member_client::{ClientFactory, CredentialHealth, FailureKind, validation::EndpointPolicy};

use super::{
    fleet_file::{FleetFile, FleetMember},
    observation::{Event, Observation, unix_ms},
};

/// Which Rust client `rust-anchor` runs (its `--system`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RustSystem {
    /// Tether's member client over its registry.
    Tether,
    /// kube-rs with the token read once into its config.
    #[value(name = "bake-in")]
    BakedIn,
}

/// Prints an observation of `member`, one line; stdout is shared by every member's tasks.
fn emit(member: &str, event: Event) {
    let member = member.to_owned();
    if let Ok(line) = serde_json::to_string(&Observation { member, event }) {
        let mut out = std::io::stdout().lock();
        // A closed stdout means the bench is gone; nothing is left to report to.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

/// Runs `system` on every member of `fleet` until the process is stopped.
///
/// # Errors
/// The control plane unusable, or a member's client not buildable.
pub async fn run(system: RustSystem, fleet: FleetFile) -> anyhow::Result<()> {
    let control_plane = testkit::Cluster::with_admin_token(
        "control-plane",
        &fleet.control_plane.server,
        &fleet.control_plane.ca_pem,
        &fleet.control_plane.token,
    )?
    .admin_client()?;
    let period = Duration::from_millis(fleet.probe_period_millis.max(1));
    match system {
        RustSystem::BakedIn => {
            let mut tasks = Vec::new();
            let secrets = Api::<Secret>::namespaced(control_plane, &fleet.secret_namespace);
            for member in &fleet.members {
                let token = read_token_until_read(&secrets, &member.name).await;
                let client = baked_in_client(member, &token)?;
                tasks.push(tokio::spawn(probe(
                    member.name.clone(),
                    client,
                    fleet.clone(),
                    period,
                    None,
                )));
            }
            futures::future::join_all(tasks).await;
        }
        RustSystem::Tether => {
            let (registry, mut events, driver) = RegistryBuilder::new()
                .endpoint_policy(EndpointPolicy::loopback())
                .karmada(control_plane)
                .build();
            let _driver = tokio::spawn(driver.run());
            let factory = ClientFactory::new(registry.tokens().clone())
                .with_policy(EndpointPolicy::loopback());
            if let Some(first) = fleet.members.first() {
                tokio::spawn(report_fetches(
                    registry.tokens().clone(),
                    first.name.clone(),
                ));
            }
            let wanted: BTreeSet<&str> = fleet.members.iter().map(|m| m.name.as_str()).collect();
            let mut started = BTreeSet::new();
            // The registry's events are read for the life of the process; each wanted member's
            // client is built from its first Upserted, which carries its CA bundle.
            while let Some(event) = events.recv().await {
                let RegistryEvent::Upserted { spec, ca_bundle } = event else {
                    continue;
                };
                if !wanted.contains(spec.name.as_str()) || !started.insert(spec.name.clone()) {
                    continue;
                }
                let health = CredentialHealth::new();
                let client = factory.build(&spec.client_config(ca_bundle), &health)?;
                tokio::spawn(probe(
                    spec.name.clone(),
                    client,
                    fleet.clone(),
                    period,
                    Some(health),
                ));
            }
        }
    }
    Ok(())
}

/// Reports the shared token cache's fetches (from the registry's in-memory Secret store, no
/// API call) as Secret reads of `member`: the bench sums reads over members.
async fn report_fetches(tokens: member_client::CredentialCache, member: String) {
    let mut seen = tokens.stats().fetches;
    let mut ticker = tokio::time::interval(Duration::from_millis(200));
    loop {
        ticker.tick().await;
        let now = tokens.stats().fetches;
        for _ in seen..now {
            emit(&member, Event::SecretRead);
        }
        seen = now;
    }
}

/// Reads the member's token, once a second until it can (a bench must not fail on the order in
/// which the control plane's objects appear); the bench stops the process if it never can.
async fn read_token_until_read(secrets: &Api<Secret>, name: &str) -> String {
    loop {
        emit(name, Event::SecretRead);
        match read_token(secrets, name).await {
            Ok(token) => return token,
            Err(err) => {
                tracing::warn!(member = name, error = %format!("{err:#}"), "no token yet; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

async fn read_token(secrets: &Api<Secret>, name: &str) -> anyhow::Result<String> {
    let secret = secrets
        .get(name)
        .await
        .with_context(|| format!("reading the Secret of {name}"))?;
    let token = secret
        .data
        .and_then(|mut d| d.remove(TOKEN_KEY))
        .with_context(|| format!("the Secret of {name} has no token"))?;
    Ok(String::from_utf8(token.0)?.trim().to_owned())
}

/// A client for `member` with `token` fixed in its `kube::Config`: the harness's own helper
/// builds exactly that config (CA roots, connect timeout, the token).
fn baked_in_client(member: &FleetMember, token: &str) -> anyhow::Result<Client> {
    testkit::Cluster::with_admin_token(&member.name, &member.server, &member.ca_pem, token)?
        .admin_client()
}

/// One member's watches and reviews, reported until the process stops. With `health`
/// (Tether), 401s are the member client's own count of 401 responses, which its retry hides
/// from callers; without it, the 401s callers saw.
async fn probe(
    member: String,
    client: Client,
    fleet: FleetFile,
    period: Duration,
    health: Option<CredentialHealth>,
) {
    let count_errors = health.is_none();
    let synced = Arc::new(AtomicUsize::new(0));
    let canary = fleet.canary.clone();
    let mut last_ready = None;
    let on_deployment = {
        let member = member.clone();
        move |deployment: &Deployment| {
            if deployment.name_any() != canary {
                return;
            }
            let ready = deployment
                .status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0);
            if last_ready != Some(ready) {
                last_ready = Some(ready);
                emit(&member, Event::Canary { ready });
            }
        }
    };
    // Both watches stop with the probe, when the set is dropped.
    let mut watches = tokio::task::JoinSet::new();
    let watched = |resource| Watched {
        member: member.clone(),
        resource,
        synced: Arc::clone(&synced),
        count_errors,
    };
    watches.spawn(watch(
        Api::<Deployment>::namespaced(client.clone(), &fleet.namespace),
        watched("deployments"),
        on_deployment,
    ));
    let nodes = Api::<Node>::all(client.clone());
    watches.spawn(watch(nodes, watched("nodes"), |_: &Node| {}));

    let reviews = Api::<SelfSubjectReview>::all(client);
    let mut last_user: Option<String> = None;
    let mut seen_401 = health
        .as_ref()
        .map_or(0, |h| h.stats().unauthorized_responses);
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let sent = SystemTime::now();
        match reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
        {
            Ok(review) => {
                let user = review
                    .status
                    .and_then(|s| s.user_info)
                    .and_then(|u| u.username)
                    .unwrap_or_default();
                if last_user.as_deref() != Some(user.as_str()) {
                    let sent_ms = unix_ms(sent);
                    emit(
                        &member,
                        Event::User {
                            user: user.clone(),
                            sent_ms,
                        },
                    );
                    last_user = Some(user);
                }
            }
            Err(err) if count_errors && FailureKind::of(&err) == FailureKind::Unauthorized => {
                unauthorized(&member);
            }
            Err(_) => {}
        }
        if let Some(health) = &health {
            let now = health.stats().unauthorized_responses;
            for _ in seen_401..now {
                unauthorized(&member);
            }
            seen_401 = now;
        }
    }
}

fn unauthorized(member: &str) {
    let at_ms = unix_ms(SystemTime::now());
    emit(member, Event::Unauthorized { at_ms });
}

/// What a watch reports about itself.
struct Watched {
    member: String,
    resource: &'static str,
    /// Watches of the member that have synced once; `Synced` goes out when both have.
    synced: Arc<AtomicUsize>,
    count_errors: bool,
}

/// Watches `api`, reporting each (re)list, the first sync, and 401s; `on_object` sees every
/// object the watch delivers.
async fn watch<K>(api: Api<K>, watched: Watched, mut on_object: impl FnMut(&K))
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut first_sync = true;
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => {
                let resource = watched.resource.to_owned();
                emit(&watched.member, Event::List { resource });
            }
            Ok(watcher::Event::InitDone) => {
                if std::mem::take(&mut first_sync)
                    && watched.synced.fetch_add(1, Ordering::SeqCst) + 1 == 2
                {
                    emit(&watched.member, Event::Synced);
                }
            }
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                on_object(&object);
            }
            Ok(watcher::Event::Delete(_)) => {}
            Err(
                watcher::Error::InitialListFailed(err)
                | watcher::Error::WatchStartFailed(err)
                | watcher::Error::WatchFailed(err),
            ) if watched.count_errors && FailureKind::of(&err) == FailureKind::Unauthorized => {
                unauthorized(&watched.member);
            }
            Err(_) => {}
        }
    }
}
