//! The Helm chart (`deploy/helm/tether`) against a real kube-apiserver, as the kustomize
//! manifests are in `deploy_kustomize.rs`: `helm lint`, `helm template` with the defaults and
//! with each values file in `ci/`, and a server-side dry-run apply with strict field validation
//! of every rendering. helm is the pinned one `hack/tools.sh` builds (`testkit::tools`).

mod deploy_support;

use std::{collections::BTreeSet, path::Path, time::Duration};

use clap::Parser as _;
use cluster_registry::clusterprofile::ProviderFile;
use collector::cli::{Args, MembersFrom};
use deploy_support::{
    EVENTS_NAMESPACE, KARMADA_SECRETS, PROFILES_NAMESPACE, Writes, assert_authorized, assert_rbac,
    expected_grants, grants, id,
    network::assert_network_policy,
    workload::{assert_collector_workload, collector_args, collector_container},
};
use e2e::{
    helm::{self, helm_template},
    kubeconfig_plane::Kubeconfig,
    manifest::{chart_dir, generated_crd_path, kustomize_dir, load_documents, of_kind, typed},
    manifest_apply::{apply, prerequisite_namespaces},
    rbac_grants::{COLLECTOR_SA, api_reader_role, rbac_grants},
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    rbac::v1::{PolicyRule, Role, RoleBinding},
};
use serde_json::Value;
use testkit::Environment;

#[test]
fn helm_chart_crd_is_the_generated_one() {
    let generated = std::fs::read_to_string(generated_crd_path()).unwrap();
    let copy = std::fs::read_to_string(chart_dir().join("files/cluster.karmada.io_clusters.yaml"))
        .unwrap();
    assert!(
        copy == generated,
        "deploy/helm/tether/files/ holds a stale CRD: \
         cp deploy/crds/cluster.karmada.io_clusters.yaml deploy/helm/tether/files/"
    );
}

#[tokio::test]
async fn helm_chart_renders_and_is_accepted_by_a_real_apiserver() -> anyhow::Result<()> {
    let env = Environment::with_members(0).await?;
    let client = env.control_plane().admin_client()?;
    let version = client.apiserver_version().await?.git_version;
    let version = version.trim_start_matches('v');

    // What a new user runs first: `helm install`, here as a server-side dry run (Helm 4's
    // `--dry-run=server`), with the defaults and beside Karmada, before anything below
    // creates objects that no release owns.
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    let admin = Kubeconfig::token(env.control_plane(), &env.control_plane().admin_token()?);
    std::fs::write(&kubeconfig, admin.to_yaml()?)?;
    for values in [
        None,
        Some(chart_dir().join("ci/beside-karmada-values.yaml")),
    ] {
        let report = helm::helm_install_dry_run(&kubeconfig, COLLECTOR_SA.0, values.as_deref())?;
        assert!(report.contains("STATUS: pending-install"), "{report}");
        assert!(report.contains("kind: Deployment"), "{report}");
    }

    // Defaults: the CRD, status writing; `helm install --create-namespace` makes the namespace.
    let objects = helm_template(version, None)?;
    let crds: Vec<_> = of_kind(&objects, "CustomResourceDefinition").collect();
    assert_eq!(crds.len(), 1, "installCRDs=true renders the CRD");
    let mut crd = crds[0].clone();
    let annotations = crd["metadata"]["annotations"].as_object_mut().unwrap();
    assert_eq!(
        annotations.remove("helm.sh/resource-policy"),
        Some("keep".into()),
        "the CRD outlives the release"
    );
    if annotations.is_empty() {
        crd["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
    }
    assert_eq!(
        crd,
        load_documents(&generated_crd_path())?[0],
        "the chart's CRD is the generated one"
    );
    assert_rbac(&objects, true, "helm defaults");
    assert!(assert_collector_workload(&objects, "helm defaults").write_status);
    assert_network_policy(&objects, "helm defaults");
    let existing = [KARMADA_SECRETS, COLLECTOR_SA.0, EVENTS_NAMESPACE];
    apply(&client, &objects, &existing).await?;
    assert_authorized(&client, &objects, true).await;

    // Beside Karmada, as the kustomize overlay.
    let values = chart_dir().join("ci/beside-karmada-values.yaml");
    let beside = helm_template(version, Some(&values))?;
    assert_eq!(of_kind(&beside, "CustomResourceDefinition").count(), 0);
    assert_rbac(&beside, false, "helm beside Karmada");
    assert!(!assert_collector_workload(&beside, "helm beside Karmada").write_status);
    apply(&client, &beside, &[KARMADA_SECRETS, COLLECTOR_SA.0]).await?;

    // Beside Karmada, publishing ClusterProfiles: their Role in that namespace, and the Lease
    // although no status is written.
    let values = chart_dir().join("ci/publish-clusterprofiles-values.yaml");
    let publishing = helm_template(version, Some(&values))?;
    let writes = Writes {
        profiles: true,
        ..Writes::status(false)
    };
    assert_rbac(&publishing, writes, "helm publishing ClusterProfiles");
    let args = assert_collector_workload(&publishing, "helm publishing ClusterProfiles");
    assert_eq!(
        args.publish_clusterprofiles.as_deref(),
        Some(PROFILES_NAMESPACE)
    );
    let existing = [KARMADA_SECRETS, COLLECTOR_SA.0, PROFILES_NAMESPACE];
    apply(&client, &publishing, &existing).await?;
    // Not a namespace name: refused at render time.
    let bad = tempfile::NamedTempFile::new()?;
    std::fs::write(bad.path(), "publishClusterProfiles: Not_A_Namespace\n")?;
    let err = helm_template(version, Some(bad.path())).unwrap_err();
    let err = format!("{err:#}");
    assert!(err.contains("must be a namespace name"), "{err}");

    // The chart and the kustomize base make the same kinds of objects in the same places.
    let places = |objects: &[Value]| {
        objects
            .iter()
            .map(|o| (id(o).kind, id(o).namespace))
            .collect::<BTreeSet<_>>()
    };
    let mut base = load_documents(&generated_crd_path())?;
    base.extend(e2e::manifest::kustomize_build(&kustomize_dir("base"))?);
    base.retain(|o| id(o).kind != "Namespace");
    assert_eq!(places(&objects), places(&base));
    Ok(())
}

#[test]
fn helm_lint_passes_with_the_defaults_and_every_ci_values_file() {
    let version = helm::kube_version().unwrap();
    helm::helm_lint(&version, None).unwrap();
    for file in helm::ci_values_files().unwrap() {
        helm::helm_lint(&version, Some(&file))
            .unwrap_or_else(|err| panic!("{}: {err:#}", file.display()));
    }
}

/// Grants every mode has: the access reviews in front of the collector's API.
const REVIEW_GRANTS: &[&str] = &[
    "cluster authentication.k8s.io/tokenreviews create",
    "cluster authorization.k8s.io/subjectaccessreviews create",
];

/// What a values file in `ci/` selects, and the exact RBAC it renders.
struct Case {
    /// The file name under `ci/`.
    file: &'static str,
    members_from: MembersFrom,
    /// The namespaces the member source reads (`--argocd-namespace`, `--kubeconfig-namespace`
    /// or `--clusterprofile-namespace`); none for Karmada, whose Clusters are cluster-scoped.
    namespaces: &'static [&'static str],
    /// The grants besides [`REVIEW_GRANTS`]; for Karmada, [`expected_grants`] decides from
    /// what the collector writes.
    grants: &'static [&'static str],
}

impl Case {
    /// A Karmada case: Clusters are cluster-scoped, and what the collector writes decides the
    /// grants.
    const fn karmada(file: &'static str) -> Self {
        Case {
            file,
            members_from: MembersFrom::Karmada,
            namespaces: &[],
            grants: &[],
        }
    }
}

const CASES: &[Case] = &[
    Case::karmada("beside-karmada-values.yaml"),
    Case::karmada("publish-clusterprofiles-values.yaml"),
    Case::karmada("token-rotation-values.yaml"),
    Case::karmada("token-rotation-members-values.yaml"),
    Case::karmada("sharded-values.yaml"),
    Case::karmada("federation-values.yaml"),
    Case {
        file: "argocd-values.yaml",
        members_from: MembersFrom::Argocd,
        namespaces: &["argocd"],
        grants: &["argocd core/secrets get,list,watch"],
    },
    Case {
        file: "capi-values.yaml",
        members_from: MembersFrom::Capi,
        namespaces: &["fleet-a", "fleet-b"],
        grants: &[
            "fleet-a core/secrets get,list,watch",
            "fleet-b core/secrets get,list,watch",
        ],
    },
    Case {
        file: "kubeconfig-values.yaml",
        members_from: MembersFrom::Kubeconfig,
        namespaces: &["flux-system"],
        grants: &["flux-system core/secrets get,list,watch"],
    },
    Case {
        file: "clusterprofile-values.yaml",
        members_from: MembersFrom::Clusterprofile,
        namespaces: &["open-cluster-management", "fleet-inventory"],
        grants: &[
            "open-cluster-management multicluster.x-k8s.io/clusterprofiles get,list,watch",
            "fleet-inventory multicluster.x-k8s.io/clusterprofiles get,list,watch",
        ],
    },
];

/// The checks a listed values file gets on top of rendering and the dry-run: the member source
/// and its namespaces, the namespaces that must exist first, the exact RBAC, and for
/// ClusterProfiles the provider file the collector is pointed at.
fn assert_case(case: &Case, objects: &[Value]) {
    let what = case.file;
    let args = collector_args(objects, what);
    assert_eq!(args.sources.members_from, case.members_from, "{what}");
    let namespaces = match case.members_from {
        MembersFrom::Argocd => &args.sources.argocd_namespace,
        MembersFrom::Capi | MembersFrom::Kubeconfig => &args.sources.kubeconfig_namespace,
        MembersFrom::Clusterprofile => &args.sources.clusterprofile_namespace,
        _ => &Vec::new(),
    };
    assert_eq!(namespaces, case.namespaces, "{what}: the namespaces read");
    // What exists before `helm install --create-namespace`: the release's namespace, those the
    // member source reads and, for Karmada, its Secrets' and (writing status) the Events'.
    let mut before: BTreeSet<&str> = case.namespaces.iter().copied().collect();
    before.insert(COLLECTOR_SA.0);
    if case.members_from == MembersFrom::Karmada {
        before.insert(KARMADA_SECRETS);
        if args.write_status {
            before.insert(EVENTS_NAMESPACE);
        }
    }
    before.extend(args.publish_clusterprofiles.as_deref());
    let used = prerequisite_namespaces(objects);
    assert_eq!(
        used.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        before,
        "{what}: the namespaces used but not created"
    );
    let expected = if case.members_from == MembersFrom::Karmada {
        expected_grants(Writes {
            status: args.write_status,
            profiles: args.publish_clusterprofiles.is_some(),
            tokens: args.mint.mint_tokens || !args.mint.mint_tokens_for.is_empty(),
            shards: args.shard.shards == collector::cli::ShardMode::Auto,
            federated: args.federation.federated_service_account.is_some(),
        })
    } else {
        grants(REVIEW_GRANTS)
            .into_iter()
            .chain(grants(case.grants))
            .collect()
    };
    let actual = rbac_grants(objects).unwrap_or_else(|err| panic!("{what}: {err:#}"));
    assert_eq!(actual, expected, "{what}: the collector's RBAC");
    if let Some((namespace, name)) = &args.federation.federated_service_account {
        assert_eq!(
            (namespace.as_str(), name.as_str()),
            COLLECTOR_SA,
            "{what}: federated tokens are the collector's own ServiceAccount's"
        );
    }
    api_reader_role(objects).unwrap_or_else(|err| panic!("{what}: {err:#}"));
    // Several replicas get a PodDisruptionBudget over their pods; one gets none.
    let deployment = of_kind(objects, "Deployment").next().unwrap();
    let replicas = deployment["spec"]["replicas"].as_i64().unwrap_or(1);
    let budgets: Vec<_> = of_kind(objects, "PodDisruptionBudget").collect();
    assert_eq!(budgets.len(), usize::from(replicas > 1), "{what}: budgets");
    for budget in budgets {
        assert_eq!(
            budget["spec"]["selector"]["matchLabels"],
            deployment["spec"]["selector"]["matchLabels"],
            "{what}: the budget covers the collector's pods"
        );
    }
    let crds = of_kind(objects, "CustomResourceDefinition").count();
    assert_eq!(crds, 0, "{what}: the CRD is installed by the defaults only");

    // The ConfigMap holds a provider file the collector accepts, mounted where its flag says.
    let config_maps: Vec<_> = of_kind(objects, "ConfigMap").collect();
    let Some(file) = args.sources.clusterprofile_provider_file else {
        assert!(config_maps.is_empty(), "{what}: no ConfigMap");
        return;
    };
    assert_eq!(
        config_maps.len(),
        1,
        "{what}: the provider file's ConfigMap"
    );
    let key = file.file_name().unwrap().to_str().unwrap();
    let raw = config_maps[0]["data"][key].as_str().unwrap();
    let providers = ProviderFile::parse(raw.as_bytes()).unwrap();
    assert!(providers.names().next().is_some(), "{what}: a provider");
    let deployment: Deployment = typed(of_kind(objects, "Deployment").next().unwrap()).unwrap();
    let mount = collector_container(&deployment)
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| Path::new(&m.mount_path) == file.parent().unwrap())
        .unwrap_or_else(|| panic!("{what}: nothing mounted at {}", file.display()));
    let pod = deployment.spec.as_ref().unwrap().template.spec.as_ref();
    let volume = pod
        .unwrap()
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name);
    assert_eq!(
        volume
            .and_then(|v| v.config_map.as_ref())
            .map(|c| c.name.as_str()),
        Some(id(config_maps[0]).name.as_str()),
        "{what}: the mount is the ConfigMap"
    );
}

/// Every values file in `ci/` renders and is accepted by a real apiserver; those in [`CASES`]
/// are checked further ([`assert_case`]). A file not listed still gets the dry-run, with the
/// namespaces it uses but does not create taken as existing.
#[tokio::test]
async fn every_ci_values_file_renders_and_is_accepted_by_a_real_apiserver() {
    let files = helm::ci_values_files().unwrap();
    let names: Vec<_> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    for case in CASES {
        assert!(names.iter().any(|n| n == case.file), "no ci/{}", case.file);
    }
    let env = Environment::with_members(0).await.unwrap();
    let client = env.control_plane().admin_client().unwrap();
    let version = helm::kube_version().unwrap();
    for (file, name) in files.iter().zip(&names) {
        let objects =
            helm_template(&version, Some(file)).unwrap_or_else(|err| panic!("{name}: {err:#}"));
        match CASES.iter().find(|case| case.file == name) {
            Some(case) => assert_case(case, &objects),
            None => eprintln!("ci/{name}: rendered and applied, but not listed in CASES"),
        }
        let prerequisites = prerequisite_namespaces(&objects);
        let prerequisites: Vec<&str> = prerequisites.iter().map(String::as_str).collect();
        let accepted = apply(&client, &objects, &prerequisites)
            .await
            .unwrap_or_else(|err| panic!("{name}: {err:#}"));
        assert_eq!(accepted.len(), objects.len(), "{name}");
    }
}

/// `tokenRotation.members`, `maxExpiration` and `audiences` reach the collector as the
/// operator's bounds on minting: only those members, no longer lifetime, no other audience.
#[test]
fn rotation_values_become_the_operators_bounds_on_minting() {
    let version = helm::kube_version().unwrap();
    let values = chart_dir().join("ci/token-rotation-members-values.yaml");
    let objects = helm_template(&version, Some(&values)).unwrap();
    let rotation = collector_args(&objects, "token-rotation-members").mint;
    assert!(!rotation.mint_tokens, "members limit minting to themselves");
    assert_eq!(rotation.mint_tokens_for, ["member1", "member2"]);
    assert_eq!(rotation.mint_max_expiration, Duration::from_secs(12 * 3600));
    assert_eq!(
        rotation.mint_audiences,
        ["https://kubernetes.default.svc.cluster.local"]
    );

    let defaults = chart_dir().join("ci/token-rotation-values.yaml");
    let objects = helm_template(&version, Some(&defaults)).unwrap();
    let rotation = collector_args(&objects, "token-rotation").mint;
    assert!(rotation.mint_tokens && rotation.mint_tokens_for.is_empty());
    assert_eq!(rotation.mint_max_expiration, Duration::from_secs(24 * 3600));
    assert!(rotation.mint_audiences.is_empty());
}

/// The chart's federation Role and RoleBinding, if it renders them: the only objects named
/// `<collector>-federation`.
fn federation_rbac(objects: &[Value]) -> Option<(Role, RoleBinding)> {
    let named = |kind| {
        of_kind(objects, kind)
            .filter(|o| id(o).name.ends_with("-collector-federation"))
            .collect::<Vec<_>>()
    };
    let (roles, bindings) = (named("Role"), named("RoleBinding"));
    assert_eq!(roles.len(), bindings.len(), "a RoleBinding per Role");
    assert!(roles.len() <= 1, "one federation Role at most");
    Some((typed(roles.first()?).unwrap(), typed(bindings[0]).unwrap()))
}

/// Renders the chart with `values` (YAML text) as the only values file.
fn helm_template_with(version: &str, values: &str) -> anyhow::Result<Vec<Value>> {
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), values)?;
    helm_template(version, Some(file.path()))
}

/// `federation.*` becomes the collector's federation flags, with a Role that lets its own
/// ServiceAccount, and no other, be minted tokens of; off by default, with neither.
#[test]
fn federation_values_become_the_collectors_flags_and_its_one_token_grant() {
    let version = helm::kube_version().unwrap();
    let defaults = helm_template(&version, None).unwrap();
    let args = collector_args(&defaults, "helm defaults");
    assert_eq!(args.federation.federated_service_account, None);
    assert!(federation_rbac(&defaults).is_none(), "no federation Role");
    let tokens = rbac_grants(&defaults).unwrap();
    assert!(
        !tokens.iter().any(|g| g.contains("serviceaccounts/token")),
        "helm defaults mint no token: {tokens:#?}"
    );

    let values = chart_dir().join("ci/federation-values.yaml");
    let objects = helm_template(&version, Some(&values)).unwrap();
    let federation = collector_args(&objects, "federation").federation;
    let own = (COLLECTOR_SA.0.to_owned(), COLLECTOR_SA.1.to_owned());
    assert_eq!(federation.federated_service_account, Some(own));
    assert_eq!(
        federation.federated_audience_prefix,
        "fleet.example.com/member/"
    );
    assert_eq!(federation.federated_token_lifetime, 3600);
    let (role, binding) = federation_rbac(&objects).expect("the federation Role");
    assert_eq!(
        role.rules.unwrap_or_default(),
        [PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["serviceaccounts/token".to_owned()]),
            resource_names: Some(vec![COLLECTOR_SA.1.to_owned()]),
            verbs: vec!["create".to_owned()],
            ..PolicyRule::default()
        }],
        "create on the collector's own serviceaccounts/token only"
    );
    assert_eq!(
        (
            role.metadata.namespace.as_deref(),
            binding.metadata.namespace.as_deref()
        ),
        (Some(COLLECTOR_SA.0), Some(COLLECTOR_SA.0)),
        "in the release namespace"
    );
    assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());

    // Enabled alone: the collector's own defaults.
    let enabled = helm_template_with(&version, "federation: {enabled: true}\n").unwrap();
    let rendered = collector_args(&enabled, "federation.enabled").federation;
    let own_defaults = Args::try_parse_from(["collector"]).unwrap().federation;
    assert_eq!(
        (
            rendered.federated_audience_prefix,
            rendered.federated_token_lifetime
        ),
        (
            own_defaults.federated_audience_prefix,
            own_defaults.federated_token_lifetime
        ),
        "the chart's defaults are the collector's"
    );

    // Another name for the release's objects: the flag and `resourceNames` follow the
    // ServiceAccount's.
    let renamed = "fullnameOverride: fleet-tether\nfederation: {enabled: true}\n";
    let objects = helm_template_with(&version, renamed).unwrap();
    let account = collector_args(&objects, "fullnameOverride").federation;
    let (role, binding) = federation_rbac(&objects).expect("the federation Role");
    let names = role.rules.unwrap_or_default()[0].resource_names.clone();
    let subject = binding.subjects.unwrap_or_default()[0].name.clone();
    assert_eq!(
        account.federated_service_account.map(|(_, name)| name),
        Some("fleet-tether-collector".to_owned())
    );
    assert_eq!(names, Some(vec!["fleet-tether-collector".to_owned()]));
    assert_eq!(subject, "fleet-tether-collector");

    // What the collector would refuse, refused at render time.
    for (values, says) in [
        ("tokenLifetimeSeconds: 599", "600 to 86400"),
        ("tokenLifetimeSeconds: 86401", "600 to 86400"),
        ("audiencePrefix: ''", "without spaces"),
        ("audiencePrefix: 'a b'", "without spaces"),
    ] {
        let values = format!("federation: {{enabled: true, {values}}}\n");
        let err = helm_template_with(&version, &values).unwrap_err();
        let err = format!("{err:#}");
        assert!(err.contains(says), "{values}: {err}");
    }
    let argocd = "membersFrom: argocd\nsecretNamespaces: [argocd]\nfederation: {enabled: true}\n";
    let err = format!("{:#}", helm_template_with(&version, argocd).unwrap_err());
    assert!(err.contains("membersFrom must be karmada"), "{err}");
}
