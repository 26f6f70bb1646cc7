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
use cluster_registry::karmada::{
    CA_BUNDLE_KEY, Cluster as KarmadaCluster, ClusterSpec, LocalSecretReference, SyncMode,
    TOKEN_KEY, crd,
};
use futures::{StreamExt as _, TryStreamExt as _, stream};
use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec},
        core::v1::{Namespace, Secret, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::json;
use testkit::Environment;

/// Namespace of the member Secrets on the control plane, as Karmada uses it.
pub const SECRET_NAMESPACE: &str = "karmada-cluster";
/// Namespace of the collector's leader-election Lease (its default without `POD_NAMESPACE`).
pub const LEASE_NAMESPACE: &str = "tether-system";
/// How long minted tokens live: longer than any run, so expiry never triggers a refresh.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// The ClusterRole every member ServiceAccount gets (through its namespace's group).
const READER_ROLE: &str = "tether-scale-reader";
/// Field manager of the fleet's server-side applies.
const MANAGER: &str = "tether-scale-bench";

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

/// The harness, the control plane's admin client, the member apiservers and the members.
pub struct Fleet {
    /// Control plane (0) and member apiservers (1..).
    pub env: Environment,
    /// Admin client of the control plane.
    pub control_plane: Client,
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
    /// CRD, and registers `members` members, each with ServiceAccounts for generations 0 and 1,
    /// a generation-0 token in its Secret, and its `Cluster`.
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
        let control_plane = env.control_plane().admin_client()?;
        install_karmada(&control_plane).await?;
        let mut servers = Vec::with_capacity(apiservers);
        for (i, cluster) in env.members().iter().enumerate() {
            let admin = cluster.admin_client()?;
            let namespace = cluster.create_namespace("tether-scale").await?;
            grant_reader(&admin, &namespace).await?;
            servers.push(MemberApiserver {
                env_index: i + 1,
                admin,
                namespace,
                endpoint: cluster.endpoint().to_owned(),
                ca_pem: cluster.ca_pem().to_owned(),
            });
        }
        let mut fleet = Self {
            env,
            control_plane,
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
                    fleet.create_service_account(m, generation)
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

    /// Creates `member`'s ServiceAccount of `generation`.
    ///
    /// # Errors
    /// API errors.
    pub async fn create_service_account(
        &self,
        member: &Member,
        generation: u32,
    ) -> anyhow::Result<()> {
        let server = self.apiserver_of(member);
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(member.service_account(generation)),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        Api::<ServiceAccount>::namespaced(server.admin.clone(), &server.namespace)
            .create(&PostParams::default(), &sa)
            .await
            .with_context(|| format!("creating {}", member.service_account(generation)))?;
        Ok(())
    }

    /// Deletes `member`'s ServiceAccount of `generation`, which revokes its tokens (after the
    /// apiserver's ~10 s token cache).
    ///
    /// # Errors
    /// API errors.
    pub async fn delete_service_account(
        &self,
        member: &Member,
        generation: u32,
    ) -> anyhow::Result<()> {
        let server = self.apiserver_of(member);
        Api::<ServiceAccount>::namespaced(server.admin.clone(), &server.namespace)
            .delete(
                &member.service_account(generation),
                &DeleteParams::default(),
            )
            .await
            .with_context(|| format!("deleting {}", member.service_account(generation)))?;
        Ok(())
    }

    /// Mints a token of `member`'s ServiceAccount of `generation` (TokenRequest).
    ///
    /// # Errors
    /// API errors, or no token in the answer.
    pub async fn mint(&self, member: &Member, generation: u32) -> anyhow::Result<String> {
        let server = self.apiserver_of(member);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(i64::try_from(TOKEN_LIFETIME.as_secs())?),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let sa = member.service_account(generation);
        Api::<ServiceAccount>::namespaced(server.admin.clone(), &server.namespace)
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
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.apiserver_of(member).admin.clone())
            .create(&PostParams::default(), &review)
            .await
            .context("TokenReview")?;
        Ok(reviewed
            .status
            .and_then(|s| s.authenticated)
            .unwrap_or(false))
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

    /// Writes `token` into `member`'s Secret (a merge patch of `stringData.token`, the CA
    /// bundle unchanged) and returns when the control plane acknowledged it.
    ///
    /// # Errors
    /// API errors.
    pub async fn write_token(&self, member: &Member, token: &str) -> anyhow::Result<SystemTime> {
        Api::<Secret>::namespaced(self.control_plane.clone(), SECRET_NAMESPACE)
            .patch(
                &member.name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "stringData": { TOKEN_KEY: token } })),
            )
            .await
            .with_context(|| format!("writing the Secret of {}", member.name))?;
        Ok(SystemTime::now())
    }

    /// Creates `member`'s Secret (its token and its apiserver's CA) and its push-mode
    /// `Cluster`.
    async fn register(&self, member: &Member) -> anyhow::Result<()> {
        let server = self.apiserver_of(member);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(member.name.clone()),
                namespace: Some(SECRET_NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(
                [
                    (
                        TOKEN_KEY.to_owned(),
                        ByteString(member.token.as_bytes().to_vec()),
                    ),
                    (
                        CA_BUNDLE_KEY.to_owned(),
                        ByteString(server.ca_pem.as_bytes().to_vec()),
                    ),
                ]
                .into(),
            ),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(self.control_plane.clone(), SECRET_NAMESPACE)
            .create(&PostParams::default(), &secret)
            .await
            .with_context(|| format!("creating the Secret of {}", member.name))?;
        let cluster = KarmadaCluster::new(
            &member.name,
            ClusterSpec {
                sync_mode: SyncMode::Push,
                api_endpoint: Some(server.endpoint.clone()),
                secret_ref: Some(LocalSecretReference {
                    namespace: SECRET_NAMESPACE.to_owned(),
                    name: member.name.clone(),
                }),
                insecure_skip_tls_verification: false,
                proxy_url: None,
            },
        );
        Api::<KarmadaCluster>::all(self.control_plane.clone())
            .create(&PostParams::default(), &cluster)
            .await
            .with_context(|| format!("creating the Cluster {}", member.name))?;
        Ok(())
    }
}

/// The `Cluster` CRD, the Secret namespace and the collector's Lease namespace; returns once
/// the CRD is served.
async fn install_karmada(client: &Client) -> anyhow::Result<()> {
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd())
        .await
        .context("creating the Cluster CRD")?;
    for name in [SECRET_NAMESPACE, LEASE_NAMESPACE] {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
    }
    let clusters = Api::<KarmadaCluster>::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while clusters
        .list_metadata(&ListParams::default().limit(1))
        .await
        .is_err()
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the Cluster CRD is not served after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Lets every ServiceAccount of `namespace` read what the collector reads: one ClusterRole and
/// one binding to the namespace's ServiceAccount group, instead of one binding per member.
async fn grant_reader(admin: &Client, namespace: &str) -> anyhow::Result<()> {
    let read = ["get", "list", "watch"];
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": { "name": READER_ROLE },
        "rules": [
            { "apiGroups": [""], "resources": ["nodes", "namespaces", "configmaps"], "verbs": read },
            { "apiGroups": ["apps"], "resources": ["deployments"], "verbs": read },
            { "nonResourceURLs": ["/readyz", "/livez", "/healthz", "/version"], "verbs": ["get"] },
        ],
    }))?;
    let params = PatchParams::apply(MANAGER).force();
    Api::<ClusterRole>::all(admin.clone())
        .patch(READER_ROLE, &params, &Patch::Apply(&role))
        .await
        .context("applying the reader ClusterRole")?;
    let binding_name = format!("{READER_ROLE}:{namespace}");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": binding_name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE },
        "subjects": [{
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Group",
            "name": format!("system:serviceaccounts:{namespace}"),
        }],
    }))?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(&binding_name, &params, &Patch::Apply(&binding))
        .await
        .context("binding the reader ClusterRole")?;
    Ok(())
}
