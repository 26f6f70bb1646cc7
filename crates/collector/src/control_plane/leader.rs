//! Leader election on the `tether-collector` Lease: of several replicas, exactly one writes
//! status and Events.

use anyhow::Context as _;
use kube::Client;

use crate::{cli::Args, metrics::Metrics};

/// The leader-election Lease: whether this replica leads, and the task that keeps it.
pub(crate) struct Lease {
    /// True while this replica leads.
    pub(crate) leader: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
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
    let task = tokio::spawn(async move {
        loop {
            let leading = *changes.borrow_and_update();
            metrics.set_leader(leading);
            tracing::info!(identity = %identity, leading, "leader election");
            if changes.changed().await.is_err() {
                break;
            }
        }
        election.abort();
    });
    Ok(Lease { leader, task })
}
