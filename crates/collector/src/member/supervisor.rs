//! One task per member, started, rebuilt and stopped as the registry says.

mod sharded;

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use cluster_registry::{InvalidReason, MemberSpec, Registry, RegistryEvent};
use member_client::{ClientFactory, CredentialHealth, CredentialKey};
use tokio::sync::mpsc;

use crate::clusterprofile::ProfileAccess;

pub(crate) use sharded::ShardGate;

use super::{
    health::MemberHealth,
    status::MemberStatus,
    task::{MemberContext, MemberTask, MintPlan},
};

/// Owns every member task; members fail independently.
pub(crate) struct Supervisor {
    factory: ClientFactory,
    context: MemberContext,
    /// Holds the credential of each member served here, and releases it when it no longer is.
    registry: Registry,
    /// The credential each served member holds.
    held: HashMap<String, CredentialKey>,
    tasks: HashMap<String, MemberTask>,
    /// The status of each member reported without a client (unusable definition or Secret).
    /// No task owns it, so the supervisor does.
    clientless: BTreeMap<String, MemberStatus>,
}

impl Supervisor {
    /// A supervisor whose member clients read tokens through `factory`'s cache, over
    /// `registry`'s store.
    pub(crate) fn new(factory: ClientFactory, context: MemberContext, registry: Registry) -> Self {
        Self {
            factory,
            context,
            registry,
            held: HashMap::new(),
            tasks: HashMap::new(),
            clientless: BTreeMap::new(),
        }
    }

    /// Applies registry events until the channel closes.
    pub(crate) async fn run(mut self, mut events: mpsc::Receiver<RegistryEvent>) {
        while let Some(event) = events.recv().await {
            self.apply(event).await;
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
                self.forget(&name).await;
                tracing::info!(member = %name, "member removed");
            }
            RegistryEvent::Invalid {
                name,
                reason: InvalidReason::PullMode,
            } => {
                // Karmada's agent on the member manages pull-mode clusters; stay out of its way.
                self.forget(&name).await;
                tracing::debug!(member = %name, "pull-mode cluster ignored");
            }
            RegistryEvent::Invalid { name, reason } => self.invalid(name, reason).await,
            other => tracing::debug!(event = ?other, "ignoring registry event"),
        }
    }

    /// Stops the member's task, then clears what it published, so that nothing brings it
    /// back.
    async fn forget(&mut self, name: &str) {
        if let Some(task) = self.tasks.remove(name) {
            task.stop().await;
        }
        if let Some(key) = self.held.remove(name) {
            self.registry.release_credential(&key).await;
        }
        self.clientless.remove(name);
        self.context.mirror.remove(name);
        self.context.metrics.forget_member(name);
        if let Some(writer) = &self.context.status_writer {
            writer.forget(name);
        }
        if let Some(profiles) = &self.context.profiles {
            profiles.forget(name);
        }
    }

    /// The status the member had last, whoever owned it.
    fn last_status(&self, name: &str) -> Option<MemberStatus> {
        self.clientless
            .get(name)
            .cloned()
            .or_else(|| self.context.mirror.status(name))
    }

    /// Keeps `name`'s credential in memory while it is served here, and no other of its own.
    async fn hold(&mut self, name: &str, key: &CredentialKey) {
        self.registry.hold_credential(key);
        if let Some(old) = self.held.insert(name.to_owned(), key.clone())
            && old != *key
        {
            self.registry.release_credential(&old).await;
        }
    }

    async fn upsert(&mut self, spec: MemberSpec, ca_bundle: Option<Bytes>) {
        self.hold(&spec.name, &spec.secret_ref).await;
        let mut config = spec.client_config(ca_bundle.clone());
        config.limits = self.context.client_limits;
        // Each new token is verified with a client of the member's own config.
        let plan = (spec.mint_request.as_deref()).map(|request| MintPlan {
            request: request.clone(),
            config: config.clone(),
        });
        if let Some(task) = self.tasks.get_mut(&spec.name)
            && task.only_mint_changed(&spec, ca_bundle.as_ref())
        {
            // Only the mint request changed (a `tether.io/mint-now`, say): keep the client
            // and its watches.
            task.set_mint(plan);
            return;
        }
        // Stop the old client first: a new CA or endpoint means new connections.
        let replacing = match self.tasks.remove(&spec.name) {
            Some(task) => {
                task.stop().await;
                true
            }
            None => false,
        };
        let mut status = self.last_status(&spec.name).unwrap_or_default();
        status.set_tls_unverified(spec.endpoint.insecure_skip_tls_verify);
        let health = CredentialHealth::new();
        let access = self
            .context
            .profiles
            .as_ref()
            .map(|_| ProfileAccess::of(&spec, ca_bundle.as_deref()));
        match self.factory.build(&config, &health) {
            Ok(client) => {
                tracing::info!(member = %spec.name, endpoint = %spec.endpoint.url, "member client started");
                self.clientless.remove(&spec.name);
                if let Some(profiles) = &self.context.profiles {
                    profiles.define(&spec.name, access);
                }
                let name = spec.name.clone();
                let task = MemberTask::start(
                    (spec, ca_bundle),
                    client,
                    health,
                    self.context.clone(),
                    status,
                    replacing,
                    plan,
                );
                self.tasks.insert(name, task);
            }
            Err(err) => {
                let reason = InvalidReason::of_build_error(err);
                // No client, so no way in to publish either.
                if let Some(profiles) = &self.context.profiles {
                    profiles.define(&spec.name, None);
                }
                self.report_without_client(&spec.name, MemberHealth::Invalid(reason))
                    .await;
            }
        }
    }

    async fn invalid(&mut self, name: String, reason: InvalidReason) {
        if self.tasks.contains_key(&name) && reason.is_credential() {
            // The running task's next probe fails with CredentialUnavailable and reports the
            // same reason; keep its watches so they resume the moment the Secret is fixed.
            tracing::warn!(member = %name, reason = reason.condition_reason(), "member credential unusable");
            return;
        }
        // A definition that is unusable offers no way in; one whose credential is unusable
        // still says where the member is.
        if let Some(profiles) = self
            .context
            .profiles
            .as_ref()
            .filter(|_| !reason.is_credential())
        {
            profiles.define(&name, None);
        }
        self.report_without_client(&name, MemberHealth::Invalid(reason))
            .await;
    }

    async fn report_without_client(&mut self, name: &str, health: MemberHealth) {
        if let Some(task) = self.tasks.remove(name) {
            task.stop().await;
        }
        let mut status = self.last_status(name).unwrap_or_default();
        tracing::warn!(member = %name, reason = health.reason(), message = %health.message(), "member cannot be watched");
        status.set_health(health);
        self.context.mirror.publish(name, status.clone());
        self.context.metrics.set_member_ready(name, false);
        if let Some(writer) = &self.context.status_writer {
            writer.submit(name, &status);
        }
        if let Some(profiles) = &self.context.profiles {
            profiles.submit(name, &status);
        }
        self.clientless.insert(name.to_owned(), status);
    }
}
