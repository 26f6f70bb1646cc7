//! A Karmada-shaped control plane on the harness ([`testkit::Karmada`]: the `Cluster` CRD,
//! member Secrets and `Cluster` objects pointing at the harness's member apiservers), read back
//! through Tether's own `Cluster` type for the status the collector writes.

use std::{collections::BTreeMap, time::Duration};

use cluster_registry::karmada::{Cluster, ClusterSpec, LocalSecretReference, SyncMode};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use testkit::{Cluster as HarnessCluster, Karmada, PushMember, eventually};

pub use testkit::karmada::SECRET_NAMESPACE;

/// The control plane's admin view of Karmada objects.
#[derive(Clone)]
pub struct KarmadaPlane {
    karmada: Karmada,
}

impl KarmadaPlane {
    /// Installs the `Cluster` CRD and the Secret namespace on `control_plane`
    /// ([`Karmada::install`]).
    ///
    /// # Errors
    /// API errors, or the CRD not being served within 30 s.
    pub async fn install(control_plane: &HarnessCluster) -> anyhow::Result<Self> {
        Ok(Self {
            karmada: Karmada::install(control_plane).await?,
        })
    }

    /// The admin client of the control plane.
    pub fn client(&self) -> &Client {
        self.karmada.client()
    }

    /// Registers `member` (a harness apiserver) as a push-mode `Cluster` named after it, with a
    /// Secret holding `token` and the member's CA bundle.
    ///
    /// # Errors
    /// API errors.
    pub async fn register(&self, member: &HarnessCluster, token: &str) -> anyhow::Result<()> {
        self.karmada.register(&PushMember::of(member, token)).await
    }

    /// Writes the member's Secret (creating or replacing it) with `token` and `ca_pem`.
    ///
    /// # Errors
    /// API errors.
    pub async fn write_secret(&self, name: &str, token: &str, ca_pem: &str) -> anyhow::Result<()> {
        self.karmada.write_secret(name, token, ca_pem).await
    }

    /// Writes arbitrary data into the member's Secret (for garbage-in tests).
    ///
    /// # Errors
    /// API errors.
    pub async fn write_secret_data(
        &self,
        name: &str,
        data: BTreeMap<String, ByteString>,
    ) -> anyhow::Result<()> {
        self.karmada.write_secret_data(name, data).await
    }

    /// Creates a push-mode `Cluster` `name` at `endpoint` with `annotations`, whose `secretRef`
    /// names Secret `secret` in [`SECRET_NAMESPACE`], which may be another member's: what a
    /// definition writer can type.
    ///
    /// # Errors
    /// API errors, such as a `Cluster` of that name existing already.
    pub async fn create_cluster(
        &self,
        name: &str,
        endpoint: &str,
        secret: &str,
        insecure_skip_tls_verification: bool,
        annotations: BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let mut cluster = Cluster::new(
            name,
            ClusterSpec {
                sync_mode: SyncMode::Push,
                api_endpoint: Some(endpoint.to_owned()),
                secret_ref: Some(LocalSecretReference {
                    namespace: SECRET_NAMESPACE.to_owned(),
                    name: secret.to_owned(),
                }),
                insecure_skip_tls_verification,
                proxy_url: None,
            },
        );
        cluster.metadata.annotations = Some(annotations);
        Api::<Cluster>::all(self.client().clone())
            .create(&PostParams::default(), &cluster)
            .await?;
        Ok(())
    }

    /// Sets label `key=value` on Secret `name` (a merge patch: the data stay).
    ///
    /// # Errors
    /// API errors, such as no such Secret.
    pub async fn label_secret(&self, name: &str, key: &str, value: &str) -> anyhow::Result<()> {
        let patch = serde_json::json!({ "metadata": { "labels": { key: value } } });
        Api::<Secret>::namespaced(self.client().clone(), SECRET_NAMESPACE)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// The token in Secret `name`, as stored.
    ///
    /// # Errors
    /// API errors, or no `token` key.
    pub async fn secret_token(&self, name: &str) -> anyhow::Result<String> {
        let secret = Api::<Secret>::namespaced(self.client().clone(), SECRET_NAMESPACE)
            .get(name)
            .await?;
        let token = (secret.data.unwrap_or_default())
            .remove("token")
            .ok_or_else(|| anyhow::anyhow!("Secret {name} has no token"))?;
        Ok(String::from_utf8_lossy(&token.0).into_owned())
    }

    /// The message of condition `type_` on the member's `Cluster`, if written.
    ///
    /// # Errors
    /// API errors.
    pub async fn condition_message(
        &self,
        name: &str,
        type_: &str,
    ) -> anyhow::Result<Option<String>> {
        let cluster = self.cluster(name).await?;
        Ok(cluster
            .status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == type_))
            .map(|c| c.message))
    }

    /// Deletes the member's Secret.
    ///
    /// # Errors
    /// API errors.
    pub async fn delete_secret(&self, name: &str) -> anyhow::Result<()> {
        self.karmada.delete_secret(name).await
    }

    /// The member's `Cluster` as stored (with the status the collector wrote).
    ///
    /// # Errors
    /// API errors.
    pub async fn cluster(&self, name: &str) -> anyhow::Result<Cluster> {
        Ok(Api::<Cluster>::all(self.client().clone()).get(name).await?)
    }

    /// The status and reason of condition `type_` on the member's `Cluster`, if written.
    ///
    /// # Errors
    /// API errors.
    pub async fn condition(
        &self,
        name: &str,
        type_: &str,
    ) -> anyhow::Result<Option<(String, String)>> {
        let cluster = self.cluster(name).await?;
        Ok(cluster
            .status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == type_))
            .map(|c| (c.status, c.reason)))
    }

    /// Polls until the member's `Cluster` has condition `type_` with `status` and `reason`,
    /// and returns how long that took.
    ///
    /// # Errors
    /// Not reaching it within `limit` (the error names the last value seen).
    pub async fn wait_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
        limit: Duration,
    ) -> anyhow::Result<Duration> {
        let started = tokio::time::Instant::now();
        let what = format!("{name}: {type_} is {status}/{reason}");
        eventually(&what, limit, || async {
            match self.condition(name, type_).await {
                Ok(Some((s, r))) if s == status && r == reason => Ok(()),
                Ok(now) => Err(format!("{now:?}")),
                Err(err) => Err(format!("{err:#}")),
            }
        })
        .await?;
        Ok(started.elapsed())
    }
}
