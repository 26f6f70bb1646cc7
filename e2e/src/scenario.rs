//! A control plane with Karmada `Cluster`s for N harness members, and the collector watching
//! them: the setup every collector test starts from.

use std::time::Duration;

use k8s_openapi::{
    api::{apps::v1::Deployment, coordination::v1::Lease},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use testkit::{Cluster, Environment, deployment, eventually, set_deployment_status};
use tokio::task::JoinHandle;

use crate::{
    collector_run::{RunningCollector, control_plane_args},
    karmada_plane::KarmadaPlane,
};

/// How long a token minted for the tests lives.
pub const HOUR: Duration = Duration::from_secs(3600);

/// The harness, the Karmada objects, and a running collector.
pub struct Scenario {
    /// The apiservers: 0 is the control plane, 1.. the members.
    pub env: Environment,
    /// Karmada objects on the control plane.
    pub plane: KarmadaPlane,
    /// The namespace on every member holding the agent ServiceAccounts and test workloads.
    pub namespace: String,
    /// The collector under test.
    pub collector: RunningCollector,
    /// The token each member's Secret was created with (index 0 is member1).
    pub registered_tokens: Vec<String>,
    /// The flags every collector of this scenario gets (control plane, probe period).
    collector_args: Vec<String>,
    /// The token the scenario's collectors are read with.
    admin_token: String,
}

impl Scenario {
    /// Starts `members` member apiservers, registers each as a Karmada `Cluster` whose Secret
    /// holds a token of ServiceAccount `agent-a` on it, and starts the collector with the
    /// admin token as its own credential and a probe period of `probe_period`.
    ///
    /// # Errors
    /// Any step failing.
    pub async fn start(members: usize, probe_period: Duration) -> anyhow::Result<Self> {
        Self::start_with(members, probe_period, &[]).await
    }

    /// As [`start`](Self::start), with `extra_args` for the collector.
    ///
    /// # Errors
    /// Any step failing.
    pub async fn start_with(
        members: usize,
        probe_period: Duration,
        extra_args: &[&str],
    ) -> anyhow::Result<Self> {
        let env = Environment::with_members(members).await?;
        let plane = KarmadaPlane::install(env.control_plane()).await?;
        let namespace = format!("tether-e2e-{}", std::process::id());
        let mut registered_tokens = Vec::with_capacity(members);
        for member in env.members() {
            member.create_namespace_named(&namespace).await?;
            for sa in ["agent-a", "agent-b"] {
                member.create_service_account(&namespace, sa).await?;
            }
            let token = member.mint_token(&namespace, "agent-a", HOUR).await?;
            plane.register(member, &token).await?;
            registered_tokens.push(token);
        }
        let control_plane = env.control_plane();
        // The collector's leader-election Lease lives in its own namespace.
        control_plane
            .create_namespace_named("tether-system")
            .await?;
        let admin_token = control_plane.admin_token()?;
        let mut collector_args = control_plane_args(control_plane, &admin_token)?;
        collector_args.extend([
            "--probe-period".to_owned(),
            probe_period.as_secs().max(1).to_string(),
        ]);
        let mut first = collector_args.clone();
        first.extend(extra_args.iter().map(|a| (*a).to_owned()));
        // The admin token reads the API through the access reviews, as a scraper would.
        let collector = RunningCollector::start(&first)
            .await?
            .with_reader(&admin_token);
        Ok(Self {
            env,
            plane,
            namespace,
            collector,
            registered_tokens,
            collector_args,
            admin_token,
        })
    }

    /// Starts another collector against the same control plane, with `extra_args`.
    ///
    /// # Errors
    /// As [`RunningCollector::start`].
    pub async fn start_collector(&self, extra_args: &[&str]) -> anyhow::Result<RunningCollector> {
        let mut args = self.collector_args.clone();
        args.extend(extra_args.iter().map(|a| (*a).to_owned()));
        Ok(RunningCollector::start(&args)
            .await?
            .with_reader(&self.admin_token))
    }

    /// Member `i` (1-based, as in the environment).
    pub fn member(&self, i: usize) -> &Cluster {
        self.env.cluster(i)
    }

    /// Creates Deployment `name` on member `i` and sets its `readyReplicas`.
    ///
    /// # Errors
    /// API errors.
    pub async fn create_deployment(&self, i: usize, name: &str, ready: i32) -> anyhow::Result<()> {
        let client = self.member(i).admin_client()?;
        Api::<Deployment>::namespaced(client.clone(), &self.namespace)
            .create(
                &PostParams::default(),
                &deployment(&self.namespace, name, 3),
            )
            .await?;
        set_deployment_status(&client, &self.namespace, name, ready).await?;
        Ok(())
    }

    /// Sets `readyReplicas` of Deployment `name` on member `i` (the status subresource).
    ///
    /// # Errors
    /// API errors.
    pub async fn set_ready(&self, i: usize, name: &str, ready: i32) -> anyhow::Result<()> {
        set_deployment_status(
            &self.member(i).admin_client()?,
            &self.namespace,
            name,
            ready,
        )
        .await?;
        Ok(())
    }

    /// `readyReplicas` of Deployment `name` as the collector mirrors it from `member`.
    ///
    /// # Errors
    /// The collector's API failing.
    pub async fn mirrored_ready(&self, member: &str, name: &str) -> anyhow::Result<Option<i64>> {
        let list = self
            .collector
            .get_json(&format!("/api/v1/clusters/{member}/apps/v1/deployments"))
            .await?;
        Ok(list["items"].as_array().and_then(|items| {
            items
                .iter()
                .find(|d| {
                    d["metadata"]["name"] == name
                        && d["metadata"]["namespace"] == self.namespace.as_str()
                })
                .and_then(|d| d["status"]["readyReplicas"].as_i64())
        }))
    }

    /// Polls until the mirrored `readyReplicas` of `name` on `member` is `want`.
    ///
    /// # Errors
    /// Not converging within `limit`.
    pub async fn wait_mirrored(
        &self,
        member: &str,
        name: &str,
        want: i64,
        limit: Duration,
    ) -> anyhow::Result<Duration> {
        let started = tokio::time::Instant::now();
        let what = format!("{member}/{name} mirrors readyReplicas={want}");
        eventually(&what, limit, || async {
            match self.mirrored_ready(member, name).await {
                Ok(Some(now)) if now == want => Ok(()),
                Ok(now) => Err(format!("readyReplicas {now:?}")),
                Err(err) => Err(format!("{err:#}")),
            }
        })
        .await?;
        Ok(started.elapsed())
    }

    /// Polls until `member`'s `Cluster` has condition `type_` with `status` and `reason`
    /// ([`KarmadaPlane::wait_condition`]).
    ///
    /// # Errors
    /// Not reaching it within `limit`.
    pub async fn wait_condition(
        &self,
        member: &str,
        type_: &str,
        status: &str,
        reason: &str,
        limit: Duration,
    ) -> anyhow::Result<Duration> {
        self.plane
            .wait_condition(member, type_, status, reason, limit)
            .await
    }

    /// Polls until `member` is `Ready=True/MemberReady` and `CredentialsValid=True/CredentialsAccepted`.
    ///
    /// # Errors
    /// Not reaching both within `limit` each.
    pub async fn wait_healthy(&self, member: &str, limit: Duration) -> anyhow::Result<()> {
        self.wait_condition(member, "Ready", "True", "MemberReady", limit)
            .await?;
        self.wait_condition(
            member,
            "CredentialsValid",
            "True",
            "CredentialsAccepted",
            limit,
        )
        .await?;
        Ok(())
    }

    /// The sum of a metric's samples that carry `member="<member>"`.
    ///
    /// # Errors
    /// The collector's API failing.
    pub async fn metric(&self, name: &str, member: &str) -> anyhow::Result<f64> {
        self.collector
            .metric(name, &format!("member=\"{member}\""))
            .await
    }

    /// Creates the collectors' leader Lease held by `someone-else` for `held`, and renews it
    /// every second until the returned task is aborted: the collectors of the scenario follow.
    ///
    /// # Errors
    /// The Lease not created.
    pub async fn hold_the_lease(&self, held: Duration) -> anyhow::Result<JoinHandle<()>> {
        let leases = Api::<Lease>::namespaced(self.plane.client().clone(), "tether-system");
        let now = || MicroTime(Timestamp::now());
        let lease: Lease = serde_json::from_value(json!({
            "metadata": { "name": "tether-collector" },
            "spec": {
                "holderIdentity": "someone-else",
                "leaseDurationSeconds": held.as_secs(),
                "acquireTime": now(),
                "renewTime": now(),
            },
        }))?;
        leases.create(&PostParams::default(), &lease).await?;
        Ok(tokio::spawn(async move {
            let params = PatchParams::default();
            loop {
                let renew = Patch::Merge(json!({ "spec": { "renewTime": now() } }));
                if let Err(err) = leases.patch("tether-collector", &params, &renew).await {
                    eprintln!("the held Lease lapses: renewing it failed: {err}");
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }))
    }
}
