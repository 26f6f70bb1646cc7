//! One member's life in the collector: its watches, its probe, and the status it owns.

use std::{sync::Arc, time::Duration};

use kube::Client;
use member_client::CredentialHealth;
use tokio::{
    sync::Notify,
    time::{Instant, MissedTickBehavior},
};

use super::{
    health::MemberHealth,
    informers::{self, MemberStores},
    status::MemberStatus,
    status_writer::StatusWriter,
};
use crate::{
    metrics::Metrics,
    mirror::{Mirror, MirroredResource},
};

/// What every member task works with: where it publishes, and how it probes and mirrors.
#[derive(Clone)]
pub(crate) struct MemberContext {
    /// Where each member's status and stores are published for the read API.
    pub(crate) mirror: Mirror,
    /// Prometheus metrics.
    pub(crate) metrics: Metrics,
    /// Writes status back; `None` when write-back is off or members have no `Cluster` object.
    pub(crate) status_writer: Option<StatusWriter>,
    /// How often `/readyz` of each member is probed.
    pub(crate) probe_period: Duration,
    /// The kinds mirrored from every member.
    pub(crate) resources: Arc<[MirroredResource]>,
}

/// A running member; dropping it stops its probe and watches.
pub(crate) struct MemberTask {
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
    /// `health`. The task goes on from the member's `previous` status, so that a rebuilt
    /// client is no transition; `replacing` says an earlier client was just stopped, whose
    /// watches the new ones relist.
    pub(crate) fn start(
        member: String,
        client: Client,
        health: CredentialHealth,
        context: MemberContext,
        previous: Option<MemberStatus>,
        replacing: bool,
    ) -> Self {
        let rotated = Arc::new(Notify::new());
        let (stores, informers) = informers::start(
            &member,
            &client,
            &context.resources,
            &context.metrics,
            replacing,
        );
        context.mirror.set_stores(&member, stores.clone());
        context.metrics.watch_member(&member, health.clone());
        let prober = Prober {
            status: previous.unwrap_or_default(),
            member,
            client,
            context,
            stores,
            written_as_leader: false,
        };
        let notified = rotated.clone();
        let task = tokio::spawn(async move {
            let _informers = informers;
            prober.run(health, notified).await;
        });
        Self { task, rotated }
    }

    /// The member's token was just rotated: probe now, and record in
    /// `tether_rotation_to_use_seconds` how long until a request with the new token succeeded.
    pub(crate) fn credentials_rotated(&self) {
        self.rotated.notify_one();
    }
}

/// The probing half of a member task, and the owner of the member's status.
struct Prober {
    member: String,
    client: Client,
    context: MemberContext,
    stores: MemberStores,
    status: MemberStatus,
    /// Whether this task has written since this replica last became leader.
    written_as_leader: bool,
}

impl Prober {
    async fn run(mut self, health: CredentialHealth, rotated: Arc<Notify>) {
        let mut credential_changes = health.subscribe();
        let mut ticker = tokio::time::interval(self.context.probe_period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // Probe on schedule, and at once when a request learns the credential changed
            // state: a rejected credential shows in the conditions without waiting a tick.
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
            self.probe_once().await;
            // The cache was invalidated before the rotation was announced, so this probe
            // carried the new token; if it was accepted, that is the rotation's first use.
            if let Some(noticed) = rotation
                && *self.status.health() == MemberHealth::Healthy
            {
                self.context
                    .metrics
                    .observe_rotation_to_use(noticed.elapsed());
            }
        }
    }

    /// Probes `/readyz`, publishes the status and metrics, and writes status and an Event on
    /// change.
    async fn probe_once(&mut self) {
        let health = probe(&self.client).await;
        // The version rarely changes; asking once per client halves the steady-state load.
        let version =
            if health == MemberHealth::Healthy && self.status.kubernetes_version().is_none() {
                self.client
                    .apiserver_version()
                    .await
                    .ok()
                    .map(|info| info.git_version)
            } else {
                None
            };
        let before = self.status.clone();
        self.status.set_health(health);
        if let Some(version) = version {
            self.status.set_kubernetes_version(version);
        }
        let (total, ready) = informers::node_summary(&self.stores.nodes);
        self.status.set_nodes(total, ready);
        let member = self.member.as_str();
        self.context.mirror.publish(member, self.status.clone());
        let healthy = *self.status.health() == MemberHealth::Healthy;
        self.context.metrics.set_member_ready(member, healthy);

        let changed = before.health() != self.status.health();
        if changed {
            match self.status.health() {
                MemberHealth::Healthy => tracing::info!(member, "member is ready"),
                other => {
                    tracing::warn!(member, reason = other.reason(), message = %other.message(), "member is not ready")
                }
            }
        }
        let Some(writer) = &self.context.status_writer else {
            return;
        };
        if !writer.is_leader() {
            self.written_as_leader = false;
            return;
        }
        // A replica that just became leader writes what it sees even if nothing changed
        // since: the previous leader may have died before writing the last transition.
        let first_as_leader = !self.written_as_leader;
        if first_as_leader || self.status.differs_from(&before) {
            self.written_as_leader = writer
                .publish(member, &self.status, before.health(), first_as_leader)
                .await;
        }
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
