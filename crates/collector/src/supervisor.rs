//! One task per member, started, rebuilt and stopped as the registry says.

use std::collections::HashMap;

use cluster_registry::{InvalidReason, MemberSpec, RegistryEvent};
use member_client::{ClientFactory, CredentialHealth};
use tokio::sync::mpsc;

use crate::{
    member_health::MemberHealth,
    member_task::{MemberTask, Shared},
};

/// Owns every member task; members fail independently.
pub struct Supervisor {
    factory: ClientFactory,
    shared: Shared,
    members: HashMap<String, Running>,
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
        }
    }

    /// Applies registry events until the channel closes.
    pub async fn run(mut self, mut events: mpsc::Receiver<RegistryEvent>) {
        while let Some(event) = events.recv().await {
            self.apply(event).await;
        }
    }

    /// Applies one registry event.
    pub async fn apply(&mut self, event: RegistryEvent) {
        match event {
            RegistryEvent::Upserted(spec) => self.upsert(spec).await,
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
                self.shared.mirror.remove(&name);
                self.shared.metrics.forget_member(&name);
                tracing::info!(member = %name, "member removed");
            }
            RegistryEvent::Invalid { name, reason } => self.invalid(name, reason).await,
            other => tracing::debug!(event = ?other, "ignoring registry event"),
        }
    }

    async fn upsert(&mut self, spec: MemberSpec) {
        // Stop the old client first: a new CA or endpoint means new connections.
        let replacing = self.members.remove(&spec.name).is_some();
        // The CA bundle lives with the token; if the Secret is unusable now, build without it
        // and let the probe report why (the registry upserts again once it is fixed).
        let ca_bundle = match self.factory.tokens().get(&spec.secret_ref).await {
            Ok(credential) => credential.ca_bundle().cloned(),
            Err(_) => None,
        };
        let health = CredentialHealth::new();
        match self.factory.build(&spec.client_config(ca_bundle), &health) {
            Ok(client) => {
                tracing::info!(member = %spec.name, endpoint = %spec.api_endpoint, "member client started");
                let task = MemberTask::start(
                    spec.name.clone(),
                    client,
                    health,
                    self.shared.clone(),
                    replacing,
                );
                self.members.insert(spec.name, Running { task });
            }
            Err(err) => {
                let detail = err.to_string();
                let reason = match err {
                    member_client::Error::InvalidCaBundle { .. } => "SecretInvalid",
                    member_client::Error::InvalidProxyUrl { .. } => "ProxyInvalid",
                    _ => "EndpointInvalid",
                };
                self.report_without_client(
                    &spec.name,
                    MemberHealth::DefinitionInvalid { reason, detail },
                )
                .await;
            }
        }
    }

    async fn invalid(&mut self, name: String, reason: InvalidReason) {
        if reason == InvalidReason::PullMode {
            // Karmada's agent on the member manages pull-mode clusters; stay out of its way.
            self.members.remove(&name);
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

    async fn report_without_client(&self, name: &str, health: MemberHealth) {
        tracing::warn!(member = %name, reason = health.reason(), message = %health.message(), "member cannot be watched");
        let before = self.shared.mirror.status(name).map(|s| s.health().clone());
        let after = self
            .shared
            .mirror
            .update_status(name, |status| status.set_health(health.clone()));
        self.shared.metrics.set_member_ready(name, false);
        if let Some(writer) = self.shared.status_writer.as_ref().filter(|w| w.is_leader()) {
            if let Err(err) = writer.write(name, &after).await {
                tracing::warn!(member = %name, error = %err, "writing Cluster status failed");
            }
            let previous = before.unwrap_or(MemberHealth::Unknown);
            if previous != health
                && let Err(err) = writer.record_transition(name, &previous, &health).await
            {
                tracing::warn!(member = %name, error = %err, "recording Event failed");
            }
        }
    }
}
