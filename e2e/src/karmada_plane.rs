//! A Karmada-shaped control plane on the harness: the `Cluster` CRD, member Secrets and
//! `Cluster` objects pointing at the harness's member apiservers.

use std::{collections::BTreeMap, time::Duration};

use anyhow::Context as _;
use cluster_registry::karmada::{
    CA_BUNDLE_KEY, Cluster, ClusterSpec, LocalSecretReference, SyncMode, TOKEN_KEY, crd,
};
use k8s_openapi::{
    ByteString,
    api::core::v1::{Namespace, Secret},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use testkit::Cluster as HarnessCluster;

/// Namespace of member Secrets, as Karmada uses it.
pub const SECRET_NAMESPACE: &str = "karmada-cluster";

/// How long the control plane may take to serve a new CRD.
const CRD_READY: Duration = Duration::from_secs(30);

/// The control plane's admin view of Karmada objects.
#[derive(Clone)]
pub struct KarmadaPlane {
    client: Client,
}

impl KarmadaPlane {
    /// Installs the `Cluster` CRD and the Secret namespace on `control_plane`.
    ///
    /// # Errors
    /// API errors, or the CRD not being served within 30 s.
    pub async fn install(control_plane: &HarnessCluster) -> anyhow::Result<Self> {
        let client = control_plane.admin_client()?;
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd())
            .await
            .context("creating the Cluster CRD")?;
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(SECRET_NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .context("creating the Secret namespace")?;
        let clusters = Api::<Cluster>::all(client.clone());
        let deadline = tokio::time::Instant::now() + CRD_READY;
        while clusters.list(&ListParams::default()).await.is_err() {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the Cluster CRD was not served within {CRD_READY:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Self { client })
    }

    /// The admin client of the control plane.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Registers `member` (a harness apiserver) as a push-mode `Cluster` named after it, with a
    /// Secret holding `token` and the member's CA bundle.
    ///
    /// # Errors
    /// API errors.
    pub async fn register(&self, member: &HarnessCluster, token: &str) -> anyhow::Result<()> {
        self.write_secret(member.name(), token, member.ca_pem())
            .await?;
        let cluster = Cluster::new(
            member.name(),
            ClusterSpec {
                sync_mode: SyncMode::Push,
                api_endpoint: Some(member.endpoint().to_owned()),
                secret_ref: Some(LocalSecretReference {
                    namespace: SECRET_NAMESPACE.to_owned(),
                    name: member.name().to_owned(),
                }),
                insecure_skip_tls_verification: false,
                proxy_url: None,
            },
        );
        Api::<Cluster>::all(self.client.clone())
            .create(&PostParams::default(), &cluster)
            .await
            .context("creating the Cluster")?;
        Ok(())
    }

    /// Writes the member's Secret (creating or replacing it) with `token` and `ca_pem`.
    ///
    /// # Errors
    /// API errors.
    pub async fn write_secret(&self, name: &str, token: &str, ca_pem: &str) -> anyhow::Result<()> {
        let data = BTreeMap::from([
            (TOKEN_KEY.to_owned(), ByteString(token.as_bytes().to_vec())),
            (
                CA_BUNDLE_KEY.to_owned(),
                ByteString(ca_pem.as_bytes().to_vec()),
            ),
        ]);
        self.write_secret_data(name, data).await
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
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(SECRET_NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), SECRET_NAMESPACE)
            .patch(
                name,
                &PatchParams::apply("e2e").force(),
                &Patch::Apply(&secret),
            )
            .await
            .context("writing the member Secret")?;
        Ok(())
    }

    /// Deletes the member's Secret.
    ///
    /// # Errors
    /// API errors.
    pub async fn delete_secret(&self, name: &str) -> anyhow::Result<()> {
        Api::<Secret>::namespaced(self.client.clone(), SECRET_NAMESPACE)
            .delete(name, &Default::default())
            .await
            .context("deleting the member Secret")?;
        Ok(())
    }

    /// The member's `Cluster` as stored (with the status the collector wrote).
    ///
    /// # Errors
    /// API errors.
    pub async fn cluster(&self, name: &str) -> anyhow::Result<Cluster> {
        Ok(Api::<Cluster>::all(self.client.clone()).get(name).await?)
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
        let mut last = None;
        loop {
            let now = self.condition(name, type_).await.ok().flatten();
            if now
                .as_ref()
                .is_some_and(|(s, r)| s == status && r == reason)
            {
                return Ok(started.elapsed());
            }
            last = now.or(last);
            anyhow::ensure!(
                started.elapsed() < limit,
                "{name}: {type_} never became {status}/{reason} within {limit:?} (last {last:?})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
