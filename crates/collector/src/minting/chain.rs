//! [`TokenChain`]: one member's tokens, minted one after another for as long as its task runs.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use cluster_registry::minting::{HomeError, HomeSnapshot, MintRecord, MintRequest, TokenHome};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use member_client::{MemberClientConfig, jwt_claims::JwtClaims};
use secrecy::ExposeSecret as _;
use tokio::sync::{Notify, watch};

use super::{
    MintState, Minter,
    identity::{self, TokenIdentity},
    mint::{self, MintError},
    schedule::{self, Next},
    state::Refusal,
};
use crate::{check::credential::rfc3339, member::leadership::Leadership};

/// The reporting controller of mint Events.
const REPORTER: &str = "tether-collector";

/// The longest wait between two looks at the home: a token written there by hand is noticed
/// through the registry at once, this only bounds a missed notice.
const LONGEST_WAIT: Duration = Duration::from_secs(300);

/// A member's running token chain; dropping it stops the chain (a mint in flight is dropped
/// with it, before or after its write, never half-way through one).
pub(crate) struct TokenChain {
    task: tokio::task::JoinHandle<()>,
    requests: watch::Sender<MintRequest>,
}

impl Drop for TokenChain {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TokenChain {
    /// Starts minting `member`'s tokens as `request` asks, through `client` (the member's
    /// own, carrying its current credential), verifying each new one with a client made from
    /// `config`. Reports to `state`; `changed` rings when the member's credential changed.
    pub(crate) fn start(
        member: String,
        request: MintRequest,
        client: Client,
        config: MemberClientConfig,
        minter: Minter,
        state: watch::Sender<MintState>,
        changed: Arc<Notify>,
    ) -> Self {
        let reporter = Reporter {
            controller: REPORTER.to_owned(),
            instance: Some(minter.identity.clone()),
        };
        let control_plane = minter.control_plane.clone();
        let recorder = control_plane.map(|client| Recorder::new(client, reporter));
        let (requests, changes) = watch::channel(request.clone());
        let chain = Chain {
            member,
            request,
            requests: changes,
            client,
            config,
            minter,
            state,
            changed,
            recorder,
        };
        Self {
            task: tokio::spawn(chain.run()),
            requests,
        }
    }

    /// Where the chain's tokens live.
    pub(crate) fn home(&self) -> TokenHome {
        self.requests.borrow().home.clone()
    }

    /// Goes on with what `request` asks now (a new `mint-now`, another lifetime), without
    /// stopping: a mint in flight finishes and is written first.
    pub(crate) fn update(&self, request: MintRequest) {
        self.requests.send_replace(request);
    }
}

struct Chain {
    member: String,
    request: MintRequest,
    requests: watch::Receiver<MintRequest>,
    client: Client,
    config: MemberClientConfig,
    minter: Minter,
    state: watch::Sender<MintState>,
    changed: Arc<Notify>,
    recorder: Option<Recorder>,
}

impl Chain {
    async fn run(mut self) {
        // A member file's token is this replica's own; a Secret is shared by every replica.
        let shared = !matches!(self.request.home, TokenHome::File(_));
        if let Some(refusal) = self.minter.refusal.clone().filter(|_| shared) {
            self.report(MintState::Failed(refusal)).await;
            return;
        }
        let leader = self.minter.leader.clone().filter(|_| shared);
        // A replica that leads from its start may follow one that died mid-mint, too.
        let mut handover = leader.is_some();
        let mut leadership = Leadership::new(leader);
        loop {
            if !leadership.leading() {
                leadership.changed().await;
                handover = true;
                continue;
            }
            if handover {
                handover = false;
                tokio::select! {
                    () = tokio::time::sleep(self.minter.handover_grace()) => {}
                    () = leadership.changed() => {
                        handover = true;
                        continue;
                    }
                }
            }
            self.request = self.requests.borrow_and_update().clone();
            let wait = self.step().await;
            tokio::select! {
                () = tokio::time::sleep(wait.min(LONGEST_WAIT)) => {}
                () = self.changed.notified() => {}
                changed = self.requests.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = leadership.changed() => handover = true,
            }
        }
    }

    /// Reads the home and acts on it; returns how long to wait before the next look.
    async fn step(&mut self) -> Duration {
        let home = self.request.home.clone();
        let deadline = self.minter.request_timeout;
        let read = tokio::time::timeout(deadline, home.read(self.minter.control_plane.as_ref()));
        let snapshot = match read.await {
            Ok(Ok(snapshot)) => Ok(snapshot),
            Ok(Err(err)) => Err(format!("the token cannot be read from the {home}: {err}")),
            Err(_) => Err(format!("reading the {home} took over {deadline:?}")),
        };
        let snapshot = match snapshot {
            Ok(snapshot) => snapshot,
            Err(message) => return self.failed(message).await,
        };
        // Before anything is due: a token the chain may not renew is reported at once.
        let current =
            match snapshot.token.as_ref().map(|token| {
                identity::current(token.expose_secret(), &self.request.service_account)
            }) {
                Some(Ok(current)) => Some(current),
                Some(Err(refusal)) => return self.refused(refusal).await,
                None => None,
            };
        let now = SystemTime::now();
        let next = schedule::next(
            snapshot.token.as_ref().map(|t| t.expose_secret()),
            &snapshot.record,
            self.request.requested.as_deref(),
            self.minter.args.mint_at_fraction,
            self.minter.args.retry(),
            now,
        );
        match (next, current) {
            (Next::At(due), _) => {
                self.report(MintState::Fine).await;
                due.duration_since(now).unwrap_or(Duration::ZERO)
            }
            (Next::Mint(why), Some(current)) => self.mint(&home, snapshot, &current, why).await,
            (Next::Expired(exp), _) => {
                self.minter
                    .metrics
                    .record_token_mint(&self.member, "expired");
                self.report(MintState::Expired(format!(
                    "the token in the {home} expired at {}, so no new one can be minted with it \
                     (was the collector stopped that long?); write a valid token there to \
                     re-seed the chain",
                    rfc3339(exp)
                )))
                .await;
                self.minter.args.retry()
            }
            // A decision to mint always has a token, whose identity was read above.
            (Next::NoToken | Next::Mint(_), _) => {
                self.failed(format!(
                    "the {home} holds no token to mint with; write a valid token there to seed \
                     the chain"
                ))
                .await
            }
        }
    }

    async fn mint(
        &mut self,
        home: &TokenHome,
        snapshot: HomeSnapshot,
        current: &TokenIdentity,
        why: &str,
    ) -> Duration {
        let member = self.member.clone();
        let account = self.request.service_account.clone();
        tracing::info!(member, service_account = %account, why, "minting a token");
        let deadline = self.minter.request_timeout;
        let user = account.username();
        let minted = async {
            mint::check_current(&self.client, &user, deadline).await?;
            let token = mint::request_token(&self.client, &self.request, deadline).await?;
            // Before the token goes anywhere, even to the member's own SelfSubjectReview.
            identity::check_minted(current, token.expose_secret()).map_err(MintError::Mismatch)?;
            mint::verify(&self.config, &self.minter.policy, &token, &user, deadline).await?;
            Ok::<_, MintError>(token)
        };
        let token = match minted.await {
            Ok(token) => token,
            Err(MintError::Mismatch(refusal)) => return self.refused(refusal).await,
            Err(err) => return self.failed(err.to_string()).await,
        };
        let expires_at = JwtClaims::of(token.expose_secret()).and_then(|c| c.exp);
        let asked = self.request.requested.clone();
        let record = MintRecord {
            minted_at: Some(SystemTime::now()),
            expires_at,
            handled_request: asked.or(snapshot.record.handled_request.clone()),
            minted_by: Some(self.minter.identity.clone()),
        };
        let control_plane = self.minter.control_plane.as_ref();
        let write = home.write(control_plane, &snapshot, Some(&token), &record);
        match tokio::time::timeout(deadline, write).await {
            Ok(Ok(_)) => {
                self.minter.metrics.record_token_mint(&member, "success");
                tracing::info!(
                    member,
                    home = %home,
                    expires_at = expires_at.map(rfc3339).as_deref().unwrap_or("never"),
                    "minted the member's token"
                );
                self.report(MintState::Fine).await;
                // The registry tells of the new token; look again then, or soon anyway.
                deadline
            }
            Ok(Err(HomeError::Conflict)) => {
                // Someone wrote the home since it was read. Look again, but not at once: a
                // writer that keeps rewriting it must not make Tether mint in a loop.
                self.minter.metrics.record_token_mint(&member, "conflict");
                tracing::warn!(member, home = %home, "the token home changed during a mint; the minted token was not written");
                self.minter.args.retry()
            }
            Ok(Err(err)) => {
                self.failed(format!(
                    "the minted token could not be written to the {home}: {err}"
                ))
                .await
            }
            Err(_) => {
                self.failed(format!("writing the {home} took over {deadline:?}"))
                    .await
            }
        }
    }

    /// Reports a refusal by the operator's bounds and counts it; returns the wait before the
    /// next look (the token or the flags may change meanwhile).
    async fn refused(&mut self, refusal: Refusal) -> Duration {
        self.minter
            .metrics
            .record_token_mint(&self.member, "refused");
        tracing::warn!(member = %self.member, reason = refusal.kind.reason(), message = refusal.message, "token minting refused");
        self.report(MintState::Refused(refusal)).await;
        self.minter.args.retry()
    }

    /// Reports a failure and counts it; returns the wait before the next attempt.
    async fn failed(&mut self, message: String) -> Duration {
        self.minter
            .metrics
            .record_token_mint(&self.member, "failed");
        tracing::warn!(member = %self.member, message, "token minting failed");
        self.report(MintState::Failed(message)).await;
        self.minter.args.retry()
    }

    /// Publishes `state`, and records an Event on the home's Secret when its reason changes.
    async fn report(&mut self, state: MintState) {
        let before = self.state.send_replace(state.clone());
        if before.reason() == state.reason() {
            return;
        }
        let (Some(recorder), Some(reference)) =
            (&self.recorder, secret_reference(&self.request.home))
        else {
            return;
        };
        let (type_, reason, note) = match state.reason() {
            Some(reason) => (
                EventType::Warning,
                reason,
                state.message().map(str::to_owned),
            ),
            None => (
                EventType::Normal,
                "TokenRotated",
                Some(format!(
                    "the token chain works again (was {})",
                    before.reason().unwrap_or_default()
                )),
            ),
        };
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: note.map(|note| format!("member {}: {note}", self.member)),
            action: "Rotate".to_owned(),
            secondary: None,
        };
        let deadline = self.minter.request_timeout;
        match tokio::time::timeout(deadline, recorder.publish(&event, &reference)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(member = %self.member, error = %err, "recording a mint Event failed");
            }
            Err(_) => {
                tracing::warn!(member = %self.member, ?deadline, "recording a mint Event timed out");
            }
        }
    }
}

/// The Secret a home lives in, as an Event's object.
fn secret_reference(home: &TokenHome) -> Option<ObjectReference> {
    match home {
        TokenHome::KarmadaSecret(secret) | TokenHome::ArgoCdSecret(secret) => {
            Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Secret".to_owned()),
                namespace: Some(secret.namespace.clone()),
                name: Some(secret.name.clone()),
                ..ObjectReference::default()
            })
        }
        TokenHome::File(_) => None,
    }
}
