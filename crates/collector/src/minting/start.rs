//! Wires token minting into the collector: the control plane, and the leader election it
//! mints under.

use crate::control_plane::{Lease, Startup};

use super::Minter;

/// The minter `args` ask for, and the Lease: `lease` as given, or one joined here when
/// minting (`--mint-tokens`, `--mint-tokens-for`) needs leader election and nothing joined it yet.
///
/// # Errors
/// Joining the election failing.
pub(crate) async fn minter(
    startup: Startup<'_>,
    lease: Option<Lease>,
) -> anyhow::Result<(Minter, Option<Lease>)> {
    let Startup {
        args,
        control_plane,
        identity,
        metrics,
    } = startup;
    let lease = match control_plane {
        // Without election nothing is joined, and minting alone does not claim to lead.
        Some(cp) if args.mint.minting() && args.leader_elect => {
            startup.lease_or_join(lease, cp).await?
        }
        _ => lease,
    };
    let sharded = args.shard.shards == crate::shard::ShardMode::Auto;
    let unelected = lease.is_none() && args.leader_elect && control_plane.is_some();
    let refusal = if sharded {
        Some(
            "this collector shares its members with other replicas (--shards auto), and token \
             minting needs a single writer: mint with one replica, or with leader election \
             and without --shards",
        )
    } else {
        unelected.then_some(
            "this collector runs with leader election (--leader-elect) but joined none, so it \
             cannot know it is the only replica minting: run it with --mint-tokens or \
             --mint-tokens-for (it then joins the election), or with --leader-elect=false as a \
             single replica",
        )
    };
    let minter = Minter {
        control_plane: control_plane.map(|cp| cp.client.clone()),
        identity: identity.to_owned(),
        leader: lease.as_ref().and_then(Lease::leader),
        refusal: refusal.map(str::to_owned),
        args: args.mint.clone(),
        policy: args.endpoint_policy(),
        request_timeout: args.request_timeout(),
        metrics: metrics.clone(),
    };
    Ok((minter, lease))
}
