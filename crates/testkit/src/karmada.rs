//! A Karmada control plane on a harness apiserver, as Karmada leaves it: the `Cluster` CRD,
//! the member Secret namespace, and push-mode members registered as `karmadactl join` does
//! (a Secret with the member's token and CA bundle, and a `Cluster` naming that Secret).
//!
//! The CRD is the one users install, `deploy/crds/cluster.karmada.io_clusters.yaml`, and the
//! objects are written in Karmada's format here rather than through Tether's own types, so a
//! test shows that Tether reads what Karmada writes.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::{cluster::Cluster, crd::install_crd};

mod conditions;

pub use conditions::Condition;

/// The `Cluster` CRD as `deploy/crds/cluster.karmada.io_clusters.yaml` holds it (YAML).
pub const CLUSTER_CRD_YAML: &str =
    include_str!("../../../deploy/crds/cluster.karmada.io_clusters.yaml");

/// Namespace of the member Secrets, as Karmada uses it.
pub const SECRET_NAMESPACE: &str = "karmada-cluster";

/// The key of a member Secret that holds the bearer token (Karmada's format).
pub const TOKEN_KEY: &str = "token";

/// The key of a member Secret that holds the member's PEM CA bundle (Karmada's format).
pub const CA_BUNDLE_KEY: &str = "caBundle";

/// Field manager of the Secret applies.
const FIELD_MANAGER: &str = "tether-testkit";

/// One push-mode member as Karmada registers it.
#[derive(Clone, Copy)]
pub struct PushMember<'a> {
    /// The `Cluster`'s and the Secret's name.
    pub name: &'a str,
    /// The member's API endpoint, `https://127.0.0.1:<port>`.
    pub endpoint: &'a str,
    /// The member's PEM CA bundle.
    pub ca_pem: &'a str,
    /// The bearer token the Secret holds.
    pub token: &'a str,
}

impl std::fmt::Debug for PushMember<'_> {
    // The token is a credential: show only where the member is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushMember")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl<'a> PushMember<'a> {
    /// A harness cluster registered under its own name, with `token`.
    pub fn of(cluster: &'a Cluster, token: &'a str) -> Self {
        Self {
            name: cluster.name(),
            endpoint: cluster.endpoint(),
            ca_pem: cluster.ca_pem(),
            token,
        }
    }
}

/// Karmada's objects on a control plane, through one admin client (cheap to clone).
#[derive(Clone)]
pub struct Karmada {
    client: Client,
}

impl Karmada {
    /// Installs the `Cluster` CRD ([`install_cluster_crd`]) and creates the
    /// [`SECRET_NAMESPACE`] on `control_plane`.
    ///
    /// # Errors
    /// API errors, or the CRD not being served within 30 s.
    pub async fn install(control_plane: &Cluster) -> Result<Self> {
        let client = control_plane.admin_client()?;
        install_cluster_crd(&client).await?;
        control_plane
            .create_namespace_named(SECRET_NAMESPACE)
            .await?;
        Ok(Self { client })
    }

    /// The admin client of the control plane.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Writes `member`'s Secret ([`write_secret`](Self::write_secret)) and creates its
    /// push-mode `Cluster`.
    ///
    /// # Errors
    /// API errors, such as a `Cluster` of that name existing already.
    pub async fn register(&self, member: &PushMember<'_>) -> Result<()> {
        self.write_secret(member.name, member.token, member.ca_pem)
            .await?;
        self.create_cluster(
            member.name,
            member.endpoint,
            member.name,
            false,
            &BTreeMap::new(),
        )
        .await
    }

    /// Creates a push-mode `Cluster` `name` at `endpoint` with `annotations`, whose
    /// `secretRef` names Secret `secret` in [`SECRET_NAMESPACE`], which may be another
    /// member's: what a definition writer can type.
    ///
    /// # Errors
    /// API errors, such as a `Cluster` of that name existing already.
    pub async fn create_cluster(
        &self,
        name: &str,
        endpoint: &str,
        secret: &str,
        insecure_skip_tls_verification: bool,
        annotations: &BTreeMap<String, String>,
    ) -> Result<()> {
        let mut spec = json!({
            "syncMode": "Push",
            "apiEndpoint": endpoint,
            "secretRef": { "namespace": SECRET_NAMESPACE, "name": secret },
        });
        if insecure_skip_tls_verification {
            spec["insecureSkipTLSVerification"] = json!(true);
        }
        let cluster: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster",
            "metadata": { "name": name, "annotations": annotations },
            "spec": spec,
        }))?;
        self.clusters()
            .create(&PostParams::default(), &cluster)
            .await
            .with_context(|| format!("creating the Cluster {name}"))?;
        Ok(())
    }

    /// Sets annotation `key` on `Cluster` `name` (a merge patch).
    ///
    /// # Errors
    /// API errors, such as no such `Cluster`.
    pub async fn annotate(&self, name: &str, key: &str, value: &str) -> Result<()> {
        let annotation = json!({ "annotations": { key: value } });
        merge_metadata(&self.clusters(), name, annotation).await
    }

    /// Every `Cluster`, for dynamic requests.
    fn clusters(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &cluster_resource())
    }

    /// The member Secrets.
    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), SECRET_NAMESPACE)
    }

    /// Writes Secret `name` (creating or replacing it) with `token` and `ca_pem` under
    /// [`TOKEN_KEY`] and [`CA_BUNDLE_KEY`].
    pub async fn write_secret(&self, name: &str, token: &str, ca_pem: &str) -> Result<()> {
        let data = BTreeMap::from([
            (TOKEN_KEY.to_owned(), ByteString(token.as_bytes().to_vec())),
            (
                CA_BUNDLE_KEY.to_owned(),
                ByteString(ca_pem.as_bytes().to_vec()),
            ),
        ]);
        self.write_secret_data(name, data).await
    }

    /// Writes arbitrary `data` into Secret `name` (a forced server-side apply), for tests that
    /// feed a registry garbage.
    pub async fn write_secret_data(
        &self,
        name: &str,
        data: BTreeMap<String, ByteString>,
    ) -> Result<()> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(SECRET_NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..Secret::default()
        };
        self.secrets()
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&secret),
            )
            .await
            .with_context(|| format!("writing the member Secret {name}"))?;
        Ok(())
    }

    /// Deletes Secret `name`.
    ///
    /// # Errors
    /// API errors, such as no such Secret.
    pub async fn delete_secret(&self, name: &str) -> Result<()> {
        self.secrets()
            .delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting the member Secret {name}"))?;
        Ok(())
    }

    /// Sets label `key=value` on Secret `name` (a merge patch: the data stay).
    ///
    /// # Errors
    /// API errors, such as no such Secret.
    pub async fn label_secret(&self, name: &str, key: &str, value: &str) -> Result<()> {
        merge_metadata(&self.secrets(), name, json!({ "labels": { key: value } })).await
    }

    /// The token in Secret `name`, as stored.
    ///
    /// # Errors
    /// API errors, or no [`TOKEN_KEY`].
    pub async fn secret_token(&self, name: &str) -> Result<String> {
        let secret = self.secrets().get(name).await?;
        let token = (secret.data.unwrap_or_default())
            .remove(TOKEN_KEY)
            .with_context(|| format!("Secret {name} holds no token"))?;
        Ok(String::from_utf8(token.0)?)
    }
}

/// Merges `metadata` into object `name` of `api` (a merge patch: the rest stays).
async fn merge_metadata<K>(api: &Api<K>, name: &str, metadata: serde_json::Value) -> Result<()>
where
    K: Clone + std::fmt::Debug + k8s_openapi::serde::de::DeserializeOwned,
{
    let patch = json!({ "metadata": metadata });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("patching the metadata of {name}"))?;
    Ok(())
}

/// Creates the `Cluster` CRD ([`CLUSTER_CRD_YAML`]) through `client` and returns once the
/// apiserver serves `Cluster`s.
pub async fn install_cluster_crd(client: &Client) -> Result<()> {
    install_crd(client, CLUSTER_CRD_YAML, &cluster_resource()).await
}

/// Karmada's `cluster.karmada.io/v1alpha1` `Cluster`, for dynamic requests.
pub(crate) fn cluster_resource() -> ApiResource {
    ApiResource {
        group: "cluster.karmada.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "cluster.karmada.io/v1alpha1".to_owned(),
        kind: "Cluster".to_owned(),
        plural: "clusters".to_owned(),
    }
}
