//! A control plane with Karmada `Cluster`s for N harness members, and the collector watching
//! them: the setup every collector test starts from.

use std::{collections::BTreeMap, time::Duration};

use anyhow::Context as _;
use k8s_openapi::{
    api::{apps::v1::Deployment, coordination::v1::Lease, events::v1::Event},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use testkit::{
    Cluster, Environment, Karmada, PushMember, deployment, eventually, set_deployment_status,
};
use tokio::task::JoinHandle;

use crate::{
    collector_run::{RunningCollector, start_probing},
    limits::{HOUR, START},
};

/// The harness, the Karmada objects, and a running collector.
pub struct Scenario {
    /// The apiservers: 0 is the control plane, 1.. the members.
    pub env: Environment,
    /// Karmada objects on the control plane, and the status the collector writes there.
    pub karmada: Karmada,
    /// The namespace on every member holding the agent ServiceAccounts and test workloads.
    pub namespace: String,
    /// The collector under test.
    pub collector: RunningCollector,
    /// The token each member's Secret was created with (index 0 is member1).
    pub registered_tokens: Vec<String>,
    /// The probe period every collector of this scenario gets.
    probe_period: Duration,
}

/// The name single-member tests give their one member.
pub const MEMBER: &str = "member1";
/// The ServiceAccount whose token a single-member test's member holds.
pub const AGENT: &str = "agent";

/// A control plane and one member with ServiceAccount [`AGENT`] in a fresh namespace
/// `agents-…`, that namespace and an hour's token of it: where a single-member test starts.
pub async fn one_member_with_agent() -> anyhow::Result<(Environment, String, String)> {
    let env = Environment::with_members(1).await?;
    let (ns, token) = env.cluster(1).create_agent("agents", AGENT, HOUR).await?;
    Ok((env, ns, token))
}

/// The Events on `client`'s cluster about objects named `name`, in `namespace` or in all.
pub async fn events_about(
    client: &kube::Client,
    namespace: Option<&str>,
    name: &str,
) -> kube::Result<Vec<Event>> {
    let events: Api<Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let about = |e: &Event| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name);
    let list = events.list(&ListParams::default()).await?;
    Ok(list.into_iter().filter(about).collect())
}

/// Starts a control plane and `members` member apiservers, and installs Karmada
/// ([`Karmada::install`]) and the collector's Lease namespace `tether-system` on the control
/// plane: where every Karmada fleet of the tests starts.
pub async fn karmada_environment(members: usize) -> anyhow::Result<(Environment, Karmada)> {
    karmada_environment_from(testkit::Config::default().members(members)).await
}

/// [`karmada_environment`] with the apiservers `config` describes.
pub async fn karmada_environment_from(
    config: testkit::Config,
) -> anyhow::Result<(Environment, Karmada)> {
    let env = config.start().await?;
    let karmada = Karmada::install(env.control_plane()).await?;
    env.control_plane()
        .create_namespace_named("tether-system")
        .await?;
    Ok((env, karmada))
}

impl Scenario {
    /// Starts `members` member apiservers, registers each as a Karmada `Cluster` whose Secret
    /// holds a token of ServiceAccount `agent-a` on it, and starts the collector with the
    /// admin token as its own credential and a probe period of `probe_period`.
    pub async fn start(members: usize, probe_period: Duration) -> anyhow::Result<Self> {
        Self::start_with(members, probe_period, &[]).await
    }

    /// As [`start`](Self::start), and returns once every member is healthy
    /// ([`Karmada::wait_healthy`]), each within [`START`].
    pub async fn start_healthy(members: usize, probe_period: Duration) -> anyhow::Result<Self> {
        let s = Self::start(members, probe_period).await?;
        for member in s.env.members() {
            s.karmada.wait_healthy(member.name(), START).await?;
        }
        Ok(s)
    }

    /// As [`start`](Self::start), with `extra_args` for the collector.
    pub async fn start_with(
        members: usize,
        probe_period: Duration,
        extra_args: &[&str],
    ) -> anyhow::Result<Self> {
        let (env, karmada) = karmada_environment(members).await?;
        let namespace = format!("tether-e2e-{}", std::process::id());
        let mut registered_tokens = Vec::with_capacity(members);
        for member in env.members() {
            member.create_namespace_named(&namespace).await?;
            for sa in ["agent-a", "agent-b"] {
                member.create_service_account(&namespace, sa).await?;
            }
            let token = member.mint_token(&namespace, "agent-a", HOUR).await?;
            karmada.register(&PushMember::of(member, &token)).await?;
            registered_tokens.push(token);
        }
        // The admin token reads the API through the access reviews, as a scraper would.
        let collector = start_probing(env.control_plane(), &[], probe_period, extra_args).await?;
        Ok(Self {
            env,
            karmada,
            namespace,
            collector,
            registered_tokens,
            probe_period,
        })
    }

    /// Starts another collector against the same control plane, with `extra_args`.
    pub async fn start_collector(&self, extra_args: &[&str]) -> anyhow::Result<RunningCollector> {
        start_probing(self.env.control_plane(), &[], self.probe_period, extra_args).await
    }

    /// Polls until Cluster `member` has `condition`, `Type=Status/Reason` (as
    /// `Ready=True/MemberReady`), and returns how long that took.
    ///
    /// # Errors
    /// A `condition` without `=`, or not within `limit`.
    pub async fn wait(
        &self,
        member: &str,
        condition: &str,
        limit: Duration,
    ) -> anyhow::Result<Duration> {
        let (type_, want) = condition
            .split_once('=')
            .context("not Type=Status/Reason")?;
        self.karmada
            .wait_condition(member, type_, want, limit)
            .await
    }

    /// Member `i` (1-based, as in the environment).
    pub fn member(&self, i: usize) -> &Cluster {
        self.env.cluster(i)
    }

    /// Creates Deployment `name` on member `i` and sets its `readyReplicas`.
    pub async fn create_deployment(&self, i: usize, name: &str, ready: i32) -> anyhow::Result<()> {
        let created = deployment(&self.namespace, name, 3);
        Api::<Deployment>::namespaced(self.member(i).admin_client()?, &self.namespace)
            .create(&PostParams::default(), &created)
            .await?;
        self.set_ready(i, name, ready).await
    }

    /// Sets `readyReplicas` of Deployment `name` on member `i` (the status subresource).
    pub async fn set_ready(&self, i: usize, name: &str, ready: i32) -> anyhow::Result<()> {
        let client = self.member(i).admin_client()?;
        set_deployment_status(&client, &self.namespace, name, ready).await?;
        Ok(())
    }

    /// `readyReplicas` of Deployment `name` as the collector mirrors it from `member`.
    pub async fn mirrored_ready(&self, member: &str, name: &str) -> anyhow::Result<Option<i64>> {
        let list = self
            .collector
            .get_json(&format!("/api/v1/clusters/{member}/apps/v1/deployments"))
            .await?;
        let mut items = list["items"].as_array().into_iter().flatten();
        let ours = items.find(|d| {
            d["metadata"]["name"] == name && d["metadata"]["namespace"] == self.namespace.as_str()
        });
        Ok(ours.and_then(|d| d["status"]["readyReplicas"].as_i64()))
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

    /// Creates `Cluster` `broken`: plain http to loopback with member1's Secret, a member
    /// Tether cannot use and lists all the same.
    pub async fn add_broken_member(&self) -> anyhow::Result<()> {
        let (endpoint, no_annotations) = ("http://127.0.0.1:1", &BTreeMap::new());
        self.karmada
            .create_cluster("broken", endpoint, "member1", false, no_annotations)
            .await
    }

    /// Polls until `collector` has member1 ready and serves `broken`
    /// ([`add_broken_member`](Self::add_broken_member)): it listed and probed both.
    ///
    /// # Errors
    /// Not within `limit`.
    pub async fn wait_sees_both(
        &self,
        collector: &RunningCollector,
        limit: Duration,
    ) -> anyhow::Result<()> {
        eventually("the collector sees member1 and broken", limit, || async {
            let ready = collector.metric("tether_member_ready", r#"member="member1""#);
            let ready = ready.await?;
            let (status, _) = collector.get("/api/v1/clusters/broken").await?;
            anyhow::ensure!((ready, status) == (1.0, 200), "{:?}", (ready, status));
            anyhow::Ok(())
        })
        .await
    }

    /// The sum of a metric's samples that carry `member="<member>"`.
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
        let leases = Api::<Lease>::namespaced(self.karmada.client().clone(), "tether-system");
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
