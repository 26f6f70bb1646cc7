//! The collector run as the kustomize base's ServiceAccount with the base's RBAC alone and the
//! Deployment's own arguments, against a real control plane: the access reviews of
//! `deploy_kustomize.rs` check the requests we listed, this finds any we did not think of.

mod deploy_support;

use std::time::Duration;

use cluster_registry::{clusterprofile::CONTROL_PLANE_HEALTHY, karmada::Cluster};
use deploy_support::{EVENTS_NAMESPACE, id, workload::collector_container};
use e2e::{
    clusterprofiles::{Inventory, has_condition},
    collector_run::{RunningCollector, control_plane_args},
    limits::HOUR,
    manifest::{kustomize_build, kustomize_dir, of_kind, typed},
    manifest_apply::{apply_object, apply_rbac_for_real},
    rbac_grants::COLLECTOR_SA,
    scenario::events_about,
};
use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use kube::{Api, api::DeleteParams};
use serde_json::Value;
use testkit::{Environment, Karmada, PushMember, eventually};

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
    let admin = cp.admin_client()?;
    // What a user has before `kubectl apply -k`: the CRD (Karmada's or deploy/crds) and
    // Karmada's Secret namespace; then a member registered the Karmada way.
    let plane = Karmada::install(cp).await?;
    let (_, member_token) = member.create_agent("agents", "agent-a", HOUR).await?;
    plane
        .register(&PushMember::of(member, &member_token))
        .await?;

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
    Ok((plane, collector))
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
