//! Members whose tokens the collector rotates: Karmada `Cluster`s on the harness control plane,
//! each with its own ServiceAccount on a member apiserver and the rotation annotations, and
//! what the tests count (Secret writes, the apiservers' TokenRequests).

use std::{collections::BTreeMap, time::Duration};

use cluster_registry::minting::{
    EXPIRATION_ANNOTATION, MINT_ANNOTATION, SERVICE_ACCOUNT_ANNOTATION,
};
use serde_json::json;
use testkit::{Environment, Karmada, MIN_TOKEN_EXPIRY};

use crate::{
    collector_run::{RunningCollector, admin_args, start_as_admin},
    manifest_apply::apply_object,
    scenario::karmada_environment,
};

mod secret_writes;

pub use secret_writes::SecretWrites;
use testkit::eventually;

/// The shipped member-side RBAC of token rotation: the Role and RoleBinding that let the
/// ServiceAccount `tether-member/tether` mint its own tokens.
pub const MEMBER_RBAC_YAML: &str = include_str!("../../deploy/member-rbac/token-rotation.yaml");

/// One member whose tokens are rotated.
#[derive(Clone, Debug)]
pub struct RotatingMember {
    /// The `Cluster`'s and its Secret's name.
    pub name: String,
    /// Which harness apiserver it is (1-based).
    pub cluster: usize,
    /// Its ServiceAccount's namespace on that apiserver.
    pub namespace: String,
    /// Its ServiceAccount, whose tokens Tether mints.
    pub account: String,
}

impl RotatingMember {
    /// Member `name` on apiserver `cluster`, rotating the tokens of `namespace/account`.
    pub fn new(name: &str, cluster: usize, namespace: &str, account: &str) -> Self {
        Self {
            name: name.to_owned(),
            cluster,
            namespace: namespace.to_owned(),
            account: account.to_owned(),
        }
    }
}

/// The harness, the Karmada objects, and the members.
pub struct RotationPlane {
    /// The apiservers: 0 is the control plane, 1.. the members.
    pub env: Environment,
    /// Karmada on the control plane.
    pub karmada: Karmada,
    /// Every member, in registration order.
    pub members: Vec<RotatingMember>,
    admin_token: String,
}

impl RotationPlane {
    /// Starts `apiservers` member apiservers and registers `members` members over them, round
    /// robin, each with a fresh 600 s token of its own ServiceAccount (`rot-<i>` in
    /// namespace `tether-rotation`, which may mint its own tokens) in its Secret,
    /// `tether.io/mint-tokens: "true"` and 600 s asked for each minted token.
    pub async fn start(apiservers: usize, members: usize) -> anyhow::Result<Self> {
        let (env, karmada) = karmada_environment(apiservers).await?;
        let admin_token = env.control_plane().admin_token()?;
        let mut this = Self {
            env,
            karmada,
            members: Vec::new(),
            admin_token,
        };
        for cluster in 1..=apiservers {
            this.prepare_namespace(cluster, "tether-rotation", true)
                .await?;
        }
        for i in 0..members {
            let member = RotatingMember::new(
                &format!("m{i:02}"),
                1 + i % apiservers,
                "tether-rotation",
                &format!("rot-{i}"),
            );
            this.add(member).await?;
        }
        Ok(this)
    }

    /// Creates namespace `ns` on apiserver `cluster`, lets its ServiceAccounts read what the
    /// collector mirrors and, if `minting`, mint tokens of any ServiceAccount of `ns`.
    pub async fn prepare_namespace(
        &self,
        cluster: usize,
        ns: &str,
        minting: bool,
    ) -> anyhow::Result<()> {
        let member = self.env.cluster(cluster);
        member.create_namespace_named(ns).await?;
        member.grant_reader_to_namespace(ns).await?;
        if minting {
            let client = member.admin_client()?;
            let role = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": { "name": "mint-own-tokens", "namespace": ns },
                "rules": [{ "apiGroups": [""], "resources": ["serviceaccounts/token"],
                            "verbs": ["create"] }],
            });
            let binding = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": { "name": "mint-own-tokens", "namespace": ns },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": "mint-own-tokens" },
                "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                               "name": format!("system:serviceaccounts:{ns}") }],
            });
            for object in [role, binding] {
                apply_object(&client, &object).await?;
            }
        }
        Ok(())
    }

    /// Creates namespace `ns` on apiserver 1 whose ServiceAccounts may not mint
    /// ([`prepare_namespace`](Self::prepare_namespace)), and [`add`](Self::add)s member
    /// `name` rotating the tokens of `ns/account`; returns its token.
    pub async fn add_unminting(
        &mut self,
        name: &str,
        ns: &str,
        account: &str,
    ) -> anyhow::Result<String> {
        self.prepare_namespace(1, ns, false).await?;
        self.add(RotatingMember::new(name, 1, ns, account)).await
    }

    /// Creates `member`'s ServiceAccount, writes its Secret with a fresh 600 s token and
    /// registers its `Cluster` asking for rotation; returns the token.
    pub async fn add(&mut self, member: RotatingMember) -> anyhow::Result<String> {
        let cluster = self.env.cluster(member.cluster);
        cluster
            .create_service_account(&member.namespace, &member.account)
            .await?;
        let token = cluster
            .mint_token(&member.namespace, &member.account, MIN_TOKEN_EXPIRY)
            .await?;
        let account = format!("{}/{}", member.namespace, member.account);
        self.register(
            &member.name,
            cluster.endpoint(),
            cluster.ca_pem(),
            &token,
            &rotation_annotations(&account, &[(MINT_ANNOTATION, "true")]),
        )
        .await?;
        self.members.push(member);
        Ok(token)
    }

    /// Writes Secret `name` holding `token` and `ca_pem`, and registers `Cluster` `name` at
    /// `endpoint` with `annotations`: a member on any endpoint, a hostile one included.
    pub async fn register(
        &self,
        name: &str,
        endpoint: &str,
        ca_pem: &str,
        token: &str,
        annotations: &BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        self.karmada.write_secret(name, token, ca_pem).await?;
        self.karmada
            .create_cluster(name, endpoint, name, false, annotations)
            .await
    }

    /// The flags that point a collector at the control plane (its own credential the admin
    /// token), with `extra`.
    pub fn collector_args(&self, extra: &[&str]) -> anyhow::Result<Vec<String>> {
        let mut args = admin_args(self.env.control_plane())?;
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        Ok(args)
    }

    /// Starts a collector on the plane with `flags`, read with the plane's token reader.
    ///
    /// # Errors
    /// The collector not starting, or not becoming healthy.
    pub async fn start_collector(&self, flags: &[&str]) -> anyhow::Result<RunningCollector> {
        start_as_admin(self.env.control_plane(), flags).await
    }

    /// Waits until member `name`'s `CredentialsValid` condition is `False` for `reason`, and
    /// returns its message.
    ///
    /// # Errors
    /// API errors, or no such condition within `limit`.
    pub async fn refusal(
        &self,
        name: &str,
        reason: &str,
        limit: Duration,
    ) -> anyhow::Result<String> {
        self.karmada
            .wait_condition(name, "CredentialsValid", &format!("False/{reason}"), limit)
            .await?;
        let message = self.karmada.condition_message(name, "CredentialsValid");
        Ok(message.await?.unwrap_or_default())
    }

    /// Waits until member `name`'s credentials are accepted, `collector` has rotated them at
    /// least once, and its Secret no longer holds `old`.
    ///
    /// # Errors
    /// API errors, any of it not within `limit`, or the Secret still holding `old`.
    pub async fn wait_rotated_from(
        &self,
        collector: &RunningCollector,
        name: &str,
        old: &str,
        limit: Duration,
    ) -> anyhow::Result<()> {
        self.karmada
            .wait_condition(name, "CredentialsValid", "True/CredentialsAccepted", limit)
            .await?;
        eventually(&format!("{name} rotates"), limit, || async {
            rotations(collector, name, "success").await >= 1.0
        })
        .await?;
        anyhow::ensure!(
            self.karmada.secret_token(name).await? != old,
            "{name}'s Secret still holds the old token"
        );
        Ok(())
    }

    /// The token reader every collector of the plane is read with.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// TokenRequests apiserver `cluster` has answered so far, by its own metrics.
    pub async fn token_requests(&self, cluster: usize) -> anyhow::Result<f64> {
        let metrics = self.env.cluster(cluster).metrics().await?;
        let token_requests = r#"resource="serviceaccounts",subresource="token",verb="POST""#;
        Ok(metrics.sum("apiserver_request_total", token_requests))
    }
}

/// The rotation annotations naming ServiceAccount `account` (`namespace/name`), asking for
/// 600 s tokens, with `extra` on top.
pub fn rotation_annotations(account: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let expiration = MIN_TOKEN_EXPIRY.as_secs().to_string();
    let fixed = [
        (SERVICE_ACCOUNT_ANNOTATION, account),
        (EXPIRATION_ANNOTATION, expiration.as_str()),
    ];
    (fixed.iter().chain(extra))
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The flags that make rotation quick to watch: a token is replaced after `fraction` of its
/// life, a failed mint is retried after 2 s, members are probed every 2 s, and a request to a
/// member times out after `request_timeout` seconds.
pub fn fast_rotation_flags<'a>(fraction: &'a str, request_timeout: &'a str) -> [&'a str; 8] {
    [
        "--mint-at-fraction",
        fraction,
        "--mint-retry-seconds",
        "2",
        "--probe-period",
        "2",
        "--request-timeout",
        request_timeout,
    ]
}

/// `tether_token_mints_total` of `member` with `result` (`success`, `failed`, ...), as
/// `collector` exports it.
///
/// # Panics
/// The collector's `/metrics` failing.
pub async fn rotations(collector: &RunningCollector, member: &str, result: &str) -> f64 {
    let labels = format!(r#"member="{member}",result="{result}""#);
    let mints = collector.metric("tether_token_mints_total", &labels).await;
    mints.unwrap_or_else(|err| panic!("reading /metrics: {err:#}"))
}
