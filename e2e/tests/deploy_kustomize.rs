//! The kustomize manifests (`deploy/kustomize`) against a real kube-apiserver.
//!
//! Every rendered object is sent to the harness's control plane with a server-side apply
//! dry-run and strict field validation, so the apiserver's own schema, defaulting and admission
//! judge it; Namespaces (and the namespaces the manifests expect to exist, such as Karmada's
//! `karmada-cluster`) are created for real first, since a namespaced dry-run needs its
//! namespace. The RBAC is read back from the rendered objects (no wildcards, Secrets only
//! through Roles, the exact set of grants) and, once applied for real, checked with
//! SubjectAccessReviews by the apiserver's own RBAC authorizer. The Deployment's arguments are
//! parsed with the collector's real command line.
//!
//! The suites render with `kustomize build` of the pinned kustomize (`hack/tools.sh`), as a
//! user would. The Helm chart is in `deploy_helm.rs`; the collector run with the base's RBAC alone in `deploy_collector_rbac.rs`.

mod deploy_support;

use std::{collections::BTreeSet, path::PathBuf};

use deploy_support::{
    EVENTS_NAMESPACE, KARMADA_SECRETS, PROFILES_NAMESPACE, Writes, assert_authorized, assert_rbac,
    id, network::assert_network_policy, workload::assert_collector_workload,
};
use e2e::{
    manifest::{
        clusterprofile_crd_path, generated_crd_path, kustomize_build, kustomize_dir,
        load_documents, of_kind,
    },
    manifest_apply::apply,
    rbac_grants::COLLECTOR_SA,
};
use rstest::rstest;
use serde_json::Value;
use testkit::Environment;

#[test]
fn kustomize_rbac_is_least_privilege() -> anyhow::Result<()> {
    for (dir, writes) in INSTALLS {
        assert_rbac(&kustomize_build(&kustomize_dir(dir))?, writes, dir);
    }
    Ok(())
}

/// The base publishing ClusterProfiles, through `components/publish-clusterprofiles`.
const PUBLISH_OVERLAY: &str = "overlays/publish-clusterprofiles";
/// What the collector writes with it: status, and profiles in `fleet`.
const PUBLISHING: Writes = Writes {
    profiles: true,
    ..Writes::status(true)
};
/// The base rotating member tokens, through `components/token-rotation`.
const ROTATION_OVERLAY: &str = "overlays/token-rotation";
/// What the collector writes with it: status, and minted tokens into the member Secrets.
const ROTATING: Writes = Writes {
    tokens: true,
    ..Writes::status(true)
};
/// The base with three replicas sharing the members, through `components/sharding`.
const SHARDED_OVERLAY: &str = "overlays/sharded";
/// What the collector writes with it: status, and its own shard Lease.
const SHARDED: Writes = Writes {
    shards: true,
    ..Writes::status(true)
};

/// The base minting federated members' tokens, through `components/federation`.
const FEDERATION_OVERLAY: &str = "overlays/federation";
/// What the collector does with it: status, and tokens of its own ServiceAccount.
const FEDERATED: Writes = Writes {
    federated: true,
    ..Writes::status(true)
};

/// Every install the kustomize page of the book documents, with what its collector writes.
const INSTALLS: [(&str, Writes); 6] = [
    ("base", Writes::status(true)),
    ("overlays/beside-karmada", Writes::status(false)),
    (PUBLISH_OVERLAY, PUBLISHING),
    (ROTATION_OVERLAY, ROTATING),
    (SHARDED_OVERLAY, SHARDED),
    (FEDERATION_OVERLAY, FEDERATED),
];

#[test]
fn kustomize_deployments_match_the_collector_cli() -> anyhow::Result<()> {
    let base = kustomize_build(&kustomize_dir("base"))?;
    let args = assert_collector_workload(&base, "base");
    assert_network_policy(&base, "base");
    assert!(args.write_status, "the base writes status");
    assert!(
        of_kind(&base, "CustomResourceDefinition").next().is_none(),
        "the CRD is applied from deploy/crds"
    );

    let beside = kustomize_build(&kustomize_dir("overlays/beside-karmada"))?;
    let args = assert_collector_workload(&beside, "beside-karmada");
    assert_network_policy(&beside, "beside-karmada");
    assert!(!args.write_status, "beside Karmada, Karmada writes status");
    let crds = of_kind(&beside, "CustomResourceDefinition");
    assert!(crds.count() == 0, "Karmada ships the CRD");

    let publishing = kustomize_build(&kustomize_dir(PUBLISH_OVERLAY))?;
    let args = assert_collector_workload(&publishing, PUBLISH_OVERLAY);
    assert!(
        args.write_status && args.leader_elect,
        "only the leader publishes"
    );
    assert_eq!(
        args.publish_clusterprofiles.as_deref(),
        Some(PROFILES_NAMESPACE)
    );
    let mut base = kustomize_build(&kustomize_dir("base"))?;
    for roles in ["clusterprofiles-role.yaml", "secrets-mark-role.yaml"] {
        base.extend(load_documents(&kustomize_dir(&format!(
            "components/publish-clusterprofiles/{roles}"
        )))?);
    }
    let ids = |objects: &[Value]| objects.iter().map(id).collect::<BTreeSet<_>>();
    assert_eq!(
        ids(&publishing),
        ids(&base),
        "the component adds its Roles and RoleBindings and nothing else"
    );

    let rotating = kustomize_build(&kustomize_dir(ROTATION_OVERLAY))?;
    let args = assert_collector_workload(&rotating, ROTATION_OVERLAY);
    assert!(
        args.mint.mint_tokens && args.leader_elect,
        "only the leader mints"
    );

    let sharded = kustomize_build(&kustomize_dir(SHARDED_OVERLAY))?;
    let args = assert_collector_workload(&sharded, SHARDED_OVERLAY);
    assert_eq!(args.shard.shards, collector::cli::ShardMode::Auto);
    assert_sharded_workload(&sharded, SHARDED_OVERLAY);

    let federated = kustomize_build(&kustomize_dir(FEDERATION_OVERLAY))?;
    let federation = assert_collector_workload(&federated, FEDERATION_OVERLAY).federation;
    let own = (COLLECTOR_SA.0.to_owned(), COLLECTOR_SA.1.to_owned());
    assert_eq!(
        federation.federated_service_account,
        Some(own),
        "tokens of the collector's own ServiceAccount"
    );
    assert_eq!(
        (
            federation.federated_audience_prefix.as_str(),
            federation.federated_token_lifetime
        ),
        ("tether.io/member/", 600),
        "the audiences and lifetime the member-side files assume"
    );
    let mut base = kustomize_build(&kustomize_dir("base"))?;
    base.extend(load_documents(&kustomize_dir(
        "components/federation/federation-role.yaml",
    ))?);
    assert_eq!(
        ids(&federated),
        ids(&base),
        "the component adds its Role and RoleBinding and nothing else"
    );
    Ok(())
}

/// Several replicas, and a PodDisruptionBudget over exactly the collector's pods that lets
/// one go at a time.
fn assert_sharded_workload(objects: &[Value], what: &str) {
    let deployment = of_kind(objects, "Deployment").next().unwrap();
    let replicas = deployment["spec"]["replicas"].as_i64().unwrap();
    assert!(replicas > 1, "{what}: {replicas} replicas");
    let budgets: Vec<_> = of_kind(objects, "PodDisruptionBudget").collect();
    assert_eq!(budgets.len(), 1, "{what}: one PodDisruptionBudget");
    assert_eq!(budgets[0]["spec"]["maxUnavailable"], 1, "{what}");
    assert_eq!(
        budgets[0]["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"],
        "{what}: the budget covers the collector's pods"
    );
}

#[test]
fn servicemonitor_component_scrapes_the_service() -> anyhow::Result<()> {
    let dir = kustomize_dir("components/servicemonitor");
    let monitors = load_documents(&dir.join("servicemonitor.yaml"))?;
    assert_eq!(monitors.len(), 1);
    let monitor = &monitors[0];
    let base = kustomize_build(&kustomize_dir("base"))?;
    let service = of_kind(&base, "Service").next().unwrap();
    assert_eq!(id(monitor).namespace, id(service).namespace);
    let selector = monitor["spec"]["selector"]["matchLabels"].as_object();
    let labels = service["metadata"]["labels"].as_object().unwrap();
    let selected = |(k, v): (&String, &Value)| labels.get(k) == Some(v);
    assert!(selector.unwrap().iter().all(selected));
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "http");
    assert_eq!(endpoint["path"], "/metrics");
    assert!(
        endpoint["bearerTokenFile"].is_string(),
        "Prometheus authenticates its scrapes"
    );
    let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml"))?;
    assert!(
        kustomization.contains("kind: Component") && kustomization.contains("servicemonitor.yaml")
    );
    Ok(())
}

/// Each install as documented, sent to a real apiserver: the CRDs it needs from deploy/crds
/// (Karmada ships its own beside Karmada), then the rendering, into the namespaces it expects.
#[rstest]
#[case::base(0, vec![generated_crd_path()], &[KARMADA_SECRETS, EVENTS_NAMESPACE])]
#[case::beside_karmada(1, vec![], &[KARMADA_SECRETS])]
#[case::publishing(
    2,
    vec![generated_crd_path(), clusterprofile_crd_path()],
    &[KARMADA_SECRETS, EVENTS_NAMESPACE, PROFILES_NAMESPACE],
)]
#[case::mint_request(3, vec![generated_crd_path()], &[KARMADA_SECRETS, EVENTS_NAMESPACE])]
#[case::sharded(4, vec![generated_crd_path()], &[KARMADA_SECRETS, EVENTS_NAMESPACE])]
#[case::federation(5, vec![generated_crd_path()], &[KARMADA_SECRETS, EVENTS_NAMESPACE])]
#[tokio::test]
async fn kustomize_install_is_accepted_by_a_real_apiserver(
    #[case] install: usize,
    #[case] crds: Vec<PathBuf>,
    #[case] namespaces: &[&str],
) {
    let (dir, writes) = INSTALLS[install];
    let env = Environment::with_members(0).await.unwrap();
    let client = env.control_plane().admin_client().unwrap();
    let mut objects: Vec<Value> = crds
        .iter()
        .flat_map(|crd| load_documents(crd).unwrap())
        .collect();
    objects.extend(kustomize_build(&kustomize_dir(dir)).unwrap());
    let accepted = apply(&client, &objects, namespaces).await.unwrap();
    assert_eq!(accepted.len(), objects.len(), "{dir}");
    assert_authorized(&client, &objects, writes).await;
}
