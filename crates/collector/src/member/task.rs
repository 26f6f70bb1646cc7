//! One member's life in the collector: its watches, its probe, and the status it owns.

use std::{sync::Arc, time::Duration};

use kube::Client;
use member_client::CredentialHealth;
use tokio::{
    sync::Notify,
    time::{Instant, MissedTickBehavior},
};

use super::{
    confirmation::Confirmation,
    health::MemberHealth,
    informer_state::InformerStates,
    informers::{self, Informers, MemberStores},
    status::MemberStatus,
    status_writer::StatusWriter,
};
use crate::{
    clusterprofile::ProfilePublisher,
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
    /// Publishes each member's `ClusterProfile`; `None` without `--publish-clusterprofiles`.
    pub(crate) profiles: Option<ProfilePublisher>,
    /// How often `/readyz` of each member is probed.
    pub(crate) probe_period: Duration,
    /// How long a probe may wait for `/readyz` before the member counts as unreachable.
    pub(crate) probe_timeout: Duration,
    /// How long any other request to a member may wait for its response.
    pub(crate) request_timeout: Duration,
    /// The kinds mirrored from every member.
    pub(crate) resources: Arc<[MirroredResource]>,
}

/// A running member; dropping it stops its probe and watches.
pub(crate) struct MemberTask {
    /// `None` only after [`stop`](Self::stop) took it.
    prober: Option<tokio::task::JoinHandle<()>>,
    informers: Option<Informers>,
    rotated: Arc<Notify>,
}

impl Drop for MemberTask {
    fn drop(&mut self) {
        if let Some(prober) = &self.prober {
            prober.abort();
        }
    }
}

impl MemberTask {
    /// Starts watching and probing `member` through `client`, whose credential reports to
    /// `health`. The task goes on from the member's `status` so far, so that a rebuilt
    /// client is no transition; `replacing` says an earlier client was just stopped, whose
    /// watches the new ones relist.
    pub(crate) fn start(
        member: String,
        client: Client,
        health: CredentialHealth,
        context: MemberContext,
        status: MemberStatus,
        replacing: bool,
    ) -> Self {
        let rotated = Arc::new(Notify::new());
        let (stores, informer_states, informers) = informers::start(
            &member,
            &client,
            &context.resources,
            &context.metrics,
            replacing,
        );
        context.mirror.set_stores(&member, stores.clone());
        context.metrics.watch_member(&member, health.clone());
        let prober = Prober {
            status,
            member,
            client,
            context,
            stores,
            informers: informer_states,
            confirmation: Confirmation::default(),
        };
        let notified = rotated.clone();
        let prober = tokio::spawn(prober.run(health, notified));
        Self {
            prober: Some(prober),
            informers: Some(informers),
            rotated,
        }
    }

    /// Stops the probe and the watches and waits until neither runs: after this, nothing
    /// publishes or records for the member.
    pub(crate) async fn stop(mut self) {
        if let Some(prober) = self.prober.take() {
            prober.abort();
            // An aborted task ends with a cancellation error: that is the point.
            let _ = prober.await;
        }
        if let Some(informers) = self.informers.take() {
            informers.stop().await;
        }
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
    informers: InformerStates,
    status: MemberStatus,
    confirmation: Confirmation,
}

impl Prober {
    async fn run(mut self, health: CredentialHealth, rotated: Arc<Notify>) {
        let mut credential_changes = health.subscribe();
        let mut ticker = tokio::time::interval(self.context.probe_period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // Probe on schedule, at once when a request learns the credential changed state (a
            // rejected credential shows without waiting a tick), and when an informer syncs or
            // starts failing.
            let mut rotation = None;
            tokio::select! {
                _ = ticker.tick() => {}
                () = self.informers.changed() => {}
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

    /// Probes `/readyz`, judges the informers, publishes the status and metrics, and submits
    /// the status for writing.
    async fn probe_once(&mut self) {
        let probed = probe(&self.client, self.context.probe_timeout).await;
        // The version rarely changes; asking once per client halves the steady-state load.
        let version =
            if probed == MemberHealth::Healthy && self.status.kubernetes_version().is_none() {
                self.client
                    .apiserver_version()
                    .await
                    .ok()
                    .map(|info| info.git_version)
            } else {
                None
            };
        let health = self.confirmation.judge(
            self.status.health(),
            match probed {
                MemberHealth::Healthy => MemberHealth::of_mirror(&self.informers.now()),
                other => other,
            },
        );
        let before = self.status.health().clone();
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
        if let Some(writer) = &self.context.status_writer {
            writer.submit(member, &self.status);
        }
        if let Some(profiles) = &self.context.profiles {
            profiles.submit(member, &self.status);
        }
        if before != *self.status.health() {
            match self.status.health() {
                MemberHealth::Healthy => tracing::info!(member, "member is ready"),
                other => {
                    tracing::warn!(member, reason = other.reason(), message = %other.message(), "member is not ready")
                }
            }
        }
    }
}

async fn probe(client: &Client, timeout: Duration) -> MemberHealth {
    let request = http::Request::get("/readyz").body(Vec::new());
    let Ok(request) = request else {
        return MemberHealth::Unreachable("could not build the /readyz request".to_owned());
    };
    match tokio::time::timeout(timeout, client.request_text(request)).await {
        Ok(Ok(_)) => MemberHealth::Healthy,
        Ok(Err(err)) => MemberHealth::from_error(&err),
        Err(_) => MemberHealth::Unreachable(format!("/readyz did not answer within {timeout:?}")),
    }
}
