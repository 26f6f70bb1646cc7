//! Deployments, and their status without a controller.
//!
//! No kube-controller-manager runs, so a Deployment's `status` never changes by itself: no
//! ReplicaSet, no Pods. [`set_deployment_status`] is the one place a test writes what a
//! controller would have written, through the `status` subresource.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// A Deployment `ns/name` with `replicas` replicas of a pause container, labelled
/// `app: <name>`. Build it, then `Api::create` it.
pub fn deployment(ns: &str, name: &str, replicas: i32) -> Deployment {
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "pause".to_owned(),
                        image: Some("registry.k8s.io/pause:3.10".to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// Writes the status a Deployment controller would report with `ready_replicas` Pods ready:
/// a merge patch of `/status` setting `replicas` and `updatedReplicas` to the spec's
/// replicas, `readyReplicas` and `availableReplicas` to `ready_replicas`,
/// `observedGeneration` to the current generation, and an `Available` condition (`True` once
/// every replica is ready). Returns the patched Deployment.
///
/// # Errors
/// If the Deployment does not exist or the patch fails.
pub async fn set_deployment_status(
    client: &Client,
    ns: &str,
    name: &str,
    ready_replicas: i32,
) -> Result<Deployment> {
    let api = Api::<Deployment>::namespaced(client.clone(), ns);
    let current = api
        .get(name)
        .await
        .with_context(|| format!("getting Deployment {ns}/{name}"))?;
    let replicas = current.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let available = ready_replicas >= replicas;
    let status = json!({
        "status": {
            "observedGeneration": current.metadata.generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready_replicas,
            "availableReplicas": ready_replicas,
            "conditions": [{
                "type": "Available",
                "status": if available { "True" } else { "False" },
                "reason": if available { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                "message": "set by tether-testkit",
            }],
        },
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("patching the status of Deployment {ns}/{name}"))
}
