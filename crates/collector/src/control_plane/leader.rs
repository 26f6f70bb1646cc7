//! Leader election on the `tether-collector` Lease: of several replicas, exactly one writes
//! status and Events.

use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerError};
use tokio::{sync::watch, task::JoinHandle};

use crate::{cli::Args, metrics::Metrics};

/// The leader-election Lease: whether this replica leads, and the tasks that keep it.
///
/// Dropping it stops the election without giving the Lease up (the other replicas then wait for
/// it to expire); [`release`](Self::release) gives it up.
pub(crate) struct Lease {
    leader: Option<watch::Receiver<bool>>,
    /// Mirrors leadership into the metric and the log.
    follower: Option<JoinHandle<()>>,
    /// kube-lease-manager's election; it releases the Lease once every receiver is gone.
    election: Option<JoinHandle<Result<LeaseManager, LeaseManagerError>>>,
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
            Ok(Ok(Ok(_))) => tracing::info!("released the leader-election Lease"),
            Ok(Ok(Err(err))) => {
                tracing::warn!(error = %err, "releasing the leader-election Lease failed");
            }
            Ok(Err(err)) => tracing::warn!(error = %err, "the leader election ended abnormally"),
            Err(_) => tracing::warn!(?deadline, "releasing the leader-election Lease timed out"),
        }
    }
}

/// Joins the election for the `tether-collector` Lease; leadership is mirrored into
/// `tether_leader` and logged on each change.
pub(crate) async fn join_election(
    client: Client,
    args: &Args,
    identity: &str,
    metrics: &Metrics,
) -> anyhow::Result<Lease> {
    let duration = args.leader_election_lease_seconds;
    // The renewal margin: renew a third of the duration before expiry (at least 1 s).
    let grace = (duration / 3).max(1);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, "tether-collector")
        .with_namespace(&args.leader_election_namespace)
        .with_identity(identity)
        .with_duration(duration)
        .with_grace(grace)
        .build()
        .await
        .context("joining leader election")?;
    let (leader, election) = manager.watch().await;
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
