//! Leader election on the `tether-collector` Lease: of several replicas, exactly one writes
//! status and Events.
//!
//! kube-lease-manager does the locking. Its own loop (`LeaseManager::watch`) lets a follower
//! sleep until the expiry it last read, so a Lease given up on shutdown would sit free for up
//! to its whole duration. A follower here reads the Lease again every
//! [`FOLLOWER_POLL`] instead, as client-go's elector does every `RetryPeriod`, and so takes a
//! released Lease within about a second.

use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::{sync::watch, task::JoinHandle};

use super::ControlPlane;
use crate::{cli::Args, metrics::Metrics};

/// How often a follower reads the Lease again: the longest a released Lease stays free.
const FOLLOWER_POLL: Duration = Duration::from_secs(1);

/// How long to wait after a failed step (the control plane unreachable, say) before the next.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);

/// The leader-election Lease: whether this replica leads, and the tasks that keep it.
///
/// Dropping it stops the election without giving the Lease up (the other replicas then wait for
/// it to expire); [`release`](Self::release) gives it up.
pub(crate) struct Lease {
    leader: Option<watch::Receiver<bool>>,
    /// Mirrors leadership into the metric and the log.
    follower: Option<JoinHandle<()>>,
    /// The election; it releases the Lease once every receiver is gone.
    election: Option<JoinHandle<Result<(), LeaseManagerError>>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        for task in self.follower.iter() {
            task.abort();
        }
        for task in self.election.iter() {
            task.abort();
        }
    }
}

impl Lease {
    /// True while this replica leads.
    pub(crate) fn leader(&self) -> Option<watch::Receiver<bool>> {
        self.leader.clone()
    }

    /// Gives the Lease up, waiting at most `deadline`, so that another replica takes over at
    /// once instead of after the Lease expires. Every receiver handed out by
    /// [`leader`](Self::leader) must be gone: the election releases once none is left.
    pub(crate) async fn release(mut self, deadline: Duration) {
        self.leader = None;
        if let Some(follower) = self.follower.take() {
            follower.abort();
            // Cancelled on purpose: its receiver must be gone before the election looks.
            let _ = follower.await;
        }
        let Some(election) = self.election.take() else {
            return;
        };
        match tokio::time::timeout(deadline, election).await {
            Ok(Ok(Ok(()))) => tracing::info!("released the leader-election Lease"),
            Ok(Ok(Err(err))) => {
                tracing::warn!(error = %err, "releasing the leader-election Lease failed");
            }
            Ok(Err(err)) => tracing::warn!(error = %err, "the leader election ended abnormally"),
            Err(_) => tracing::warn!(?deadline, "releasing the leader-election Lease timed out"),
        }
    }
}

/// What a writer to the control plane starts from: the flags, the control plane (none with
/// `--members-from directory` and no kubeconfig), and who this replica is.
#[derive(Clone, Copy)]
pub(crate) struct Startup<'a> {
    /// The command line.
    pub(crate) args: &'a Args,
    /// The control plane, if there is one.
    pub(crate) control_plane: Option<&'a ControlPlane>,
    /// This replica's name in the election.
    pub(crate) identity: &'a str,
    /// Where leadership is mirrored (`tether_leader`).
    pub(crate) metrics: &'a Metrics,
}

impl Startup<'_> {
    /// `lease` as given; else, with `--leader-elect`, one joined on `control_plane`; else
    /// none: this replica writes alone, and `tether_leader` says that it leads.
    ///
    /// # Errors
    /// Joining the election failing.
    pub(crate) async fn lease_or_join(
        &self,
        lease: Option<Lease>,
        control_plane: &ControlPlane,
    ) -> anyhow::Result<Option<Lease>> {
        match lease {
            Some(lease) => Ok(Some(lease)),
            None if self.args.leader_elect => join_election(
                control_plane.client.clone(),
                self.args,
                self.identity,
                self.metrics,
            )
            .await
            .map(Some),
            None => {
                self.metrics.set_leader(true);
                Ok(None)
            }
        }
    }
}

/// Joins the election for the `tether-collector` Lease; leadership is mirrored into
/// `tether_leader` and logged on each change.
async fn join_election(
    client: Client,
    args: &Args,
    identity: &str,
    metrics: &Metrics,
) -> anyhow::Result<Lease> {
    let duration = args.leader_election_lease_seconds;
    // The renewal margin: renew a third of the duration before expiry (at least 1 s).
    let grace = (duration / 3).max(1);
    let lease = LeaseSpec {
        client,
        namespace: args.leader_election_namespace.clone(),
        identity: identity.to_owned(),
        duration,
        grace,
    };
    let manager = lease.manager().await.context("joining leader election")?;
    let (sender, leader) = watch::channel(false);
    let election = tokio::spawn(elect(lease, manager, sender, FOLLOWER_POLL));
    let mut changes = leader.clone();
    let metrics = metrics.clone();
    let identity = identity.to_owned();
    let follower = tokio::spawn(async move {
        loop {
            let leading = *changes.borrow_and_update();
            metrics.set_leader(leading);
            tracing::info!(identity = %identity, leading, "leader election");
            if changes.changed().await.is_err() {
                break;
            }
        }
    });
    Ok(Lease {
        leader: Some(leader),
        follower: Some(follower),
        election: Some(election),
    })
}

/// What a [`LeaseManager`] is built from, kept to build a fresh one (a fresh read of the Lease).
struct LeaseSpec {
    client: Client,
    namespace: String,
    identity: String,
    duration: u64,
    grace: u64,
}

impl LeaseSpec {
    async fn manager(&self) -> Result<LeaseManager, LeaseManagerError> {
        LeaseManagerBuilder::new(self.client.clone(), "tether-collector")
            .with_namespace(&self.namespace)
            .with_identity(&self.identity)
            .with_duration(self.duration)
            .with_grace(self.grace)
            .build()
            .await
    }
}

/// Runs the election until every receiver of `sender` is gone, then releases the Lease.
///
/// A leader waits in [`LeaseManager::changed`], which renews. A follower waits there at most
/// `poll`, then builds a fresh manager, whose first step reads the Lease: a Lease released by
/// its holder is then taken within `poll`, not when its last renewal would have expired.
async fn elect(
    lease: LeaseSpec,
    mut manager: LeaseManager,
    sender: watch::Sender<bool>,
    poll: Duration,
) -> Result<(), LeaseManagerError> {
    let mut leading = false;
    loop {
        let step = async {
            if leading {
                Some(manager.changed().await)
            } else {
                tokio::time::timeout(poll, manager.changed()).await.ok()
            }
        };
        tokio::select! {
            biased;
            () = sender.closed() => return manager.release().await,
            step = step => match step {
                Some(Ok(now_leading)) => {
                    leading = now_leading;
                    if sender.send(leading).is_err() {
                        return manager.release().await;
                    }
                }
                Some(Err(err)) => {
                    tracing::warn!(error = %err, "leader election step failed; retrying");
                    tokio::time::sleep(RETRY_AFTER_ERROR).await;
                }
                None => match lease.manager().await {
                    Ok(fresh) => manager = fresh,
                    Err(err) => {
                        tracing::warn!(error = %err, "reading the leader-election Lease failed; retrying");
                        tokio::time::sleep(RETRY_AFTER_ERROR).await;
                    }
                },
            },
        }
    }
}
