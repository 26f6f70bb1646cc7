//! Sharding (`--shards auto`): replicas split the members between them, with Kubernetes
//! Leases for membership and `resourceVersion` preconditions for fencing; nothing to agree on
//! beyond those.
//!
//! ```text
//!  Membership (own Lease, renewed; the group's Leases, read every second)
//!       │ ShardView: live replicas, and this one's identity/generation
//!       ▼
//!  Ownership (in the supervisor): Assignment::compute(members, replicas) ─► gained / lost
//!       │ gained: start the member's task            lost: stop it, forget what it published
//!       ▼
//!  StatusWriter: status with the claim (condition TetherShardOwner) and the resourceVersion
//!                last written; a 409 showing another claim fences this replica out
//! ```

mod args;
mod assignment;
mod liveness;
mod map;
mod membership;
mod ownership;
mod view;

use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use tokio::sync::watch;

pub use args::{ShardArgs, ShardMode};
#[cfg(test)]
pub(crate) use assignment::Assignment;
pub(crate) use map::{Owner, ShardMap};
pub(crate) use ownership::Ownership;
pub(crate) use view::ShardView;

use membership::{Membership, MembershipConfig};

/// This replica's part in a shard group.
pub(crate) struct Shard {
    /// The group as last read.
    pub(crate) view: watch::Receiver<ShardView>,
    /// The assignment acted on.
    pub(crate) map: ShardMap,
    pub(crate) load_factor: f64,
    config: MembershipConfig,
    client: Client,
}

impl Shard {
    /// Joins the group `args` name as `identity`; returns the shard and the future that keeps
    /// its Lease (nothing is renewed unless it runs).
    ///
    /// # Errors
    /// An identity that makes no Lease name.
    pub(crate) fn join(
        client: Client,
        args: &ShardArgs,
        namespace: &str,
        identity: &str,
    ) -> anyhow::Result<(Self, impl Future<Output = ()> + Send + 'static)> {
        if !args::is_lease_identity(identity) {
            anyhow::bail!(
                "--shards auto: the identity {identity:?} makes no Lease name \
                 (tether-shard-<identity> must be a DNS-1123 subdomain); set \
                 --leader-election-identity or POD_NAME"
            );
        }
        let config = MembershipConfig {
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            args: args.clone(),
        };
        let (sender, view) = watch::channel(ShardView::default());
        let membership = Membership::new(client.clone(), config.clone());
        let this = Self {
            view,
            map: ShardMap::default(),
            load_factor: args.shard_load_factor,
            config,
            client,
        };
        Ok((this, membership.run(sender)))
    }

    /// Gives this replica's Lease up, waiting at most `deadline`.
    pub(crate) async fn release(self, deadline: Duration) {
        Membership::release(self.client, &self.config, deadline).await;
    }

    /// How long a member moved away stays watched here while its new owner starts it: one
    /// renewal of the Lease.
    pub(crate) fn handover(&self) -> Duration {
        self.config.args.lease_duration() / 3
    }

    /// How long a replica that owns a member waits after first seeing another replica's claim
    /// on it before taking the claim over: two reads of the group, after which views that
    /// disagreed agree again.
    pub(crate) fn settle(&self) -> Duration {
        self.config.poll_period() * 2
    }
}

/// Fails early on what the group cannot work with.
pub(crate) fn require_control_plane<T>(control_plane: Option<T>) -> anyhow::Result<T> {
    control_plane.context(
        "--shards auto keeps Leases on the control plane: give --kubeconfig or \
         --control-plane-url",
    )
}
