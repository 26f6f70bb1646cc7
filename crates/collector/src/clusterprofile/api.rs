//! [`ProfilesApi`]: the requests that publish profiles in one namespace of the control plane.
//! Every request carries the control-plane client's deadline (`--request-timeout`).
//!
//! Tether touches only profiles it manages: one that carries another manager's
//! [`CLUSTER_MANAGER_LABEL`] is neither applied over nor deleted, even when it has a member's
//! name.

use cluster_registry::clusterprofile::{
    CLUSTER_MANAGER_LABEL, ClusterProfile, TETHER_CLUSTER_MANAGER,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Api, Client, Resource as _,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions},
};
use serde_json::json;

/// Field manager of every apply: the one the status writer uses too.
const MANAGER: &str = "tether-collector";

/// Profiles listed per page by the garbage collection.
const LIST_PAGE: u32 = 500;

/// Who manages the profile a name points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// No such profile.
    Absent,
    /// Tether does.
    Tether,
    /// Another manager (the label's value), or none that says so.
    Other(Option<String>),
}

/// The profiles of one namespace. Cloning is cheap.
#[derive(Clone)]
pub(crate) struct ProfilesApi {
    api: Api<ClusterProfile>,
}

impl ProfilesApi {
    /// Profiles in `namespace` of the control plane `client` talks to.
    pub(crate) fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
        }
    }

    /// Who manages the profile `name`, and the version of it that says so (`None` when
    /// absent).
    pub(crate) async fn owner(&self, name: &str) -> Result<(Owner, Option<String>), kube::Error> {
        match self.api.get_metadata_opt(name).await? {
            None => Ok((Owner::Absent, None)),
            Some(found) => Ok((owner_of(&found.metadata), found.metadata.resource_version)),
        }
    }

    /// Writes `profile` (labels and spec, then its status through the status subresource)
    /// only if the profile is still the one Tether last saw: `version` is the
    /// `resourceVersion` read or written last, `None` for a profile seen absent. Returns the
    /// version written.
    ///
    /// Each write is conditional: an absent profile is created (a 409 if someone created one
    /// meanwhile), an existing one is applied server-side with `metadata.resourceVersion` set,
    /// which the apiserver checks as a precondition (a 409 if it changed), and the status is
    /// applied on the version the first write returned. `force` takes over fields only within
    /// that very version, which was seen to be Tether's: a profile another manager took over
    /// after it was read is never written. A 409 says to read it again
    /// ([`is_conflict`]).
    pub(crate) async fn apply(
        &self,
        profile: &ClusterProfile,
        version: Option<&str>,
    ) -> Result<String, kube::Error> {
        let name = profile.metadata.name.as_deref().unwrap_or_default();
        let params = PatchParams::apply(MANAGER).force();
        let head = json!({
            "apiVersion": ClusterProfile::api_version(&()),
            "kind": ClusterProfile::kind(&()),
        });
        let written = match version {
            None => {
                let created = ClusterProfile {
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        labels: profile.metadata.labels.clone(),
                        ..ObjectMeta::default()
                    },
                    spec: profile.spec.clone(),
                    status: None,
                };
                let post = PostParams {
                    field_manager: Some(MANAGER.to_owned()),
                    ..PostParams::default()
                };
                self.api.create(&post, &created).await?
            }
            Some(version) => {
                let mut object = head.clone();
                object["metadata"] = json!({
                    "name": name,
                    "resourceVersion": version,
                    "labels": profile.metadata.labels,
                });
                object["spec"] = json!(profile.spec);
                let apply = Patch::Apply(&object);
                self.api.patch(name, &params, &apply).await?
            }
        };
        let mut status = head;
        status["metadata"] = json!({
            "name": name,
            "resourceVersion": written.metadata.resource_version,
        });
        status["status"] = json!(profile.status);
        let written = self
            .api
            .patch_status(name, &params, &Patch::Apply(&status))
            .await?;
        Ok(written.metadata.resource_version.unwrap_or_default())
    }

    /// Deletes the profile `name` if Tether manages it, and says whose it was: only
    /// [`Owner::Tether`]'s was deleted; another manager's stays, and the caller logs which.
    pub(crate) async fn delete_ours(&self, name: &str) -> Result<Owner, kube::Error> {
        let Some(found) = self.api.get_metadata_opt(name).await? else {
            return Ok(Owner::Absent);
        };
        let owner = owner_of(&found.metadata);
        if owner == Owner::Tether {
            self.delete_unchanged(&found.metadata).await?;
        }
        Ok(owner)
    }

    /// Deletes the profile `meta` describes if it is still that very version: a profile
    /// applied again since it was read stays.
    pub(crate) async fn delete_unchanged(&self, meta: &ObjectMeta) -> Result<(), kube::Error> {
        let name = meta.name.as_deref().unwrap_or_default();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Every profile in the namespace labelled as Tether's.
    pub(crate) async fn list_ours(&self) -> Result<Vec<ObjectMeta>, kube::Error> {
        let selector = format!("{CLUSTER_MANAGER_LABEL}={TETHER_CLUSTER_MANAGER}");
        let mut params = ListParams::default().labels(&selector).limit(LIST_PAGE);
        let mut ours = Vec::new();
        loop {
            let page = self.api.list_metadata(&params).await?;
            let metas = page.items.into_iter().map(|item| item.metadata);
            ours.extend(metas.filter(|meta| owner_of(meta) == Owner::Tether));
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Ok(ours),
            }
        }
    }
}

/// Whether `err` says the profile changed (or appeared) since it was read: read it again.
pub(crate) fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 409)
}

fn owner_of(meta: &ObjectMeta) -> Owner {
    let labels = meta.labels.as_ref();
    match labels.and_then(|labels| labels.get(CLUSTER_MANAGER_LABEL)) {
        Some(manager) if manager == TETHER_CLUSTER_MANAGER => Owner::Tether,
        other => Owner::Other(other.cloned()),
    }
}
