//! Rendered manifests sent to a real apiserver: as a server-side apply dry-run with strict
//! field validation ([`apply`]), or for real ([`apply_rbac_for_real`], [`apply_object`]).

use std::collections::BTreeSet;

use anyhow::{Context as _, ensure};
use kube::{
    Api, Client,
    api::{DynamicObject, Patch, PatchParams},
    core::TypeMeta,
    discovery::{ApiCapabilities, ApiResource, Discovery, Scope},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::manifest::{ObjectId, of_kind};

/// Field manager of the applies.
const MANAGER: &str = "tether-e2e";

/// Namespaces the objects use but do not define: those that must exist before an install.
pub fn prerequisite_namespaces(objects: &[Value]) -> BTreeSet<String> {
    let defined: BTreeSet<_> = of_kind(objects, "Namespace")
        .filter_map(|n| Some(ObjectId::of(n).ok()?.name))
        .collect();
    objects
        .iter()
        .filter_map(|o| ObjectId::of(o).ok()?.namespace)
        .filter(|ns| !defined.contains(ns))
        .collect()
}

/// Sends every object to the control plane: Namespaces (and `prerequisites`, namespaces that
/// exist before the install) are applied for real, everything else as a server-side apply
/// dry-run with strict field validation. Returns what was accepted; fails listing every
/// rejected object.
///
/// # Errors
/// Namespaces used but neither defined nor in `prerequisites`, API errors, or rejected objects.
pub async fn apply(
    client: &Client,
    objects: &[Value],
    prerequisites: &[&str],
) -> anyhow::Result<Vec<ObjectId>> {
    let expected: BTreeSet<String> = prerequisites.iter().map(|&ns| ns.to_owned()).collect();
    ensure!(
        prerequisite_namespaces(objects) == expected,
        "the manifests use namespaces they do not create: {:?}, expected {expected:?}",
        prerequisite_namespaces(objects)
    );
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    for ns in prerequisites {
        let namespace = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns },
        });
        namespaces
            .patch(ns, &PatchParams::apply(MANAGER), &Patch::Apply(&namespace))
            .await
            .with_context(|| format!("creating the prerequisite namespace {ns}"))?;
    }

    let discovery = Discovery::new(client.clone()).run().await?;
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    // Namespaces first, for real; then the rest as dry-runs.
    let (first, rest): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| {
        ObjectId::of(o).is_ok_and(|id| id.api_version == "v1" && id.kind == "Namespace")
    });
    for (object, dry_run) in first
        .into_iter()
        .map(|o| (o, false))
        .chain(rest.into_iter().map(|o| (o, true)))
    {
        let id = ObjectId::of(object)?;
        let Some((resource, capabilities)) = resolve(&discovery, &id) else {
            rejected.push(format!("{id}: the apiserver does not serve this kind"));
            continue;
        };
        let api: Api<DynamicObject> = match (&capabilities.scope, &id.namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Cluster, None) => Api::all_with(client.clone(), &resource),
            (scope, ns) => {
                rejected.push(format!("{id}: namespace {ns:?} for a {scope:?} kind"));
                continue;
            }
        };
        let mut params = PatchParams::apply(MANAGER).validation_strict();
        if dry_run {
            params = params.dry_run();
        }
        match api.patch(&id.name, &params, &Patch::Apply(object)).await {
            Ok(answer) if answer.metadata.name.as_deref() == Some(id.name.as_str()) => {
                accepted.push(id);
            }
            Ok(answer) => rejected.push(format!("{id}: answered with {:?}", answer.metadata)),
            Err(err) => rejected.push(format!("{id}: {err}")),
        }
    }
    ensure!(
        rejected.is_empty(),
        "the apiserver rejected:\n  {}",
        rejected.join("\n  ")
    );
    Ok(accepted)
}

/// Server-side applies `object`, named `name`, through `api` as the tests' field manager,
/// taking over any field; an object with a `status` and no `spec` goes to the status
/// subresource.
///
/// # Errors
/// API errors, naming the object.
pub async fn force_apply<K>(api: &Api<K>, name: &str, object: &Value) -> anyhow::Result<()>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let (params, patch) = (PatchParams::apply(MANAGER).force(), Patch::Apply(object));
    let status = object.get("status").is_some() && object.get("spec").is_none();
    let applied = match status {
        true => api.patch_status(name, &params, &patch).await,
        false => api.patch(name, &params, &patch).await,
    };
    let kind = object["kind"].as_str().unwrap_or("object");
    let part = if status { " status" } else { "" };
    applied.with_context(|| format!("applying {kind} {name}{part}"))?;
    Ok(())
}

/// Applies the RBAC objects and the ServiceAccount among `objects` for real.
pub async fn apply_rbac_for_real(client: &Client, objects: &[Value]) -> anyhow::Result<()> {
    let discovery = Discovery::new(client.clone()).run().await?;
    for object in objects {
        let id = ObjectId::of(object)?;
        if id.group() == "rbac.authorization.k8s.io" || id.kind == "ServiceAccount" {
            apply_for_real(client, &discovery, object).await?;
        }
    }
    Ok(())
}

/// Server-side applies one object (a Namespace, a `Cluster`) for real.
///
/// # Errors
/// A kind the apiserver does not serve, or API errors.
pub async fn apply_object(client: &Client, object: &Value) -> anyhow::Result<()> {
    let discovery = Discovery::new(client.clone()).run().await?;
    apply_for_real(client, &discovery, object).await
}

async fn apply_for_real(
    client: &Client,
    discovery: &Discovery,
    object: &Value,
) -> anyhow::Result<()> {
    let id = ObjectId::of(object)?;
    let (resource, _) = resolve(discovery, &id).with_context(|| format!("{id}: not served"))?;
    let api: Api<DynamicObject> = match &id.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &id.name,
        &PatchParams::apply(MANAGER),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {id}"))?;
    Ok(())
}

/// The resource and capabilities the apiserver serves `id`'s kind under.
fn resolve(discovery: &Discovery, id: &ObjectId) -> Option<(ApiResource, ApiCapabilities)> {
    discovery.resolve_typemeta(&TypeMeta {
        api_version: id.api_version.clone(),
        kind: id.kind.clone(),
    })
}
