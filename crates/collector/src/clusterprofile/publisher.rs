//! Keeps one `ClusterProfile` per member current, modelled on the status writer: whoever
//! observes a member submits and goes on, and one task of its own writes, so a slow or frozen
//! control plane delays no probe and no registry event. Only the latest of each member waits
//! ([`Queue`]), a write that fails is tried again, and nothing is written that the profile
//! already says.
//!
//! # Guarantees
//! - Only while this replica leads (always, without leader election) is anything written.
//! - A profile is written only while it is Tether's: every write is conditional on the
//!   `resourceVersion` last read or written ([`ProfilesApi::apply`]), so a profile another
//!   manager took over, even between the read and the write, is left alone.
//! - A member's profile is deleted when the member is removed from its source.
//! - On gaining leadership, once every source of members has listed, Tether's profiles that
//!   name no member are deleted: garbage left by a member removed while no one led.
//! - Before a member's profile offers its credential Secret, that Secret is marked with the
//!   member and the profile's server ([`credential_marks`](super::credential_marks)); a mark
//!   that fails is tried again after [`MARK_RETRY_PERIOD`], and does not hold up the profile.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use cluster_registry::{
    InvalidReason, MemberState, Registry, Source, SourceState, clusterprofile::ClusterProfile,
};
use tokio::{sync::watch, time::Instant};

use super::{
    access::ProfileAccess,
    api::{Owner, ProfilesApi, is_conflict},
    credential_marks::{Mark, Marked, SecretMarks},
    profile,
    queue::Queue,
};
use crate::member::{
    leadership::{LeaderWrites, concurrently, write_while_leading},
    status::MemberStatus,
};

/// How long a Secret whose marking failed is left before it is tried again: a collector
/// without `patch` on Secrets must not GET every member's Secret every few seconds.
const MARK_RETRY_PERIOD: Duration = Duration::from_secs(60);

/// Reads and conditional writes of one profile per round: a conflict is read again once at
/// once, and after that at the next retry.
const WRITE_ATTEMPTS: u32 = 2;

/// The handle members' observers submit through. Cloning is cheap.
#[derive(Clone)]
pub(crate) struct ProfilePublisher {
    queue: Arc<Queue>,
}

impl ProfilePublisher {
    /// A publisher into `namespace` through `api`, writing only while `leader` (if given) says
    /// this replica leads; and the future that writes. `registry` says which members exist
    /// and whether its sources have listed, for the garbage collection. Nothing is written
    /// unless the future runs.
    pub(crate) fn new(
        api: ProfilesApi,
        marks: SecretMarks,
        namespace: String,
        registry: Registry,
        leader: Option<watch::Receiver<bool>>,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let queue = Arc::new(Queue::default());
        let writes = Writes {
            api,
            marks,
            marked: BTreeMap::new(),
            mark_failed: BTreeMap::new(),
            namespace,
            // `registry` holds the sender, so this receiver never sees it closed.
            sources: registry.sources().subscribe(),
            registry,
            queue: queue.clone(),
            written: BTreeMap::new(),
            refused: BTreeSet::new(),
            collect_garbage: true,
        };
        (Self { queue }, write_while_leading(writes, leader))
    }

    /// Records how `member` is reached; `None` when its definition is unusable, so that its
    /// profile offers no way in. Never waits for the control plane.
    pub(crate) fn define(&self, member: &str, access: Option<ProfileAccess>) {
        self.queue.define(member, access);
    }

    /// Submits what was observed of `member`. Never waits for the control plane.
    pub(crate) fn submit(&self, member: &str, status: &MemberStatus) {
        self.queue.submit(member, status);
    }

    /// `member` is gone: its profile is deleted.
    pub(crate) fn forget(&self, member: &str) {
        self.queue.forget(member);
    }
}

/// The writing side.
struct Writes {
    api: ProfilesApi,
    marks: SecretMarks,
    /// The mark each member's Secret carries, as this replica last saw or wrote it.
    marked: BTreeMap<String, Mark>,
    /// Marks that failed or were refused, and when: not tried again before
    /// [`MARK_RETRY_PERIOD`] has passed, unless the mark wanted changes.
    mark_failed: BTreeMap<String, (Mark, Instant)>,
    namespace: String,
    registry: Registry,
    /// Wakes the writer when a source of members has listed: garbage may be collectable.
    sources: watch::Receiver<BTreeMap<Source, SourceState>>,
    queue: Arc<Queue>,
    /// What this replica wrote since it last became leader, and the `resourceVersion` that
    /// write left: the next write's precondition.
    written: BTreeMap<String, (ClusterProfile, String)>,
    /// Members whose name another manager's profile holds, warned about once.
    refused: BTreeSet<String>,
    /// Whether garbage is still to be collected in this term of leadership.
    collect_garbage: bool,
}

impl LeaderWrites for Writes {
    async fn woken(&mut self) {
        tokio::select! {
            () = self.queue.wake.notified() => {}
            Ok(()) = self.sources.changed() => {}
        }
    }

    fn leadership_changed(&mut self) {
        // A new leader also collects what no one deleted.
        self.written.clear();
        self.marked.clear();
        self.mark_failed.clear();
        self.collect_garbage = true;
    }

    fn following(&mut self) {
        // The next leader's garbage collection deletes these.
        self.queue.drop_removals();
    }

    async fn write_due(&mut self) {
        self.mark_due().await;
        self.write_profiles().await;
        self.delete_removed().await;
        if self.collect_garbage {
            self.collect_garbage = !self.delete_garbage().await;
        }
    }
}

impl Writes {
    /// Marks the credential Secret of every observed member whose mark this replica has not
    /// seen, before its profile offers it.
    async fn mark_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Mark> = (self.queue.observed().into_iter())
            .filter_map(|(member, latest)| {
                let access = latest.access?;
                let secret = access.secret_ref.clone()?;
                let mark = Mark {
                    member: member.clone(),
                    secret,
                    server: access.server.clone(),
                };
                let failed_lately = self.mark_failed.get(&member).is_some_and(|(failed, at)| {
                    *failed == mark && now.duration_since(*at) < MARK_RETRY_PERIOD
                });
                (self.marked.get(&member) != Some(&mark) && !failed_lately).then_some(mark)
            })
            .collect();
        let marks = &self.marks;
        let done = concurrently(due, |mark| async move { (marks.mark(&mark).await, mark) }).await;
        for (outcome, mark) in done {
            let member = mark.member.clone();
            let secret = format!("{}/{}", mark.secret.namespace, mark.secret.name);
            match outcome {
                Ok(Marked::Done) => {
                    self.mark_failed.remove(&member);
                    self.marked.insert(member, mark);
                    continue;
                }
                Ok(Marked::Refused(why)) => tracing::warn!(
                    member,
                    secret,
                    why,
                    "not marking the member's credential Secret for tether-credential"
                ),
                Err(err) => tracing::warn!(
                    member,
                    secret,
                    error = %err,
                    "marking the member's credential Secret for tether-credential failed"
                ),
            }
            self.mark_failed.insert(member, (mark, now));
        }
    }

    /// Writes every observed member whose profile differs from what this replica wrote.
    async fn write_profiles(&mut self) {
        let due: Vec<_> = (self.queue.observed().into_iter())
            .filter_map(|(member, latest)| {
                let status = latest.status.as_ref()?;
                let built =
                    profile::build(&self.namespace, &member, latest.access.as_deref(), status);
                let written = self.written.get(&member);
                let version = written.map(|(_, version)| version.clone());
                (written.map(|(profile, _)| profile) != Some(&built))
                    .then_some((member, built, version))
            })
            .collect();
        let this = &*self;
        let done = concurrently(due, |(member, built, version)| async move {
            (this.write(&member, &built, version).await, member, built)
        })
        .await;
        for (outcome, member, built) in done {
            match outcome {
                // Forgotten meanwhile: keep it forgotten.
                Ok(version) if self.queue.knows(&member) => {
                    self.refused.remove(&member);
                    self.written.insert(member, (built, version));
                }
                Ok(_) => {}
                Err(Refusal::Failed(err)) => {
                    // Read again before the next write: it may be someone else's by then.
                    self.written.remove(&member);
                    tracing::warn!(member, error = %err, "writing ClusterProfile failed");
                }
                Err(Refusal::Foreign(manager)) => {
                    self.written.remove(&member);
                    if self.refused.insert(member.clone()) {
                        tracing::warn!(
                            member,
                            namespace = %self.namespace,
                            manager = manager.as_deref().unwrap_or(""),
                            "a ClusterProfile of another cluster manager has this member's \
                             name; leaving it alone"
                        );
                    }
                }
            }
        }
    }

    /// Writes `built` if the profile is still the version this replica last wrote
    /// (`version`); with none, or when it changed since, reads it first: a profile another
    /// manager keeps, or took over, under the member's name is left alone. Every write is
    /// conditional on the version read ([`ProfilesApi::apply`]), so a takeover between the
    /// read and the write is not overwritten. Returns the version written.
    async fn write(
        &self,
        member: &str,
        built: &ClusterProfile,
        version: Option<String>,
    ) -> Result<String, Refusal> {
        let mut known = version;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let version = match known.take() {
                Some(version) => Some(version),
                None => match self.api.owner(member).await.map_err(Refusal::Failed)? {
                    (Owner::Absent, _) => None,
                    (Owner::Tether, version) => version,
                    (Owner::Other(manager), _) => return Err(Refusal::Foreign(manager)),
                },
            };
            match self.api.apply(built, version.as_deref()).await {
                Ok(written) => return Ok(written),
                // Changed since it was read: read it again, once now, else at the next retry.
                Err(err) if is_conflict(&err) && attempts < WRITE_ATTEMPTS => {}
                Err(err) => return Err(Refusal::Failed(err)),
            }
        }
    }

    /// Deletes the profiles of removed members.
    async fn delete_removed(&mut self) {
        let removed = self.queue.removed();
        let api = &self.api;
        let done = concurrently(removed, |member| async move {
            (api.delete_ours(&member).await, member)
        })
        .await;
        for (outcome, member) in done {
            match outcome {
                Ok(owner) => {
                    match owner {
                        Owner::Tether => tracing::info!(member, "ClusterProfile deleted"),
                        Owner::Other(manager) => tracing::info!(
                            member,
                            manager = manager.as_deref().unwrap_or(""),
                            "not deleting a ClusterProfile Tether does not manage"
                        ),
                        Owner::Absent => tracing::debug!(member, "no ClusterProfile to delete"),
                    }
                    self.queue.deleted(&member);
                    self.written.remove(&member);
                    self.refused.remove(&member);
                    self.marked.remove(&member);
                    self.mark_failed.remove(&member);
                }
                Err(err) => tracing::warn!(member, error = %err, "deleting ClusterProfile failed"),
            }
        }
    }

    /// Deletes Tether's profiles that name no member, once every source has listed (before,
    /// a member not listed yet would look gone). Returns whether that is done.
    async fn delete_garbage(&self) -> bool {
        let sources = self.registry.sources().now();
        if !sources.values().all(|state| *state == SourceState::Listed) {
            return false;
        }
        // Listed before the members are read: a profile written after this list is not in it,
        // and one in it whose member came back is not deleted.
        let ours = match self.api.list_ours().await {
            Ok(ours) => ours,
            Err(err) => {
                tracing::warn!(namespace = %self.namespace, error = %err, "listing ClusterProfiles failed");
                return false;
            }
        };
        let mut members = self.queue.members();
        // A pull-mode Cluster is not Tether's to publish.
        let pull_mode = MemberState::Invalid {
            reason: InvalidReason::PullMode,
        };
        let published =
            |(member, state): (String, MemberState)| (state != pull_mode).then_some(member);
        members.extend(self.registry.states().into_iter().filter_map(published));
        let garbage = ours.into_iter().filter(|meta| {
            meta.name
                .as_ref()
                .is_some_and(|name| !members.contains(name))
        });
        let api = &self.api;
        let deleted = concurrently(garbage, |meta| async move {
            let name = meta.name.clone().unwrap_or_default();
            match api.delete_unchanged(&meta).await {
                Ok(()) => {
                    tracing::info!(profile = name, "ClusterProfile of no member deleted");
                    true
                }
                Err(err) => {
                    tracing::warn!(profile = name, error = %err, "deleting ClusterProfile failed");
                    false
                }
            }
        })
        .await;
        deleted.into_iter().all(|deleted| deleted)
    }
}

/// Why a profile was not written.
enum Refusal {
    /// A request failed; it is tried again.
    Failed(kube::Error),
    /// Another manager's profile has the name (the label's value, if any).
    Foreign(Option<String>),
}
