//! One task per member, started, rebuilt and stopped as the registry says.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use cluster_registry::{InvalidReason, MemberSpec, RegistryEvent};
use member_client::{ClientFactory, CredentialHealth};
use tokio::sync::{mpsc, watch};

use super::{
    health::MemberHealth,
    status::MemberStatus,
    task::{MemberContext, MemberTask},
};

/// Owns every member task; members fail independently.
pub(crate) struct Supervisor {
    factory: ClientFactory,
    context: MemberContext,
    tasks: HashMap<String, MemberTask>,
    /// The status of each member reported without a client (unusable definition or Secret).
    /// No task owns it, so the supervisor does, and writes it again when this replica becomes
    /// leader.
    clientless: BTreeMap<String, MemberStatus>,
}

impl Supervisor {
    /// A supervisor whose member clients read tokens through `factory`'s cache.
    pub(crate) fn new(factory: ClientFactory, context: MemberContext) -> Self {
        Self {
            factory,
            context,
            tasks: HashMap::new(),
            clientless: BTreeMap::new(),
        }
    }

    /// Applies registry events until the channel closes.
    pub(crate) async fn run(mut self, mut events: mpsc::Receiver<RegistryEvent>) {
        let mut leadership = self
            .context
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
    /// which a follower only published to its mirror.
    async fn write_clientless(&self) {
        let Some(writer) = &self.context.status_writer else {
            return;
        };
        for (name, status) in &self.clientless {
            writer.publish(name, status, status.health(), true).await;
        }
    }

    async fn apply(&mut self, event: RegistryEvent) {
        match event {
            RegistryEvent::Upserted { spec, ca_bundle } => self.upsert(spec, ca_bundle).await,
            RegistryEvent::CredentialsRotated { name, secret } => {
                // The cache entry is already invalidated: the next request carries the new
                // token, through the same client and the same watches.
                tracing::info!(member = %name, secret = %secret, "credentials rotated");
                if let Some(task) = self.tasks.get(&name) {
                    task.credentials_rotated();
                }
            }
            RegistryEvent::Removed(name) => {
                self.forget(&name);
                tracing::info!(member = %name, "member removed");
            }
            RegistryEvent::Invalid {
                name,
                reason: InvalidReason::PullMode,
            } => {
                // Karmada's agent on the member manages pull-mode clusters; stay out of its way.
                self.forget(&name);
                tracing::debug!(member = %name, "pull-mode cluster ignored");
            }
            RegistryEvent::Invalid { name, reason } => self.invalid(name, reason).await,
            other => tracing::debug!(event = ?other, "ignoring registry event"),
        }
    }

    fn forget(&mut self, name: &str) {
        self.tasks.remove(name);
        self.clientless.remove(name);
        self.context.mirror.remove(name);
        self.context.metrics.forget_member(name);
    }

    /// The status the member had last, whoever owned it.
    fn last_status(&self, name: &str) -> Option<MemberStatus> {
        self.clientless
            .get(name)
            .cloned()
            .or_else(|| self.context.mirror.status(name))
    }

    async fn upsert(&mut self, spec: MemberSpec, ca_bundle: Option<Bytes>) {
        let previous = self.last_status(&spec.name);
        // Stop the old client first: a new CA or endpoint means new connections.
        let replacing = self.tasks.remove(&spec.name).is_some();
        let health = CredentialHealth::new();
        match self.factory.build(&spec.client_config(ca_bundle), &health) {
            Ok(client) => {
                tracing::info!(member = %spec.name, endpoint = %spec.api_endpoint, "member client started");
                self.clientless.remove(&spec.name);
                let task = MemberTask::start(
                    spec.name.clone(),
                    client,
                    health,
                    self.context.clone(),
                    previous,
                    replacing,
                );
                self.tasks.insert(spec.name, task);
            }
            Err(err) => {
                let reason = match err {
                    member_client::Error::Invalid { source, .. } => InvalidReason::from(source),
                    other => InvalidReason::EndpointInvalid(other.to_string()),
                };
                self.report_without_client(&spec.name, MemberHealth::Invalid(reason))
                    .await;
            }
        }
    }

    async fn invalid(&mut self, name: String, reason: InvalidReason) {
        if self.tasks.contains_key(&name)
            && matches!(
                reason,
                InvalidReason::SecretNotFound | InvalidReason::SecretInvalid(_)
            )
        {
            // The running task's next probe fails with CredentialUnavailable and reports the
            // same reason; keep its watches so they resume the moment the Secret is fixed.
            tracing::warn!(member = %name, reason = reason.condition_reason(), "member credential unusable");
            return;
        }
        self.report_without_client(&name, MemberHealth::Invalid(reason))
            .await;
    }

    async fn report_without_client(&mut self, name: &str, health: MemberHealth) {
        let mut status = self.last_status(name).unwrap_or_default();
        self.tasks.remove(name);
        tracing::warn!(member = %name, reason = health.reason(), message = %health.message(), "member cannot be watched");
        let previous = status.health().clone();
        status.set_health(health);
        self.context.mirror.publish(name, status.clone());
        self.context.metrics.set_member_ready(name, false);
        if let Some(writer) = self
            .context
            .status_writer
            .as_ref()
            .filter(|w| w.is_leader())
        {
            writer.publish(name, &status, &previous, false).await;
        }
        self.clientless.insert(name.to_owned(), status);
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
