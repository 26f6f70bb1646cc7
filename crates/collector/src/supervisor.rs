//! One task per member, started, rebuilt and stopped as the registry says.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use cluster_registry::{InvalidReason, MemberSpec, RegistryEvent};
use member_client::{ClientFactory, CredentialHealth};
use tokio::sync::{mpsc, watch};

use crate::{
    member_health::MemberHealth,
    member_task::{MemberTask, Shared},
};

/// Owns every member task; members fail independently.
pub struct Supervisor {
    factory: ClientFactory,
    shared: Shared,
    members: HashMap<String, Running>,
    /// Members reported without a client (unusable definition or Secret): no task of theirs
    /// writes their status, so the supervisor writes it again when this replica becomes leader.
    clientless: BTreeSet<String>,
}

struct Running {
    task: MemberTask,
}

impl Supervisor {
    /// A supervisor whose member clients read tokens through `factory`'s cache.
    pub fn new(factory: ClientFactory, shared: Shared) -> Self {
        Self {
            factory,
            shared,
            members: HashMap::new(),
            clientless: BTreeSet::new(),
        }
    }

    /// Applies registry events until the channel closes.
    pub async fn run(mut self, mut events: mpsc::Receiver<RegistryEvent>) {
        let mut leadership = self
            .shared
            .status_writer
            .as_ref()
            .and_then(|writer| writer.leadership());
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.apply(event).await,
                    None => return,
                },
                () = became_leader(leadership.as_mut()) => self.write_clientless().await,
            }
        }
    }

    /// This replica just became leader: write the status of members no task writes for,
    /// which a follower only kept in its mirror.
    async fn write_clientless(&self) {
        let Some(writer) = &self.shared.status_writer else {
            return;
        };
        for name in &self.clientless {
            if let Some(status) = self.shared.mirror.status(name) {
                writer.publish(name, &status, status.health(), true).await;
            }
        }
    }

    /// Applies one registry event.
    pub async fn apply(&mut self, event: RegistryEvent) {
        match event {
            RegistryEvent::Upserted { spec, ca_bundle } => self.upsert(spec, ca_bundle).await,
            RegistryEvent::CredentialsRotated { name, secret } => {
                // The cache entry is already invalidated: the next request carries the new
                // token, through the same client and the same watches.
                tracing::info!(member = %name, secret = %secret, "credentials rotated");
                if let Some(running) = self.members.get(&name) {
                    running.task.credentials_rotated();
                }
            }
            RegistryEvent::Removed(name) => {
                self.members.remove(&name);
                self.clientless.remove(&name);
                self.shared.mirror.remove(&name);
                self.shared.metrics.forget_member(&name);
                tracing::info!(member = %name, "member removed");
            }
            RegistryEvent::Invalid { name, reason } => self.invalid(name, reason).await,
            other => tracing::debug!(event = ?other, "ignoring registry event"),
        }
    }

    async fn upsert(&mut self, spec: MemberSpec, ca_bundle: Option<Bytes>) {
        // Stop the old client first: a new CA or endpoint means new connections.
        let replacing = self.members.remove(&spec.name).is_some();
        let config = spec.client_config(ca_bundle);
        let health = CredentialHealth::new();
        match self.factory.build(&config, &health) {
            Ok(client) => {
                tracing::info!(member = %spec.name, endpoint = %spec.api_endpoint, "member client started");
                let task = MemberTask::start(
                    spec.name.clone(),
                    client,
                    health,
                    self.shared.clone(),
                    replacing,
                );
                self.clientless.remove(&spec.name);
                self.members.insert(spec.name, Running { task });
            }
            Err(err) => {
                let reason = match err {
                    member_client::Error::Invalid { source, .. } => InvalidReason::from(source),
                    other => InvalidReason::EndpointInvalid(other.to_string()),
                };
                let health = MemberHealth::DefinitionInvalid {
                    reason: reason.condition_reason(),
                    detail: reason.detail().unwrap_or_default().to_owned(),
                };
                self.report_without_client(&spec.name, health).await;
            }
        }
    }

    async fn invalid(&mut self, name: String, reason: InvalidReason) {
        if reason == InvalidReason::PullMode {
            // Karmada's agent on the member manages pull-mode clusters; stay out of its way.
            self.members.remove(&name);
            self.clientless.remove(&name);
            self.shared.mirror.remove(&name);
            tracing::debug!(member = %name, "pull-mode cluster ignored");
            return;
        }
        let health = match reason {
            InvalidReason::SecretNotFound => MemberHealth::SecretNotFound,
            InvalidReason::SecretInvalid(detail) => MemberHealth::SecretInvalid(detail),
            InvalidReason::SecretForbidden(detail) => MemberHealth::SecretForbidden(detail),
            other => MemberHealth::DefinitionInvalid {
                reason: other.condition_reason(),
                detail: other.detail().unwrap_or_default().to_owned(),
            },
        };
        if self.members.contains_key(&name)
            && matches!(
                health,
                MemberHealth::SecretNotFound | MemberHealth::SecretInvalid(_)
            )
        {
            // The running task's next probe fails with CredentialUnavailable and reports the
            // same reason; keep its watches so they resume the moment the Secret is fixed.
            tracing::warn!(member = %name, reason = health.reason(), "member credential unusable");
            return;
        }
        self.members.remove(&name);
        self.report_without_client(&name, health).await;
    }

    async fn report_without_client(&mut self, name: &str, health: MemberHealth) {
        self.clientless.insert(name.to_owned());
        tracing::warn!(member = %name, reason = health.reason(), message = %health.message(), "member cannot be watched");
        let before = self.shared.mirror.status(name).map(|s| s.health().clone());
        let after = self
            .shared
            .mirror
            .update_status(name, |status| status.set_health(health.clone()));
        self.shared.metrics.set_member_ready(name, false);
        if let Some(writer) = self.shared.status_writer.as_ref().filter(|w| w.is_leader()) {
            let previous = before.unwrap_or(MemberHealth::Unknown);
            writer.publish(name, &after, &previous, false).await;
        }
    }
}

/// Resolves when `leadership` turns true; never without leader election.
async fn became_leader(leadership: Option<&mut watch::Receiver<bool>>) {
    if let Some(leadership) = leadership {
        while leadership.changed().await.is_ok() {
            if *leadership.borrow_and_update() {
                return;
            }
        }
    }
    std::future::pending().await
}
