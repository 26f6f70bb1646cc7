//! A ClusterProfile inventory on a harness control plane: the CRD users apply
//! (`deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml`), one namespace, and the profiles
//! in it read back through Tether's own `ClusterProfile` type; and what a consumer of the
//! profiles Tether publishes needs: its identity and provider file ([`Consumer`]), its RBAC
//! ([`grant_consumer`]) and a published profile ([`wait_published`]).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use cluster_registry::clusterprofile::{CLUSTER_MANAGER_LABEL, ClusterProfile};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{DynamicObject, PostParams},
};
use serde_json::{Value, json};
use testkit::{Cluster, Step, crd, eventually, matching};

use crate::{
    collector_run::RunningCollector, kubeconfig_plane::Kubeconfig, limits::HOUR,
    manifest_apply::apply_rbac_for_real, scenario::Scenario,
};

/// The profiles of one namespace, through an admin client (cheap to clone).
#[derive(Clone)]
pub struct Inventory {
    /// The namespace.
    pub namespace: String,
    api: Api<ClusterProfile>,
}

impl Inventory {
    /// Creates the ClusterProfile CRD from the deploy file and `namespace`, and returns once
    /// profiles are served.
    ///
    /// # Errors
    /// A CRD that does not parse, API errors, or the CRD not being served within 30 s.
    pub async fn install(client: &Client, namespace: &str) -> anyhow::Result<Self> {
        let resource = crd::cluster_profile_resource();
        crd::install_crd(client, crd::CLUSTER_PROFILE_CRD_YAML, &resource).await?;
        let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": namespace } }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {namespace}"))?;
        Ok(Self {
            namespace: namespace.to_owned(),
            api: Api::namespaced(client.clone(), namespace),
        })
    }

    /// The profiles, for requests of a test's own.
    pub fn api(&self) -> &Api<ClusterProfile> {
        &self.api
    }

    /// Profile `name`, if it exists.
    pub async fn get(&self, name: &str) -> anyhow::Result<Option<ClusterProfile>> {
        Ok(self.api.get_opt(name).await?)
    }

    /// Creates profile `name` as cluster manager `manager` would (its label and spec, no
    /// status).
    pub async fn create_as(&self, name: &str, manager: &str) -> anyhow::Result<ClusterProfile> {
        let profile: ClusterProfile = serde_json::from_value(json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": { "name": name, "labels": { CLUSTER_MANAGER_LABEL: manager } },
            "spec": { "displayName": name, "clusterManager": { "name": manager } },
        }))?;
        Ok(self.api.create(&PostParams::default(), &profile).await?)
    }

    /// Polls until `want` holds of profile `name` (`None` while it does not exist) and returns
    /// what it last read.
    ///
    /// # Errors
    /// Not holding within `limit` (the error says `what` and shows the last profile read).
    pub async fn wait_for(
        &self,
        name: &str,
        what: &str,
        limit: Duration,
        want: impl Fn(Option<&ClusterProfile>) -> bool,
    ) -> anyhow::Result<Option<ClusterProfile>> {
        eventually(&format!("profile {name} {what}"), limit, || async {
            let now = self.get(name).await.ok().flatten();
            matching(now, |now| want(now.as_ref()))
        })
        .await
    }
}

/// The status and reason of condition `type_` of `profile`, if it has one.
pub fn condition(profile: &ClusterProfile, type_: &str) -> Option<(String, String)> {
    profile
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Whether `profile` has condition `type_` with `status` and `reason`.
pub fn has_condition(
    profile: Option<&ClusterProfile>,
    type_: &str,
    status: &str,
    reason: &str,
) -> bool {
    profile.and_then(|p| condition(p, type_)) == Some((status.to_owned(), reason.to_owned()))
}

/// A consumer of published profiles as client-go runs one: ServiceAccount `consumers/app` on
/// the control plane, a kubeconfig with its token, and a provider file that maps the `tether`
/// access provider to `tether-credential` run with that kubeconfig. Its RBAC is
/// [`grant_consumer`]'s.
pub struct Consumer {
    /// The ServiceAccount's token (an hour long), for asserting it is never printed.
    pub token: String,
    /// The kubeconfig that authenticates as the ServiceAccount.
    pub kubeconfig: PathBuf,
    /// The provider file.
    pub provider_file: PathBuf,
}

impl Consumer {
    /// Creates the ServiceAccount and writes both files into `dir`; `tether-credential` is
    /// `credential`, run with `--kubeconfig` and then `extra_args`.
    ///
    /// # Errors
    /// API errors, or files that cannot be written.
    pub async fn create(
        control_plane: &Cluster,
        dir: &Path,
        credential: &Path,
        extra_args: &[&str],
    ) -> anyhow::Result<Self> {
        control_plane.create_namespace_named("consumers").await?;
        control_plane
            .create_service_account("consumers", "app")
            .await?;
        let token = control_plane.mint_token("consumers", "app", HOUR).await?;
        let kubeconfig = dir.join("consumer.kubeconfig");
        std::fs::write(
            &kubeconfig,
            Kubeconfig::token(control_plane, &token).to_yaml()?,
        )?;
        let provider_file = dir.join("providers.json");
        let mut args = vec![json!("--kubeconfig"), json!(kubeconfig)];
        args.extend(extra_args.iter().map(|a| json!(a)));
        let providers = json!({"providers": [{
            "name": "tether",
            "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": credential,
                "args": args,
                "provideClusterInfo": true,
            },
        }]});
        std::fs::write(&provider_file, providers.to_string())?;
        Ok(Self {
            token,
            kubeconfig,
            provider_file,
        })
    }
}

/// Grants ServiceAccount `consumers/app` `get` on exactly what a consumer needs: the
/// ClusterProfiles `profiles` in `inventory`, and the Secrets `secrets` in `secret_namespace`
/// that their `tether` providers name.
pub async fn grant_consumer(
    control_plane: &Cluster,
    inventory: &str,
    profiles: &[&str],
    secret_namespace: &str,
    secrets: &[&str],
) -> anyhow::Result<()> {
    let mut objects = Vec::new();
    for (namespace, group, resource, names) in [
        (
            inventory,
            "multicluster.x-k8s.io",
            "clusterprofiles",
            profiles,
        ),
        (secret_namespace, "", "secrets", secrets),
    ] {
        let metadata = json!({"name": format!("consumer-{resource}"), "namespace": namespace});
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata,
            "rules": [{"apiGroups": [group], "resources": [resource],
                       "resourceNames": names, "verbs": ["get"]}],
        }));
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": metadata["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "consumers"}],
        }));
    }
    apply_rbac_for_real(&control_plane.admin_client()?, &objects).await?;
    Ok(())
}

/// Replaces `scenario`'s collector with one that publishes ClusterProfiles into `inventory`
/// (the CRD installed and the namespace created first), and waits up to `limit` for
/// `member`'s profile: returns the new collector and the profile as JSON.
///
/// # Errors
/// API errors, the collector not starting, or no profile within `limit`.
pub async fn start_publishing(
    scenario: &mut Scenario,
    inventory: &str,
    member: &str,
    limit: Duration,
) -> anyhow::Result<(RunningCollector, Value)> {
    scenario.collector.stop().await;
    let control_plane = scenario.env.control_plane().clone();
    crd::install_cluster_profile_crd(&control_plane.admin_client()?).await?;
    control_plane.create_namespace_named(inventory).await?;
    let collector = scenario
        .start_collector(&["--publish-clusterprofiles", inventory])
        .await?;
    let profile = wait_published(&control_plane, inventory, member, limit).await?;
    Ok((collector, profile))
}

/// Waits up to `limit` until the collector has published `member`'s profile in `inventory`
/// with its `tether` provider, and returns it as JSON.
///
/// # Errors
/// API errors, or no such profile within `limit`.
pub async fn wait_published(
    control_plane: &Cluster,
    inventory: &str,
    member: &str,
    limit: Duration,
) -> anyhow::Result<Value> {
    let profiles = Api::<DynamicObject>::namespaced_with(
        control_plane.admin_client()?,
        inventory,
        &crd::cluster_profile_resource(),
    );
    let what = format!("{member} is published with the tether provider");
    eventually(&what, limit, || async {
        let profile = match profiles.get_opt(member).await {
            Ok(profile) => serde_json::to_value(profile).unwrap_or_default(),
            Err(err) => return Step::Fail(err.into()),
        };
        if profile["status"]["accessProviders"][0]["name"] == "tether" {
            Step::Done(profile)
        } else {
            Step::Pending(profile.to_string())
        }
    })
    .await
}
