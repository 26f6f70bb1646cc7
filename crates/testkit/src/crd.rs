//! Installing a CRD file on a harness apiserver, and waiting until it is served.

use std::time::Duration;

use anyhow::{Context as _, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams, PostParams},
};

use crate::eventually::eventually;

/// How long the control plane may take to serve a new CRD.
const CRD_READY: Duration = Duration::from_secs(30);

/// The SIG-Multicluster `ClusterProfile` CRD as
/// `deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml` holds it (YAML).
pub const CLUSTER_PROFILE_CRD_YAML: &str =
    include_str!("../../../deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml");

/// Creates the CRD in `yaml` through `client` and returns once the apiserver serves
/// `resource`.
///
/// # Errors
/// An unparsable CRD, API errors, or the CRD not being served within 30 s.
pub async fn install_crd(client: &Client, yaml: &str, resource: &ApiResource) -> Result<()> {
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(yaml).with_context(|| format!("parsing the {} CRD", resource.kind))?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .with_context(|| format!("creating the {} CRD", resource.kind))?;
    let objects = Api::<DynamicObject>::all_with(client.clone(), resource);
    let what = format!("the {} CRD is served", resource.kind);
    let one = ListParams::default().limit(1);
    eventually(&what, CRD_READY, || objects.list_metadata(&one))
        .await
        .map(drop)
}

/// SIG-Multicluster's `multicluster.x-k8s.io/v1alpha1` `ClusterProfile`, for dynamic requests.
pub fn cluster_profile_resource() -> ApiResource {
    ApiResource {
        group: "multicluster.x-k8s.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "multicluster.x-k8s.io/v1alpha1".to_owned(),
        kind: "ClusterProfile".to_owned(),
        plural: "clusterprofiles".to_owned(),
    }
}

/// Creates the `ClusterProfile` CRD ([`CLUSTER_PROFILE_CRD_YAML`]) through `client` and returns
/// once the apiserver serves `ClusterProfile`s.
pub async fn install_cluster_profile_crd(client: &Client) -> Result<()> {
    install_crd(
        client,
        CLUSTER_PROFILE_CRD_YAML,
        &cluster_profile_resource(),
    )
    .await
}
