//! The sharded collector replicas of the bench, and who serves what: each replica's read API
//! lists the members it owns.

use std::{collections::BTreeMap, path::Path};

use testkit::{CollectorProcess, metrics};

use super::ShardedOptions;
use crate::scale::{collector_log::start_collector, fleet::Fleet};

/// One replica: its identity and process.
pub struct Replica {
    /// `--leader-election-identity`, and so `tether-shard-<identity>`.
    pub identity: String,
    /// The process (SIGKILLed when dropped).
    pub process: CollectorProcess,
}

/// Starts replica `identity` of the shard group over `fleet`.
///
/// # Errors
/// Spawning fails or it does not serve within 30 s.
pub async fn start(
    bin: &Path,
    fleet: &Fleet,
    identity: &str,
    options: &ShardedOptions,
) -> anyhow::Result<Replica> {
    let extra = [
        "--shards",
        "auto",
        "--shard-lease-seconds",
        &options.lease_seconds.to_string(),
        "--leader-election-identity",
        identity,
    ]
    .map(str::to_owned);
    let (process, _log) =
        start_collector(bin, fleet.env.control_plane(), options.probe_period, &extra).await?;
    Ok(Replica {
        identity: identity.to_owned(),
        process,
    })
}

/// Member → the replicas whose read API lists it now. A replica that does not answer lists
/// nothing.
pub async fn owners(replicas: &[Replica]) -> BTreeMap<String, Vec<String>> {
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for replica in replicas {
        let Ok((200, body)) = replica.process.get("/api/v1/clusters").await else {
            continue;
        };
        let Ok(list) = serde_json::from_str::<Vec<serde_json::Value>>(&body) else {
            continue;
        };
        for member in list.iter().filter_map(|c| c["name"].as_str()) {
            owners
                .entry(member.to_owned())
                .or_default()
                .push(replica.identity.clone());
        }
    }
    owners
}

/// The sum of `name` (with the labels of `selector`, as in [`metrics::sum`]) over every
/// replica's `/metrics`.
pub async fn metric_sum(replicas: &[Replica], name: &str, selector: &str) -> f64 {
    let mut total = 0.0;
    for replica in replicas {
        if let Ok(text) = replica.process.metrics().await {
            total += metrics::sum(&text, name, selector);
        }
    }
    total
}

/// The member credentials `replica` keeps in memory, if it reports them.
pub async fn credentials_held(replica: &Replica) -> Option<f64> {
    let text = replica.process.metrics().await.ok()?;
    let exposition = metrics::Exposition::parse(&text);
    let name = "tether_member_credentials_held";
    exposition
        .series_names()
        .contains(name)
        .then(|| exposition.sum(name, ""))
}

/// Whether every replica keeps in memory the credentials of exactly the members `owned` says
/// it serves (`tether_member_credentials_held`). `None` when no replica reports the metric (a
/// collector from before it).
pub async fn shares_held(
    replicas: &[Replica],
    owned: &BTreeMap<String, Vec<String>>,
) -> Option<bool> {
    let mut reported = false;
    let mut exact = true;
    for replica in replicas {
        let share = owned
            .values()
            .filter(|o| o.contains(&replica.identity))
            .count();
        match credentials_held(replica).await {
            Some(held) => {
                reported = true;
                exact &= held == share as f64;
            }
            None => exact = false,
        }
    }
    reported.then_some(exact)
}
