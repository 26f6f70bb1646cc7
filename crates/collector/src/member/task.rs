//! One member's life in the collector: its watches, its probe, and the status it owns.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use cluster_registry::{MemberSpec, minting::MintRequest};
use kube::Client;
use member_client::{
    ClientLimits, CredentialHealth, MemberClientConfig, response_limit::LimitExceeded,
};
use tokio::{
    sync::{Notify, watch},
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
    minting::{MintState, Minter, Permit, TokenChain, permit},
    mirror::{InitialList, Mirror, MirroredResource},
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
    /// How long any other request to a member may wait, and how much a member may send back.
    pub(crate) client_limits: ClientLimits,
    /// The kinds mirrored from every member.
    pub(crate) resources: Arc<[MirroredResource]>,
    /// The most objects of one kind mirrored from one member.
    pub(crate) max_objects: usize,
    /// How each watch gets its first state, where the member serves it.
    pub(crate) initial_list: InitialList,
    /// Mints the tokens of members that ask for it.
    pub(crate) minter: Minter,
}

/// What a member task needs to mint the member's tokens: what it asks, and the client config
/// that verifies each new token.
pub(crate) struct MintPlan {
    pub(crate) request: MintRequest,
    pub(crate) config: MemberClientConfig,
}

/// A running member; dropping it stops its probe and watches.
pub(crate) struct MemberTask {
    /// `None` only after [`stop`](Self::stop) took it.
    prober: Option<tokio::task::JoinHandle<()>>,
    informers: Option<Informers>,
    rotated: Arc<Notify>,
    /// Rings the token chain when the credential changed.
    credential_changed: Arc<Notify>,
    client: Client,
    context: MemberContext,
    member: String,
    chain: Option<TokenChain>,
    mint_state: watch::Sender<MintState>,
    /// The definition the client was built from, and the mint request it runs with.
    definition: (MemberSpec, Option<Bytes>),
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
        definition: (MemberSpec, Option<Bytes>),
        client: Client,
        health: CredentialHealth,
        context: MemberContext,
        status: MemberStatus,
        replacing: bool,
        plan: Option<MintPlan>,
    ) -> Self {
        let member = definition.0.name.clone();
        let rotated = Arc::new(Notify::new());
        let (mint_state, mint_changes) = watch::channel(status.mint().clone());
        let (stores, informer_states, informers) = informers::start(
            &member,
            &client,
            &context.resources,
            &context.metrics,
            replacing,
            context.max_objects,
            context.initial_list,
        );
        context.mirror.set_stores(&member, stores.clone());
        context.metrics.watch_member(&member, health.clone());
        let prober = Prober {
            status,
            member: member.clone(),
            client: client.clone(),
            context: context.clone(),
            stores,
            informers: informer_states,
            confirmation: Confirmation::default(),
        };
        let prober = tokio::spawn(prober.run(health, rotated.clone(), mint_changes));
        let mut task = Self {
            prober: Some(prober),
            informers: Some(informers),
            rotated,
            credential_changed: Arc::new(Notify::new()),
            client,
            context,
            member,
            chain: None,
            mint_state,
            definition,
        };
        task.set_mint(plan);
        task
    }

    /// Whether `spec` with `ca_bundle` differs from what this task runs with only in what
    /// minting asks: that needs no new client and no relist. Anything else (a member usable
    /// again, a new endpoint or CA) rebuilds the client, as the registry's `Upserted` says.
    pub(crate) fn only_mint_changed(&self, spec: &MemberSpec, ca_bundle: Option<&Bytes>) -> bool {
        let (defined, ca) = &self.definition;
        let client_part = |spec: &MemberSpec| MemberSpec {
            mint_request: None,
            ..spec.clone()
        };
        ca.as_ref() == ca_bundle
            && defined.mint_request != spec.mint_request
            && client_part(defined) == client_part(spec)
    }

    /// Mints the member's tokens as `plan` says from now on (`None`, or a plan the operator's
    /// flags do not permit: not at all), without touching its client or watches.
    pub(crate) fn set_mint(&mut self, plan: Option<MintPlan>) {
        self.definition.0.mint_request = plan.as_ref().map(|plan| Box::new(plan.request.clone()));
        let verdict = plan.as_ref().map_or(Permit::Off, |plan| {
            permit(&self.context.minter.args, &self.member, &plan.request)
        });
        let (Permit::Mint, Some(plan)) = (&verdict, plan) else {
            self.chain = None;
            self.mint_state.send_replace(match verdict {
                Permit::Refused(refusal) => MintState::Refused(refusal),
                Permit::Off | Permit::Mint => MintState::Fine,
            });
            return;
        };
        if let Some(chain) = &self.chain
            && chain.home() == plan.request.home
        {
            chain.update(plan.request);
            return;
        }
        // The old chain stops first, so that two never mint for one member.
        self.chain = None;
        self.chain = Some(TokenChain::start(
            self.member.clone(),
            plan.request,
            self.client.clone(),
            plan.config,
            self.context.minter.clone(),
            self.mint_state.clone(),
            self.credential_changed.clone(),
        ));
    }

    /// Stops the probe and the watches and waits until neither runs: after this, nothing
    /// publishes or records for the member.
    pub(crate) async fn stop(mut self) {
        self.chain = None;
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
        self.credential_changed.notify_one();
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
    async fn run(
        mut self,
        health: CredentialHealth,
        rotated: Arc<Notify>,
        mut mint_changes: watch::Receiver<MintState>,
    ) {
        let mut credential_changes = health.subscribe();
        let mut ticker = tokio::time::interval(self.context.probe_period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // Probe on schedule, at once when a request learns the credential changed state (a
            // rejected credential shows without waiting a tick), and when an informer syncs or
            // starts failing.
            let mut noticed = None;
            tokio::select! {
                _ = ticker.tick() => {}
                () = self.informers.changed() => {}
                changed = credential_changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = rotated.notified() => noticed = Some(Instant::now()),
                changed = mint_changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let state = mint_changes.borrow_and_update().clone();
                    self.status.set_mint(state);
                }
            }
            self.probe_once().await;
            // The cache was invalidated before the rotation was announced, so this probe
            // carried the new token; if it was accepted, that is the rotation's first use.
            if let Some(noticed) = noticed
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
        let mut probed = probe(&self.client, self.context.probe_timeout).await;
        // The version rarely changes; asking once per client halves the steady-state load.
        let version =
            if probed == MemberHealth::Healthy && self.status.kubernetes_version().is_none() {
                match version(&self.client, self.context.probe_timeout).await {
                    Ok(version) => Some(version),
                    // A member that just answered /readyz and then breaks a limit on /version
                    // is reported; any other failure only leaves the version unknown.
                    Err(Some(limit)) => {
                        probed = MemberHealth::LimitExceeded(limit, "/version".to_owned());
                        None
                    }
                    Err(None) => None,
                }
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

/// The member's `gitVersion`, or the limit it broke sending it (`None`: another failure). It
/// must arrive, body and all, within `timeout`: the member answered `/readyz` just now.
async fn version(client: &Client, timeout: Duration) -> Result<String, Option<LimitExceeded>> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(info)) => Ok(info.git_version),
        Ok(Err(err)) => Err(LimitExceeded::find_in(&err).cloned()),
        Err(_) => Err(Some(LimitExceeded::ResponseTooSlow { deadline: timeout })),
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
