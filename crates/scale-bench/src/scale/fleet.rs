//! N logical member clusters on a few real member apiservers.
//!
//! Member `memberN` is a Karmada `Cluster` on the control plane pointing at member apiserver
//! `N mod A` (A apiservers). It has its own ServiceAccounts (`memberN-g0`, `memberN-g1`, …, one
//! per credential generation) in a namespace of that apiserver, its own TokenRequest token and
//! its own Secret `karmada-cluster/memberN`. Members share apiservers, never credentials.
//!
//! Every API call goes through one admin client per apiserver (built once, so connections are
//! reused), and bulk work runs at most [`Fleet::concurrency`] calls at once.

use std::{
    future::Future,
    time::{Duration, Instant, SystemTime},
};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _, stream};
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenReview},
    core::v1::ServiceAccount,
};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use serde_json::json;
use testkit::{Environment, Karmada, PushMember};

/// Namespace of the member Secrets on the control plane, as Karmada uses it.
pub use testkit::karmada::SECRET_NAMESPACE;
/// Namespace of the collector's leader-election Lease (its default without `POD_NAMESPACE`).
pub const LEASE_NAMESPACE: &str = "tether-system";
/// How long minted tokens live: longer than any run, so expiry never triggers a refresh.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// One member apiserver and what the fleet keeps on it.
pub struct MemberApiserver {
    /// Index in the environment (`member1` of the harness is 1).
    pub env_index: usize,
    /// Admin client, built once.
    pub admin: Client,
    /// Namespace holding the ServiceAccounts of the members it serves.
    pub namespace: String,
    /// `https://127.0.0.1:<port>`.
    pub endpoint: String,
    /// The endpoint's port: what the collector's connections to it are counted by.
    pub port: u16,
    /// PEM CA bundle of its serving certificate.
    pub ca_pem: String,
}

/// One logical member cluster.
#[derive(Clone, Debug)]
pub struct Member {
    /// `N` in `memberN`, from 1.
    pub n: usize,
    /// `memberN`: the `Cluster`, the Secret and the ServiceAccount prefix.
    pub name: String,
    /// Index into [`Fleet::apiservers`]: `N mod A`.
    pub apiserver: usize,
    /// Generation of the ServiceAccount whose token the Secret holds now.
    pub generation: u32,
    /// The token the Secret holds now.
    pub token: String,
}

impl Member {
    /// The ServiceAccount of credential generation `generation`.
    pub fn service_account(&self, generation: u32) -> String {
        format!("{}-g{generation}", self.name)
    }
}

/// The next credential generation of some members: ServiceAccounts made and tokens minted, not
/// yet in the members' Secrets.
pub struct NextGeneration {
    /// The generation after the one the members are at.
    pub next: u32,
    /// The members, by `N`, in their order.
    pub members: Vec<usize>,
    /// Each member's token of `next`, in the members' order.
    pub tokens: Vec<String>,
}

/// The harness, the control plane's admin client, the member apiservers and the members.
pub struct Fleet {
    /// Control plane (0) and member apiservers (1..).
    pub env: Environment,
    /// Admin client of the control plane.
    pub control_plane: Client,
    /// Karmada's objects on the control plane, through the same client.
    karmada: Karmada,
    /// The member apiservers.
    pub apiservers: Vec<MemberApiserver>,
    /// The members, `member1` first.
    pub members: Vec<Member>,
    /// How many API calls bulk operations keep in flight.
    pub concurrency: usize,
    /// How long [`Fleet::start`] took after the apiservers were ready.
    pub setup: Duration,
}

impl Fleet {
    /// Starts a control plane and `apiservers` member apiservers, installs the Karmada `Cluster`
    /// CRD ([`Karmada::install`]) and the collector's Lease namespace, and registers `members`
    /// members, each with ServiceAccounts for generations 0 and 1, a generation-0 token in its
    /// Secret, and its `Cluster`.
    ///
    /// # Errors
    /// The harness not starting, or any API call failing.
    pub async fn start(
        members: usize,
        apiservers: usize,
        concurrency: usize,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(apiservers > 0 && members > 0, "need members and apiservers");
        let env = Environment::with_members(apiservers).await?;
        let started = Instant::now();
        let karmada = Karmada::install(env.control_plane()).await?;
        env.control_plane()
            .create_namespace_named(LEASE_NAMESPACE)
            .await?;
        let mut servers = Vec::with_capacity(apiservers);
        for (i, cluster) in env.members().iter().enumerate() {
            let namespace = cluster.create_namespace("tether-scale").await?;
            // Every member's ServiceAccounts read what the collector reads: one binding to the
            // namespace's ServiceAccount group, instead of one per member.
            cluster.grant_reader_to_namespace(&namespace).await?;
            let port = (cluster.endpoint().parse::<http::Uri>().ok())
                .and_then(|uri| uri.port_u16())
                .with_context(|| format!("no port in {}", cluster.endpoint()))?;
            servers.push(MemberApiserver {
                env_index: i + 1,
                admin: cluster.admin_client()?,
                namespace,
                endpoint: cluster.endpoint().to_owned(),
                port,
                ca_pem: cluster.ca_pem().to_owned(),
            });
        }
        let mut fleet = Self {
            env,
            control_plane: karmada.client().clone(),
            karmada,
            apiservers: servers,
            members: Vec::new(),
            concurrency: concurrency.max(1),
            setup: Duration::ZERO,
        };
        let names: Vec<Member> = (1..=members)
            .map(|n| Member {
                n,
                name: format!("member{n}"),
                apiserver: n % apiservers,
                generation: 0,
                token: String::new(),
            })
            .collect();
        for generation in [0, 1] {
            fleet
                .bounded(names.iter(), |m| {
                    fleet.ensure_service_account(m, generation)
                })
                .await?;
        }
        let tokens = fleet
            .bounded(names.iter(), |m| fleet.mint(m, 0))
            .await
            .context("minting generation-0 tokens")?;
        fleet.members = names
            .into_iter()
            .zip(tokens)
            .map(|(member, token)| Member { token, ..member })
            .collect();
        fleet
            .bounded(fleet.members.iter(), |m| fleet.register(m))
            .await
            .context("registering the members")?;
        fleet.setup = started.elapsed();
        Ok(fleet)
    }

    /// Runs `f` over `items`, at most [`concurrency`](Self::concurrency) at once, in order.
    ///
    /// # Errors
    /// The first error of `f`.
    pub async fn bounded<T, R, F, Fut>(
        &self,
        items: impl IntoIterator<Item = T>,
        f: F,
    ) -> anyhow::Result<Vec<R>>
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = anyhow::Result<R>>,
    {
        stream::iter(items)
            .map(f)
            .buffered(self.concurrency)
            .try_collect()
            .await
    }

    /// The apiserver serving `member`.
    pub fn apiserver_of(&self, member: &Member) -> &MemberApiserver {
        &self.apiservers[member.apiserver]
    }

    /// `member`'s ServiceAccounts, through its apiserver's admin client.
    fn service_accounts(&self, member: &Member) -> Api<ServiceAccount> {
        let server = self.apiserver_of(member);
        Api::namespaced(server.admin.clone(), &server.namespace)
    }

    /// Creates `member`'s ServiceAccount of `generation` unless it exists ([`Fleet::start`]
    /// makes generation 1 ahead of the first rotation).
    async fn ensure_service_account(&self, member: &Member, generation: u32) -> anyhow::Result<()> {
        let name = member.service_account(generation);
        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        let api = self.service_accounts(member);
        match api.create(&PostParams::default(), &sa).await {
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            created => created
                .map(drop)
                .with_context(|| format!("creating {name}")),
        }
    }

    /// Mints a token of `member`'s ServiceAccount of `generation` (TokenRequest).
    ///
    /// # Errors
    /// API errors, or no token in the answer.
    pub async fn mint(&self, member: &Member, generation: u32) -> anyhow::Result<String> {
        let spec = json!({"expirationSeconds": TOKEN_LIFETIME.as_secs()});
        let request: TokenRequest = serde_json::from_value(json!({ "spec": spec }))?;
        let sa = member.service_account(generation);
        self.service_accounts(member)
            .create_token_request(&sa, &PostParams::default(), &request)
            .await
            .with_context(|| format!("TokenRequest for {sa}"))?
            .status
            .and_then(|s| s.token)
            .with_context(|| format!("TokenRequest for {sa} returned no token"))
    }

    /// Whether `member`'s apiserver still authenticates `token` (TokenReview, through the
    /// same authenticator and token cache as every request).
    ///
    /// # Errors
    /// API errors.
    pub async fn token_accepted(&self, member: &Member, token: &str) -> anyhow::Result<bool> {
        let review: TokenReview = serde_json::from_value(json!({"spec": {"token": token}}))?;
        let reviewed = Api::<TokenReview>::all(self.apiserver_of(member).admin.clone())
            .create(&PostParams::default(), &review)
            .await
            .context("TokenReview")?;
        let status = reviewed.status.unwrap_or_default();
        Ok(status.authenticated == Some(true))
    }

    /// Polls TokenReview until no member's apiserver accepts its `token` any more (the old
    /// tokens after their ServiceAccounts were deleted; the apiserver caches accepted tokens for
    /// ~10 s).
    ///
    /// # Errors
    /// API errors, or tokens still accepted at `deadline`.
    pub async fn wait_until_rejected<'m>(
        &self,
        members: impl IntoIterator<Item = &'m Member>,
        deadline: Instant,
    ) -> anyhow::Result<()> {
        let mut alive: Vec<&Member> = members.into_iter().collect();
        while !alive.is_empty() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{} old tokens still accepted after their ServiceAccounts were deleted",
                alive.len()
            );
            let accepted = self
                .bounded(alive.iter(), |m| self.token_accepted(m, &m.token))
                .await?;
            alive = alive
                .into_iter()
                .zip(accepted)
                .filter_map(|(m, ok)| ok.then_some(m))
                .collect();
            if !alive.is_empty() {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Ok(())
    }

    /// Makes the ServiceAccounts of the next generation of `members` (all at one generation)
    /// unless they exist, and mints a token of each.
    ///
    /// # Errors
    /// API errors.
    pub async fn mint_next_generation(&self, members: &[Member]) -> anyhow::Result<NextGeneration> {
        let next = members.first().map_or(0, |m| m.generation) + 1;
        self.bounded(members, |m| self.ensure_service_account(m, next))
            .await?;
        let tokens = self
            .bounded(members, |m| self.mint(m, next))
            .await
            .context("minting the new tokens")?;
        let members = members.iter().map(|m| m.n).collect();
        Ok(NextGeneration {
            next,
            members,
            tokens,
        })
    }

    /// Writes each of `members`' `tokens` into its Secret, beside its apiserver's CA as
    /// [`Fleet::start`] wrote it; when the control plane acknowledged each write.
    ///
    /// # Errors
    /// API errors.
    pub async fn write_tokens(
        &self,
        members: &[Member],
        tokens: &[String],
    ) -> anyhow::Result<Vec<SystemTime>> {
        self.bounded(members.iter().zip(tokens), |(m, token)| async move {
            let ca_pem = &self.apiserver_of(m).ca_pem;
            self.karmada.write_secret(&m.name, token, ca_pem).await?;
            Ok(SystemTime::now())
        })
        .await
        .context("writing the Secrets")
    }

    /// Deletes the ServiceAccounts of `members`' current generation, which revokes their tokens
    /// (after the apiserver's ~10 s token cache), and waits until every apiserver rejects them
    /// ([`wait_until_rejected`](Self::wait_until_rejected)).
    ///
    /// # Errors
    /// API errors, or tokens still accepted at `deadline`.
    pub async fn revoke(&self, members: &[Member], deadline: Instant) -> anyhow::Result<()> {
        self.bounded(members, |m| async move {
            let name = m.service_account(m.generation);
            let api = self.service_accounts(m);
            let deleted = api.delete(&name, &DeleteParams::default()).await;
            deleted
                .map(drop)
                .with_context(|| format!("deleting {name}"))
        })
        .await
        .context("deleting the old ServiceAccounts")?;
        self.wait_until_rejected(members, deadline)
            .await
            .context("revoking the old tokens")
    }

    /// The members of `generation` now hold their tokens of it.
    pub fn adopt(&mut self, generation: NextGeneration) {
        let members = (self.members.iter_mut()).filter(|m| generation.members.contains(&m.n));
        for (member, token) in members.zip(generation.tokens) {
            member.generation = generation.next;
            member.token = token;
        }
    }

    /// Registers `member` ([`Karmada::register`]): its Secret (its token and its apiserver's
    /// CA) and its push-mode `Cluster`.
    async fn register(&self, member: &Member) -> anyhow::Result<()> {
        let server = self.apiserver_of(member);
        self.karmada
            .register(&PushMember {
                name: &member.name,
                endpoint: &server.endpoint,
                ca_pem: &server.ca_pem,
                token: &member.token,
            })
            .await
    }
}
