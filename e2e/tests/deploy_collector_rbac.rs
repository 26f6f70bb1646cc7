//! The collector run as the kustomize base's ServiceAccount with the base's RBAC alone and the
//! Deployment's own arguments, against a real control plane: the access reviews of
//! `deploy_kustomize.rs` check the requests we listed, this finds any we did not think of.
//! Federated members the same way, with the member-side files (`deploy/member-rbac/federated-*`,
//! `deploy/control-plane/`) applied as a user would.

mod deploy_support;

use std::{collections::BTreeMap, time::Duration};

use cluster_registry::{
    clusterprofile::CONTROL_PLANE_HEALTHY,
    federation::{CA_BUNDLE_ANNOTATION, CREDENTIAL_ANNOTATION, FEDERATED},
    karmada::Cluster,
};
use deploy_support::{
    EVENTS_NAMESPACE, id,
    workload::{collector_args, collector_container},
};
use e2e::{
    clusterprofiles::{Inventory, has_condition},
    collector_run::{RunningCollector, control_plane_args},
    limits::HOUR,
    manifest::{kustomize_build, kustomize_dir, load_documents, of_kind, repo_root, typed},
    manifest_apply::{apply_object, apply_rbac_for_real},
    rbac_grants::COLLECTOR_SA,
    scenario::events_about,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    coordination::v1::Lease,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Subject},
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use serde::Deserialize;
use serde_json::Value;
use testkit::{
    Config, Environment, Karmada, MIN_TOKEN_EXPIRY, PushMember, client_for, deployment, eventually,
};

/// Bound for the collector's start-up and for each state it must reach.
const LIMIT: Duration = Duration::from_secs(30);

/// A Karmada control plane with member1 registered, the base's namespace, ServiceAccount and
/// the RBAC among `objects` applied for real, and the collector running as that ServiceAccount
/// with the Deployment's own arguments (plus what the pod would get from its environment).
async fn collector_as_the_base_service_account(
    env: &Environment,
    objects: &[Value],
) -> anyhow::Result<(Karmada, RunningCollector)> {
    let (cp, member) = (env.control_plane(), env.cluster(1));
    // What a user has before `kubectl apply -k`: the CRD (Karmada's or deploy/crds) and
    // Karmada's Secret namespace; then a member registered the Karmada way.
    let plane = Karmada::install(cp).await?;
    let (_, member_token) = member.create_agent("agents", "agent-a", HOUR).await?;
    plane
        .register(&PushMember::of(member, &member_token))
        .await?;
    let collector = start_as_the_service_account(cp, objects).await?;
    Ok((plane, collector))
}

/// The namespaces, ServiceAccount and RBAC among `objects` applied for real on `cp`, and the
/// collector running as that ServiceAccount with the Deployment's own arguments (plus what the
/// pod would get from its environment).
async fn start_as_the_service_account(
    cp: &testkit::Cluster,
    objects: &[Value],
) -> anyhow::Result<RunningCollector> {
    let admin = cp.admin_client()?;
    for namespace in of_kind(objects, "Namespace") {
        apply_object(&admin, namespace).await?;
    }
    apply_rbac_for_real(&admin, objects).await?;
    let (sa_namespace, sa_name) = COLLECTOR_SA;
    let own_token = cp.mint_token(sa_namespace, sa_name, HOUR).await?;

    let deployment: Deployment = typed(of_kind(objects, "Deployment").next().unwrap())?;
    let mut args = collector_container(&deployment).args.clone().unwrap();
    args.extend(control_plane_args(cp, &own_token)?);
    let flags = "--leader-election-identity tether-collector-0 --probe-period 1";
    args.extend(flags.split(' ').map(str::to_owned));
    // Read as an admin would: through the access reviews the base's RBAC lets the collector make.
    let collector = RunningCollector::start(&args)
        .await?
        .with_reader(&cp.admin_token()?);
    Ok(collector)
}

/// The access reviews above check the requests we listed; this runs the collector with the
/// base's RBAC and nothing else, with the Deployment's own arguments, so a request we did not
/// think of fails here.
#[tokio::test]
async fn the_collector_does_its_job_with_exactly_the_base_rbac() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client()?;
    let objects = kustomize_build(&kustomize_dir("base"))?;
    let (plane, mut collector) = collector_as_the_base_service_account(&env, &objects).await?;
    let sa_namespace = COLLECTOR_SA.0;

    // Status written: Clusters listed, the Secret read, the Lease taken, the status patched.
    plane
        .wait_condition("member1", "Ready", "True/MemberReady", LIMIT)
        .await?;
    let lease = Api::<Lease>::namespaced(admin.clone(), sa_namespace)
        .get("tether-collector")
        .await?;
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("tether-collector-0")
    );
    // And the transition recorded as an Event on the Cluster.
    let what = format!("a MemberReady Event for member1 in {EVENTS_NAMESPACE}");
    eventually(&what, LIMIT, || async {
        let events = events_about(&admin, Some(EVENTS_NAMESPACE), "member1").await;
        let reasons = events.unwrap().into_iter().filter_map(|e| e.reason);
        reasons.into_iter().any(|r| r == "MemberReady")
    })
    .await?;

    // A Cluster whose Secret is in a namespace the base grants nothing in: said so, on it.
    cp.create_namespace_named("elsewhere").await?;
    apply_object(
        &admin,
        &serde_json::json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": { "name": "member2" },
            "spec": {
                "syncMode": "Push",
                "apiEndpoint": member.endpoint(),
                "secretRef": { "namespace": "elsewhere", "name": "member2" },
            },
        }),
    )
    .await?;
    plane
        .wait_condition("member2", "Ready", "False/SecretForbidden", LIMIT)
        .await?;
    assert_eq!(
        plane.condition("member2", "CredentialsValid").await?,
        Some(("Unknown".to_owned(), "SecretForbidden".to_owned()))
    );
    assert_eq!(
        plane.condition("member1", "Ready").await?,
        Some(("True".to_owned(), "MemberReady".to_owned())),
        "member1 is unaffected"
    );
    collector.stop().await;
    Ok(())
}

/// The same with the publishing overlay: its Role alone lets the collector publish, delete a
/// removed member's profile and collect an earlier run's garbage.
#[tokio::test]
async fn the_collector_publishes_clusterprofiles_with_exactly_the_overlay_rbac()
-> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let admin = env.control_plane().admin_client()?;
    let inventory = Inventory::install(&admin, "fleet").await?;
    inventory.create_as("ghost", "tether").await?;
    let objects = kustomize_build(&kustomize_dir("overlays/publish-clusterprofiles"))?;
    let (_plane, mut collector) = collector_as_the_base_service_account(&env, &objects).await?;

    inventory
        .wait_for("member1", "healthy", LIMIT, |p| {
            has_condition(p, CONTROL_PLANE_HEALTHY, "True", "MemberReady")
        })
        .await?;
    inventory
        .wait_for("ghost", "collected", LIMIT, |p| p.is_none())
        .await?;
    Api::<Cluster>::all(admin.clone())
        .delete("member1", &DeleteParams::default())
        .await?;
    inventory
        .wait_for("member1", "deleted", LIMIT, |p| p.is_none())
        .await?;
    collector.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_collector_that_may_not_list_clusters_is_not_ready_and_says_why() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let admin = env.control_plane().admin_client()?;
    let objects = kustomize_build(&kustomize_dir("base"))?;
    // The base without the binding that lets the collector read Clusters.
    let (without, binding): (Vec<Value>, Vec<Value>) = objects.iter().cloned().partition(|o| {
        let id = id(o);
        !(id.kind == "ClusterRoleBinding" && id.name == COLLECTOR_SA.1)
    });
    assert_eq!(binding.len(), 1, "the base binds its ClusterRole once");
    let (_plane, mut collector) = collector_as_the_base_service_account(&env, &without).await?;

    let what = "/readyz says the Clusters cannot be listed";
    let short = eventually(what, LIMIT, || async {
        let (status, short) = collector.get("/readyz").await.unwrap();
        // The full reason only to an authenticated reader: "not listed yet" first, then the
        // apiserver's refusal.
        let full = collector.get_json("/api/v1/readiness").await.unwrap();
        let reason = full["reason"].as_str().unwrap_or_default();
        let refused = reason.contains("Karmada Clusters") && reason.contains("forbidden");
        if status == 503 && refused {
            Ok(short)
        } else {
            Err(format!("{status} ({full})"))
        }
    })
    .await?;
    assert_eq!(short, "member definitions are not listed");
    let listed = || collector.metric("tether_member_source_listed", r#"source="karmada""#);
    assert_eq!(listed().await?, 0.0);

    // Granted: the watch's retry lists, and the collector is ready without a restart.
    apply_rbac_for_real(&admin, &binding).await?;
    eventually("ready after the grant", 2 * LIMIT, || async {
        collector.get("/readyz").await.unwrap().0 == 200
    })
    .await?;
    assert_eq!(listed().await?, 1.0);
    collector.stop().await;
    Ok(())
}

/// What a member applies for a federated credential: the grants of the collector's identity.
const FEDERATED_MEMBER_RBAC: &str = "deploy/member-rbac/federated-member.yaml";
/// What a member's kube-apiserver is given to trust the control plane's issuer.
const FEDERATED_AUTHENTICATION: &str = "deploy/member-rbac/federated-authentication-config.yaml";
/// What the control plane applies when members read its issuer's documents from it.
const ISSUER_DISCOVERY: &str = "deploy/control-plane/issuer-discovery.yaml";
/// The kustomize install with federated members.
const FEDERATION_OVERLAY: &str = "overlays/federation";
/// The member [`FEDERATED_AUTHENTICATION`] is written for.
const EXAMPLE_MEMBER: &str = "member1";

/// `apiserver.config.k8s.io/v1` `AuthenticationConfiguration` with the fields the apiserver
/// knows: a field it does not (a typo) fails here as it fails the apiserver's strict decoding.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "parsed to refuse unknown fields; not every field is checked"
)]
struct AuthenticationConfiguration {
    api_version: String,
    kind: String,
    jwt: Vec<JwtAuthenticator>,
    anonymous: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "parsed to refuse unknown fields; not every field is checked"
)]
struct JwtAuthenticator {
    issuer: Issuer,
    claim_validation_rules: Option<Vec<Value>>,
    claim_mappings: ClaimMappings,
    user_validation_rules: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "parsed to refuse unknown fields; not every field is checked"
)]
struct Issuer {
    url: String,
    #[serde(rename = "discoveryURL")]
    discovery_url: Option<String>,
    certificate_authority: Option<String>,
    audiences: Vec<String>,
    audience_match_policy: Option<String>,
    egress_selector_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "parsed to refuse unknown fields; not every field is checked"
)]
struct ClaimMappings {
    username: PrefixedClaim,
    groups: Option<PrefixedClaim>,
    uid: Option<Value>,
    extra: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct PrefixedClaim {
    claim: Option<String>,
    prefix: Option<String>,
    expression: Option<String>,
}

/// The example configuration of [`EXAMPLE_MEMBER`], and the audience prefix and username
/// prefix it trusts the control plane with.
fn example_trust() -> (AuthenticationConfiguration, String, String) {
    let path = repo_root().join(FEDERATED_AUTHENTICATION);
    let text = std::fs::read_to_string(&path).unwrap();
    let config: AuthenticationConfiguration =
        serde_yaml::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    assert_eq!(
        config.jwt.len(),
        1,
        "one jwt authenticator: the control plane's"
    );
    let jwt = &config.jwt[0];
    let [audience] = &jwt.issuer.audiences[..] else {
        panic!("one audience: {:?}", jwt.issuer.audiences)
    };
    let audience_prefix = audience
        .strip_suffix(EXAMPLE_MEMBER)
        .unwrap_or_else(|| panic!("{audience} is not {EXAMPLE_MEMBER}'s"))
        .to_owned();
    let username_prefix = jwt
        .claim_mappings
        .username
        .prefix
        .clone()
        .unwrap_or_default();
    (config, audience_prefix, username_prefix)
}

/// The User a member makes of the collector's tokens under `username_prefix`.
fn collector_user(username_prefix: &str) -> String {
    let (namespace, name) = COLLECTOR_SA;
    format!("{username_prefix}system:serviceaccount:{namespace}:{name}")
}

/// The member-side files agree with each other and with the federation overlay: the member
/// trusts the control plane's issuer for the audience the collector asks for, maps the token's
/// subject to the User the RBAC binds, and that User may read what the collector reads and
/// nothing more.
#[test]
fn the_federated_member_files_fit_the_collector_and_each_other() -> anyhow::Result<()> {
    let (config, audience_prefix, username_prefix) = example_trust();
    assert_eq!(config.api_version, "apiserver.config.k8s.io/v1");
    assert_eq!(config.kind, "AuthenticationConfiguration");
    assert!(
        config.anonymous.is_none(),
        "the member's anonymous access is not ours to set"
    );
    let jwt = &config.jwt[0];
    let issuer = &jwt.issuer;
    assert!(issuer.url.starts_with("https://"), "{}", issuer.url);
    // Way (a): the control plane's own discovery document, over its own CA.
    let discovery = issuer.discovery_url.as_deref().unwrap_or_default();
    assert!(
        discovery.starts_with("https://")
            && discovery.ends_with("/.well-known/openid-configuration")
            && !discovery.starts_with(&issuer.url),
        "{discovery}: the control plane's apiserver, not the issuer URL"
    );
    let ca = issuer.certificate_authority.as_deref().unwrap_or_default();
    assert!(ca.contains("-----BEGIN CERTIFICATE-----"), "{ca}");

    let objects = kustomize_build(&kustomize_dir(FEDERATION_OVERLAY))?;
    let federation = collector_args(&objects, FEDERATION_OVERLAY).federation;
    assert_eq!(audience_prefix, federation.federated_audience_prefix);
    assert_eq!(
        jwt.claim_mappings.username,
        PrefixedClaim {
            claim: Some("sub".to_owned()),
            prefix: Some(username_prefix.clone()),
            expression: None,
        }
    );
    assert!(
        !username_prefix.is_empty() && !username_prefix.starts_with("system:"),
        "{username_prefix:?}: a control-plane ServiceAccount must not pass for a member's own"
    );
    assert!(
        jwt.claim_mappings.groups.is_none(),
        "the control plane's groups mean nothing on the member"
    );

    let member_rbac = load_documents(&repo_root().join(FEDERATED_MEMBER_RBAC))?;
    let kinds: Vec<_> = member_rbac.iter().map(|o| id(o).kind).collect();
    assert_eq!(kinds, ["ClusterRole", "ClusterRoleBinding"]);
    let role: ClusterRole = typed(&member_rbac[0])?;
    let binding: ClusterRoleBinding = typed(&member_rbac[1])?;
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        (
            "ClusterRole",
            role.metadata.name.as_deref().unwrap_or_default()
        )
    );
    assert_eq!(
        binding.subjects.unwrap_or_default(),
        [Subject {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "User".to_owned(),
            name: collector_user(&username_prefix),
            namespace: None,
        }],
        "the User the member makes of the collector's tokens, and no one else"
    );
    let rules = role.rules.unwrap_or_default();
    for rule in &rules {
        let wildcard = [&rule.api_groups, &rule.resources, &rule.resource_names]
            .into_iter()
            .flatten()
            .chain([&rule.verbs])
            .any(|values| values.iter().any(|v| v.contains('*')));
        assert!(!wildcard, "a wildcard in {rule:?}");
        let read_only = rule
            .verbs
            .iter()
            .all(|v| ["get", "list", "watch"].contains(&v.as_str()));
        assert!(read_only, "not read-only: {rule:?}");
    }
    let reads = |group: &str, resource: &str| {
        ["list", "watch"].iter().all(|verb| {
            rules.iter().any(|rule| {
                let has = |values: &Option<Vec<String>>, value: &str| {
                    values.iter().flatten().any(|v| v == value)
                };
                has(&rule.api_groups, group)
                    && has(&rule.resources, resource)
                    && rule.verbs.iter().any(|v| v == verb)
            })
        })
    };
    assert!(reads("", "nodes"), "the node summary");
    let mirrored = collector_args(&objects, FEDERATION_OVERLAY).mirror;
    for kind in &mirrored {
        let what = format!("{}/{}/{}", kind.group, kind.version, kind.resource);
        assert!(reads(&kind.group, &kind.resource), "{what} is mirrored");
    }
    Ok(())
}

/// The federation overlay on the control plane, the example's trust and RBAC on the member:
/// a member defined with no Secret at all is reached, probed and mirrored with tokens the
/// collector mints of its own ServiceAccount, whose only token grant is the overlay's Role.
#[tokio::test]
async fn a_federated_member_is_served_with_exactly_the_overlay_and_member_side_rbac()
-> anyhow::Result<()> {
    let (_, audience_prefix, username_prefix) = example_trust();
    let env = Config::default()
        .members(1)
        .members_trust_control_plane(audience_prefix.clone(), username_prefix.clone())
        .start()
        .await?;
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let plane = Karmada::install(cp).await?;
    let member_admin = member.admin_client()?;
    let member_rbac = load_documents(&repo_root().join(FEDERATED_MEMBER_RBAC))?;
    apply_rbac_for_real(&member_admin, &member_rbac).await?;
    let annotations = [
        (CREDENTIAL_ANNOTATION, FEDERATED),
        (CA_BUNDLE_ANNOTATION, member.ca_pem()),
    ];
    apply_object(
        &cp.admin_client()?,
        &serde_json::json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {
                "name": member.name(),
                "annotations": annotations.into_iter().collect::<BTreeMap<_, _>>(),
            },
            "spec": { "syncMode": "Push", "apiEndpoint": member.endpoint() },
        }),
    )
    .await?;
    let objects = kustomize_build(&kustomize_dir(FEDERATION_OVERLAY))?;
    let mut collector = start_as_the_service_account(cp, &objects).await?;

    // The member makes of the collector's tokens the User the example binds.
    let audience = format!("{audience_prefix}{}", member.name());
    let (namespace, name) = COLLECTOR_SA;
    let token = cp
        .mint_token_for(namespace, name, MIN_TOKEN_EXPIRY, &[audience])
        .await?;
    assert_eq!(
        member.authenticated_username(&token).await?,
        Some(collector_user(&username_prefix))
    );

    plane
        .wait_condition(member.name(), "Ready", "True/MemberReady", LIMIT)
        .await?;
    // Mirrored through the example's `list` and `watch`.
    let ns = member.create_namespace("federated").await?;
    Api::<Deployment>::namespaced(member_admin, &ns)
        .create(&PostParams::default(), &deployment(&ns, "web", 1))
        .await?;
    let path = format!("/api/v1/clusters/{}/apps/v1/deployments", member.name());
    eventually("the member's Deployment is mirrored", LIMIT, || async {
        match collector.get(&path).await {
            Ok((200, body)) if body.contains(&ns) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await?;
    collector.stop().await;
    Ok(())
}

/// The control-plane file lets a member's apiserver, which calls without credentials, read the
/// issuer's discovery document and keys, and nothing else.
#[tokio::test]
async fn the_issuer_discovery_binding_opens_the_issuers_documents_alone() -> anyhow::Result<()> {
    let env = Environment::with_members(0).await?;
    let cp = env.control_plane();
    let anonymous = client_for(cp.endpoint(), cp.ca_pem(), None)?;
    let get = |path: &str| {
        let (anonymous, request) = (anonymous.clone(), http::Request::get(path).body(Vec::new()));
        async move {
            anonymous
                .request_text(request?)
                .await
                .map_err(anyhow::Error::from)
        }
    };
    let issuer = ["/.well-known/openid-configuration", "/openid/v1/jwks"];
    for path in issuer {
        assert!(
            get(path).await.is_err(),
            "{path} is open before the binding"
        );
    }

    let objects = load_documents(&repo_root().join(ISSUER_DISCOVERY))?;
    assert_eq!(objects.len(), 1, "the binding alone");
    apply_rbac_for_real(&cp.admin_client()?, &objects).await?;
    eventually(
        "anonymous callers read the issuer's documents",
        LIMIT,
        || async {
            for path in issuer {
                get(path).await.map_err(|err| format!("{path}: {err:#}"))?;
            }
            Ok::<_, String>(())
        },
    )
    .await?;
    let discovery: Value = serde_json::from_str(&get(issuer[0]).await?)?;
    let jwks_uri = discovery["jwks_uri"].as_str().unwrap_or_default();
    assert!(jwks_uri.ends_with(issuer[1]), "{discovery}");
    let keys: Value = serde_json::from_str(&get(issuer[1]).await?)?;
    assert!(
        keys["keys"].as_array().is_some_and(|k| !k.is_empty()),
        "{keys}"
    );
    for path in [
        "/api/v1/namespaces",
        "/api/v1/namespaces/default/secrets",
        "/metrics",
    ] {
        assert!(get(path).await.is_err(), "anonymous callers may get {path}");
    }
    Ok(())
}
