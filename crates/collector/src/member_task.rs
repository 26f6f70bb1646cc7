//! One member's life in the collector: its watches, its probe, its status.

use std::{sync::Arc, time::Duration};

use kube::Client;
use member_client::CredentialHealth;
use tokio::{
    sync::Notify,
    time::{Instant, MissedTickBehavior},
};

use crate::{
    informers, member_health::MemberHealth, metrics::Metrics, mirror::Mirror,
    mirrored_resource::MirroredResource, status_writer::StatusWriter,
};

/// What every member task shares.
#[derive(Clone)]
pub struct Shared {
    /// The multi-cluster cache.
    pub mirror: Mirror,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// Writes status back; `None` when write-back is off or members have no `Cluster` object.
    pub status_writer: Option<StatusWriter>,
    /// How often `/readyz` of each member is probed.
    pub probe_period: Duration,
    /// The kinds mirrored from every member.
    pub resources: Arc<[MirroredResource]>,
}

/// A running member; dropping it stops its probe and watches.
pub struct MemberTask {
    task: tokio::task::JoinHandle<()>,
    rotated: Arc<Notify>,
}

impl Drop for MemberTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MemberTask {
    /// Starts watching and probing `member` through `client`, whose credential reports to
    /// `health`; `replacing` says an earlier client of the same member was just stopped.
    pub fn start(
        member: String,
        client: Client,
        health: CredentialHealth,
        shared: Shared,
        replacing: bool,
    ) -> Self {
        let rotated = Arc::new(Notify::new());
        Self {
            task: tokio::spawn(run(
                member,
                client,
                health,
                shared,
                replacing,
                rotated.clone(),
            )),
            rotated,
        }
    }

    /// The member's token was just rotated: probe now, and record in
    /// `tether_rotation_to_use_seconds` how long until a request with the new token succeeded.
    pub fn credentials_rotated(&self) {
        self.rotated.notify_one();
    }
}

async fn run(
    member: String,
    client: Client,
    health: CredentialHealth,
    shared: Shared,
    replacing: bool,
    rotated: Arc<Notify>,
) {
    let (stores, _informers) = informers::start(
        &member,
        &client,
        &shared.resources,
        &shared.metrics,
        replacing,
    );
    shared.mirror.set_stores(&member, stores);
    shared.metrics.watch_member(&member, health.clone());
    let mut credential_changes = health.subscribe();
    let mut written_as_leader = false;
    let mut ticker = tokio::time::interval(shared.probe_period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        // Probe on schedule, and at once when a request learns the credential changed state:
        // a rejected credential shows in the conditions without waiting for the next tick.
        let mut rotation = None;
        tokio::select! {
            _ = ticker.tick() => {}
            changed = credential_changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = rotated.notified() => rotation = Some(Instant::now()),
        }
        probe_once(&member, &client, &shared, &mut written_as_leader).await;
        // The cache was invalidated before the rotation was announced, so this probe carried
        // the new token; if it was accepted, that is the rotation's first use.
        if let Some(noticed) = rotation
            && shared
                .mirror
                .status(&member)
                .is_some_and(|s| *s.health() == MemberHealth::Healthy)
        {
            shared.metrics.observe_rotation_to_use(noticed.elapsed());
        }
    }
}

/// Probes `/readyz`, updates the mirror and metrics, and writes status and an Event on change.
/// `written_as_leader` remembers whether this task has written since it last became leader.
pub async fn probe_once(
    member: &str,
    client: &Client,
    shared: &Shared,
    written_as_leader: &mut bool,
) {
    let health = probe(client).await;
    // The version rarely changes; asking once per client halves the steady-state load.
    let known_version = shared
        .mirror
        .status(member)
        .is_some_and(|s| s.kubernetes_version().is_some());
    let version = if health == MemberHealth::Healthy && !known_version {
        client
            .apiserver_version()
            .await
            .ok()
            .map(|info| info.git_version)
    } else {
        None
    };
    let nodes = shared.mirror.node_summary(member);
    let before = shared.mirror.status(member);
    let after = shared.mirror.update_status(member, |status| {
        status.set_health(health.clone());
        if let Some(version) = version {
            status.set_kubernetes_version(version);
        }
        if let Some((total, ready)) = nodes {
            status.set_nodes(total, ready);
        }
    });
    shared
        .metrics
        .set_member_ready(member, health == MemberHealth::Healthy);

    let previous = before
        .as_ref()
        .map_or(MemberHealth::Unknown, |s| s.health().clone());
    let changed = previous != health;
    if changed {
        match &health {
            MemberHealth::Healthy => tracing::info!(member, "member is ready"),
            other => {
                tracing::warn!(member, reason = other.reason(), message = %other.message(), "member is not ready")
            }
        }
    }
    let Some(writer) = &shared.status_writer else {
        return;
    };
    if !writer.is_leader() {
        *written_as_leader = false;
        return;
    }
    // A replica that just became leader writes what it sees even if nothing changed since:
    // the previous leader may have died before writing the last transition.
    let first_as_leader = !*written_as_leader;
    let status_changed = first_as_leader
        || before.as_ref().is_none_or(|b| {
            changed
                || b.kubernetes_version() != after.kubernetes_version()
                || b.nodes() != after.nodes()
        });
    if status_changed {
        *written_as_leader = writer
            .publish(member, &after, &previous, first_as_leader)
            .await;
    }
}

async fn probe(client: &Client) -> MemberHealth {
    let request = http::Request::get("/readyz").body(Vec::new());
    let Ok(request) = request else {
        return MemberHealth::Unreachable("could not build the /readyz request".to_owned());
    };
    match client.request_text(request).await {
        Ok(_) => MemberHealth::Healthy,
        Err(err) => MemberHealth::from_error(&err),
    }
}
