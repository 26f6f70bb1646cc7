//! A fleet for sharded collectors: Karmada `Cluster`s on the harness control plane, each with
//! its own ServiceAccount on a member apiserver, and collector replicas as child processes
//! (so that one can be SIGKILLed or frozen).

use std::time::Duration;

use testkit::{CollectorProcess, Environment, Karmada, MIN_TOKEN_EXPIRY, PushMember};

use crate::{
    collector_run::{admin_args, spawn_healthy, temp_dir},
    scenario::karmada_environment,
};

/// The namespace of the members' ServiceAccounts on each member apiserver.
const MEMBER_NAMESPACE: &str = "tether-shard";

/// The harness, the Karmada objects and the member names.
pub struct ShardPlane {
    /// The apiservers: 0 is the control plane, 1.. the members.
    pub env: Environment,
    /// Karmada on the control plane.
    pub karmada: Karmada,
    /// Every member's `Cluster` name.
    pub members: Vec<String>,
}

impl ShardPlane {
    /// Starts `apiservers` member apiservers and registers `members` push-mode members over
    /// them, round robin, each with a token of its own ServiceAccount.
    pub async fn start(apiservers: usize, members: usize) -> anyhow::Result<Self> {
        let (env, karmada) = karmada_environment(apiservers).await?;
        for cluster in 1..=apiservers {
            let member = env.cluster(cluster);
            member.create_namespace_named(MEMBER_NAMESPACE).await?;
            member.grant_reader_to_namespace(MEMBER_NAMESPACE).await?;
        }
        let mut names = Vec::with_capacity(members);
        for i in 0..members {
            let name = format!("s{i:03}");
            let cluster = env.cluster(1 + i % apiservers);
            let account = format!("member-{i}");
            cluster
                .create_service_account(MEMBER_NAMESPACE, &account)
                .await?;
            let token = cluster
                .mint_token(MEMBER_NAMESPACE, &account, MIN_TOKEN_EXPIRY)
                .await?;
            let member = PushMember {
                name: &name,
                ..PushMember::of(cluster, &token)
            };
            karmada.register(&member).await?;
            names.push(name);
        }
        Ok(Self {
            env,
            karmada,
            members: names,
        })
    }

    /// Starts a sharded replica `identity` (a child process, Lease `lease_seconds`) with
    /// `extra` flags, and waits until it serves.
    ///
    /// # Errors
    /// The binary missing, or the replica not serving within a minute.
    pub async fn replica(
        &self,
        identity: &str,
        lease_seconds: u64,
        extra: &[&str],
    ) -> anyhow::Result<CollectorProcess> {
        let mut args = admin_args(self.env.control_plane())?;
        let seconds = lease_seconds.to_string();
        let sharded = ["--insecure-serve-api", "--shards", "auto"];
        let lease = ["--shard-lease-seconds", &seconds];
        let identity_flag = ["--leader-election-identity", identity];
        let flags = [&sharded[..], &lease, &identity_flag, extra].concat();
        args.extend(flags.iter().map(|a| (*a).to_owned()));
        spawn_healthy(&args, &temp_dir(identity)?, Duration::from_secs(60)).await
    }
}

/// The members `replica` serves on its read API (`/api/v1/clusters`).
///
/// # Errors
/// The request failing or an answer that is not a list of clusters.
pub async fn served(replica: &CollectorProcess) -> anyhow::Result<Vec<String>> {
    let (status, body) = replica.get("/api/v1/clusters").await?;
    anyhow::ensure!(status == 200, "GET /api/v1/clusters: {status}");
    let list: Vec<serde_json::Value> = serde_json::from_str(&body)?;
    Ok(list
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect())
}
