//! ServiceAccounts on a [`Cluster`]: create, mint tokens, revoke, recreate.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::cluster::{Cluster, status_code};
use crate::eventually::{Step, eventually};

/// The ClusterRole every [`Cluster::create_service_account`] binds: read-only access to what a
/// member-cluster agent (Tether's collector) looks at.
///
/// - core: `namespaces`, `nodes`, `pods`, `services`, `configmaps`, `events`
/// - `apps`: `deployments` (and `deployments/status`), `replicasets`, `statefulsets`,
///   `daemonsets`
/// - non-resource: `/readyz`, `/livez`, `/healthz`, `/version`
///
/// Verbs: `get`, `list`, `watch`. No Secrets. Created by the harness because the aggregated
/// `view` role is empty without kube-controller-manager.
pub const READER_CLUSTER_ROLE: &str = "tether-testkit-reader";

/// Field manager for the harness's server-side applies.
pub(crate) const FIELD_MANAGER: &str = "tether-testkit";

/// How long a deleted ServiceAccount's tokens may keep working: the apiserver caches a
/// successful token authentication for ~10 s.
pub const REVOCATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The shortest expiry TokenRequest accepts (shorter is a 422).
pub const MIN_TOKEN_EXPIRY: Duration = Duration::from_secs(600);

impl Cluster {
    /// Creates ServiceAccount `ns/name`, bound (ClusterRoleBinding `tether-testkit:<ns>:<name>`)
    /// to [`READER_CLUSTER_ROLE`], which it creates or updates first. `ns` must exist.
    ///
    /// # Errors
    /// If the ServiceAccount already exists or an API call fails.
    pub async fn create_service_account(&self, ns: &str, name: &str) -> Result<ServiceAccount> {
        let sa = self.create_unbound_service_account(ns, name).await?;
        self.grant_reader(
            &format!("{FIELD_MANAGER}:{ns}:{name}"),
            json!({ "kind": "ServiceAccount", "name": name, "namespace": ns }),
        )
        .await
        .with_context(|| format!("binding {ns}/{name} to {READER_CLUSTER_ROLE}"))?;
        Ok(sa)
    }

    /// Creates ServiceAccount `ns/name` bound to nothing: the apiserver accepts its tokens and
    /// lets them do nothing but what every authenticated user may. `ns` must exist.
    ///
    /// # Errors
    /// If the ServiceAccount already exists or the API call fails.
    pub async fn create_unbound_service_account(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<ServiceAccount> {
        let sa: ServiceAccount = serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": ns },
        }))?;
        Api::<ServiceAccount>::namespaced(self.admin_client()?, ns)
            .create(&PostParams::default(), &sa)
            .await
            .with_context(|| format!("creating ServiceAccount {ns}/{name} on {}", self.name()))
    }

    /// Binds [`READER_CLUSTER_ROLE`] (creating or updating it first) to every ServiceAccount
    /// of namespace `ns`, through their group `system:serviceaccounts:<ns>`: one
    /// ClusterRoleBinding `tether-testkit:<ns>` for any number of ServiceAccounts, where
    /// [`create_service_account`](Self::create_service_account) makes one each.
    pub async fn grant_reader_to_namespace(&self, ns: &str) -> Result<()> {
        self.grant_reader(
            &format!("{FIELD_MANAGER}:{ns}"),
            json!({
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": format!("system:serviceaccounts:{ns}"),
            }),
        )
        .await
        .with_context(|| format!("binding the ServiceAccounts of {ns} to {READER_CLUSTER_ROLE}"))?;
        Ok(())
    }

    /// Binds [`READER_CLUSTER_ROLE`] (creating or updating it first) to `user`, as a client
    /// certificate's CN names it ([`issue_client_cert`](Self::issue_client_cert)): one
    /// ClusterRoleBinding `tether-testkit:user:<user>`.
    pub async fn grant_reader_to_user(&self, user: &str) -> Result<()> {
        self.grant_reader(
            &format!("{FIELD_MANAGER}:user:{user}"),
            json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }),
        )
        .await
        .with_context(|| format!("binding user {user} to {READER_CLUSTER_ROLE}"))?;
        Ok(())
    }

    /// Creates or updates [`READER_CLUSTER_ROLE`] and ClusterRoleBinding `binding` of it to
    /// `subject` alone.
    async fn grant_reader(&self, binding: &str, subject: serde_json::Value) -> Result<()> {
        let client = self.admin_client()?;
        let read = ["get", "list", "watch"];
        let role: ClusterRole = serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": { "name": READER_CLUSTER_ROLE },
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["namespaces", "nodes", "pods", "services", "configmaps", "events"],
                    "verbs": read,
                },
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments", "deployments/status", "replicasets",
                                  "statefulsets", "daemonsets"],
                    "verbs": read,
                },
                { "nonResourceURLs": ["/readyz", "/livez", "/healthz", "/version"], "verbs": ["get"] },
            ],
        }))?;
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        Api::<ClusterRole>::all(client.clone())
            .patch(READER_CLUSTER_ROLE, &apply, &Patch::Apply(&role))
            .await
            .context("applying the reader ClusterRole")?;
        let crb: ClusterRoleBinding = serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": { "name": binding },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": READER_CLUSTER_ROLE,
            },
            "subjects": [subject],
        }))?;
        Api::<ClusterRoleBinding>::all(client)
            .patch(binding, &apply, &Patch::Apply(&crb))
            .await?;
        Ok(())
    }

    /// Mints a token for ServiceAccount `ns/sa` through the TokenRequest API, valid for
    /// `expiry` (at least [`MIN_TOKEN_EXPIRY`]) and for this cluster's default audience.
    ///
    /// # Errors
    /// If `expiry` is below 600 s, or the API call fails or returns no token.
    pub async fn mint_token(&self, ns: &str, sa: &str, expiry: Duration) -> Result<String> {
        self.mint_token_for(ns, sa, expiry, &[]).await
    }

    /// Mints a token for ServiceAccount `ns/sa` as [`mint_token`](Self::mint_token) does, for
    /// `audiences` (the `aud` claim), or this cluster's default audience if `audiences` is
    /// empty. A token for another audience only is rejected by this cluster itself (401): it
    /// is meant for someone else, such as a member that trusts this cluster's issuer.
    ///
    /// # Errors
    /// As [`mint_token`](Self::mint_token).
    pub async fn mint_token_for(
        &self,
        ns: &str,
        sa: &str,
        expiry: Duration,
        audiences: &[String],
    ) -> Result<String> {
        ensure!(
            expiry >= MIN_TOKEN_EXPIRY,
            "TokenRequest rejects expirations under {MIN_TOKEN_EXPIRY:?} (asked for {expiry:?})"
        );
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(i64::try_from(expiry.as_secs())?),
                audiences: (!audiences.is_empty()).then(|| audiences.to_vec()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let response = Api::<ServiceAccount>::namespaced(self.admin_client()?, ns)
            .create_token_request(sa, &PostParams::default(), &request)
            .await
            .with_context(|| format!("TokenRequest for {ns}/{sa} on {}", self.name()))?;
        response
            .status
            .and_then(|s| s.token)
            .with_context(|| format!("TokenRequest for {ns}/{sa} returned no token"))
    }

    /// The HTTP status the apiserver answers `token` with on `GET /api/v1/namespaces?limit=1`
    /// (200 with [`READER_CLUSTER_ROLE`], 401 once the token is rejected, 403 if authenticated
    /// but not allowed).
    ///
    /// # Errors
    /// If the request fails without an HTTP status (connection refused, TLS, …).
    pub async fn token_status(&self, token: &str) -> Result<u16> {
        let api = Api::<Namespace>::all(self.client_with_token(token)?);
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => Ok(200),
            Err(e) => status_code(&e).with_context(|| {
                format!("listing namespaces on {} with a token: {e}", self.name())
            }),
        }
    }

    /// Waits (up to `timeout`) until `token` gets a 401, and returns how long that took.
    ///
    /// # Errors
    /// If the token still works at the deadline, or a request fails without a status.
    pub async fn wait_until_unauthorized(
        &self,
        token: &str,
        timeout: Duration,
    ) -> Result<Duration> {
        let start = Instant::now();
        let what = format!("the token gets 401 from {}", self.name());
        eventually(&what, timeout, || async {
            match self.token_status(token).await {
                Ok(401) => Step::Done(()),
                Ok(status) => Step::Pending(format!("{status}")),
                Err(err) => Step::Fail(err),
            }
        })
        .await?;
        Ok(start.elapsed())
    }

    /// Deletes ServiceAccount `ns/sa` and waits until it is gone from the API (its tokens may
    /// still work for a while: see [`revoke`](Self::revoke)).
    ///
    /// # Errors
    /// If it does not exist, an API call fails, or it is still there after 10 s.
    pub async fn delete_service_account(&self, ns: &str, sa: &str) -> Result<()> {
        let api = Api::<ServiceAccount>::namespaced(self.admin_client()?, ns);
        api.delete(sa, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting ServiceAccount {ns}/{sa} on {}", self.name()))?;
        let what = format!("ServiceAccount {ns}/{sa} is gone after its deletion");
        eventually(&what, Duration::from_secs(10), || async {
            match api.get_opt(sa).await {
                Ok(None) => Step::Done(()),
                Ok(Some(_)) => Step::Pending("it still exists".to_owned()),
                Err(err) => Step::Fail(err.into()),
            }
        })
        .await
    }

    /// Revokes `token` by deleting its ServiceAccount `ns/sa`, and waits (up to
    /// [`REVOCATION_TIMEOUT`]) until the apiserver answers it with 401. Its ClusterRoleBinding
    /// stays, so a ServiceAccount created again under the same name gets the same rights.
    ///
    /// # Errors
    /// As [`delete_service_account`](Self::delete_service_account) and
    /// [`wait_until_unauthorized`](Self::wait_until_unauthorized).
    pub async fn revoke(&self, ns: &str, sa: &str, token: &str) -> Result<Duration> {
        self.delete_service_account(ns, sa).await?;
        self.wait_until_unauthorized(token, REVOCATION_TIMEOUT)
            .await
    }

    /// The KAI-Scheduler incident: deletes ServiceAccount `ns/sa` and creates it again under
    /// the same name (a new UID), then waits until `old_token` (minted for the old one) gets 401.
    /// Tokens minted afterwards work.
    ///
    /// # Errors
    /// As [`revoke`](Self::revoke) and [`create_service_account`](Self::create_service_account).
    pub async fn recreate_service_account(
        &self,
        ns: &str,
        sa: &str,
        old_token: &str,
    ) -> Result<ServiceAccount> {
        self.delete_service_account(ns, sa).await?;
        let created = self.create_service_account(ns, sa).await?;
        self.wait_until_unauthorized(old_token, REVOCATION_TIMEOUT)
            .await?;
        Ok(created)
    }
}
