//! `--publish-clusterprofiles`: the collector keeps a SIG-Multicluster ClusterProfile per
//! member current on a real control plane, deletes it with the member, writes nothing while
//! another replica holds the Lease, and collects the garbage once it leads.

use std::time::Duration;

use base64::Engine as _;
use cluster_registry::{
    clusterprofile::{
        CLUSTER_MANAGER_LABEL, CONTROL_PLANE_HEALTHY, ClusterProfile, EXEC_EXTENSION,
    },
    karmada::Cluster,
};
use e2e::{
    clusterprofiles::{Inventory, condition, has_condition},
    collector_run::candidate,
    limits::PROBE,
    scenario::Scenario,
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::json;
use testkit::karmada::SECRET_NAMESPACE;

/// Start-up: the registry lists, the member is probed, the CRD (installed after the collector
/// started) is served and a write retried.
const START: Duration = Duration::from_secs(30);
const CONVERGE: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(4);
/// The lease of the fake holder: long next to its 1 s renewals.
const HELD: Duration = Duration::from_secs(8);
const FLEET: &str = "fleet";

/// A scenario whose collector runs with `flags`, and the inventory [`FLEET`] installed after
/// it started.
async fn start_with_inventory(flags: &[&str]) -> (Scenario, Inventory) {
    let s = Scenario::start_with(1, PROBE, flags).await.unwrap();
    let inventory = Inventory::install(s.karmada.client(), FLEET).await.unwrap();
    (s, inventory)
}

fn healthy(profile: Option<&ClusterProfile>) -> bool {
    has_condition(profile, CONTROL_PLANE_HEALTHY, "True", "MemberReady")
        && has_condition(profile, "CredentialsValid", "True", "CredentialsAccepted")
        && profile.is_some_and(|p| p.status.as_ref().is_some_and(|s| s.version.is_some()))
}

fn transition_time(profile: &ClusterProfile, type_: &str) -> Timestamp {
    let conditions = &profile.status.as_ref().unwrap().conditions;
    find_condition(conditions, type_)
        .unwrap()
        .last_transition_time
        .0
}

fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The manager a profile's label names.
fn manager_label(profile: &ClusterProfile) -> Option<&str> {
    let labels = profile.metadata.labels.as_ref()?;
    labels.get(CLUSTER_MANAGER_LABEL).map(String::as_str)
}

#[tokio::test]
async fn a_member_is_published_follows_its_health_and_goes_with_it() -> anyhow::Result<()> {
    let (s, inventory) = start_with_inventory(&["--publish-clusterprofiles", FLEET]).await;
    let member = s.member(1).clone();
    let version = member
        .admin_client()?
        .apiserver_version()
        .await?
        .git_version;

    let served = tokio::time::Instant::now();
    let profile = inventory
        .wait_for("member1", "healthy", START, healthy)
        .await?
        .unwrap();
    eprintln!("published {:?} after the CRD was served", served.elapsed());
    assert_eq!(manager_label(&profile), Some("tether"));
    assert_eq!(profile.spec.cluster_manager.name, "tether");
    assert_eq!(profile.spec.display_name.as_deref(), Some("member1"));
    let status = profile.status.clone().unwrap();
    assert_eq!(
        status.version.as_ref().unwrap().kubernetes.as_deref(),
        Some(version.as_str())
    );
    assert_eq!(status.access_providers.len(), 1);
    let provider = &status.access_providers[0];
    assert_eq!(provider.name, "tether");
    assert_eq!(provider.cluster.server, member.endpoint());
    let ca = provider.cluster.certificate_authority_data.as_deref();
    let ca = base64::engine::general_purpose::STANDARD.decode(ca.unwrap())?;
    assert_eq!(String::from_utf8(ca)?, member.ca_pem());
    assert_eq!(
        provider.cluster.extension(EXEC_EXTENSION),
        Some(&json!({
            "member": "member1",
            "secretRef": { "namespace": SECRET_NAMESPACE, "name": "member1" },
        }))
    );
    let written = serde_json::to_string(&profile)?;
    assert!(
        !written.contains(&s.registered_tokens[0]),
        "the profile never holds the token"
    );

    // Probes go on; a transition time moves only when the status does.
    let since = transition_time(&profile, CONTROL_PLANE_HEALTHY);
    tokio::time::sleep(3 * PROBE).await;
    let again = inventory.get("member1").await?.unwrap();
    assert_eq!(transition_time(&again, CONTROL_PLANE_HEALTHY), since);

    // A token the member rejects: ControlPlaneHealthy follows Ready to False.
    s.karmada
        .write_secret("member1", "not-a-token", member.ca_pem())
        .await?;
    let rejected = tokio::time::Instant::now();
    let broken = inventory
        .wait_for("member1", "Unauthorized", CONVERGE, |p| {
            has_condition(p, CONTROL_PLANE_HEALTHY, "False", "Unauthorized")
                && has_condition(p, "CredentialsValid", "False", "Unauthorized")
        })
        .await?
        .unwrap();
    eprintln!(
        "ControlPlaneHealthy=False {:?} after the token was replaced",
        rejected.elapsed()
    );
    assert!(transition_time(&broken, CONTROL_PLANE_HEALTHY) > since);
    assert_eq!(
        broken.status.as_ref().unwrap().access_providers.len(),
        1,
        "the member is still where it was"
    );
    // The Karmada Cluster says the same (its own writer may be a moment behind): both follow
    // one status.
    s.wait("member1", "Ready=False/Unauthorized", CONVERGE)
        .await?;
    assert_eq!(
        condition(&broken, CONTROL_PLANE_HEALTHY),
        Some(("False".to_owned(), "Unauthorized".to_owned()))
    );

    // The Cluster is deleted: so is its profile.
    Api::<Cluster>::all(s.karmada.client().clone())
        .delete("member1", &DeleteParams::default())
        .await?;
    let deleted = tokio::time::Instant::now();
    inventory
        .wait_for("member1", "deleted", CONVERGE, |p| p.is_none())
        .await?;
    eprintln!("profile deleted {:?} after its Cluster", deleted.elapsed());
    Ok(())
}

#[tokio::test]
async fn a_follower_writes_nothing_and_a_new_leader_publishes_and_collects_garbage()
-> anyhow::Result<()> {
    // The scenario's own collector neither writes nor publishes.
    let (s, inventory) = start_with_inventory(&["--write-status=false"]).await;
    // Left by an earlier run for a member that is gone, and another manager's profiles, one
    // of them under member1's name.
    for (name, manager) in [
        ("ghost", "tether"),
        ("member1", "open-cluster-management"),
        ("elsewhere", "open-cluster-management"),
    ] {
        inventory.create_as(name, manager).await?;
    }
    // A Cluster Tether cannot use (plain http to loopback): it is published all the same.
    s.add_broken_member().await?;
    let holder = s.hold_the_lease(HELD).await?;

    let lease = LEASE.as_secs().to_string();
    let publish = ["--publish-clusterprofiles", FLEET, "--write-status=false"];
    let candidate = candidate("replica-b", &lease);
    let flags = [&publish[..], &candidate].concat();
    let mut b = s.start_collector(&flags).await?;
    s.wait_sees_both(&b, START).await?;
    // Every member listed and probed, and more than a retry period: a follower writes nothing.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(b.metric("tether_leader", "").await?, 0.0);
    let broken = inventory.get("broken").await?;
    assert!(broken.is_none(), "a follower published");
    let ghost = inventory.get("ghost").await?;
    assert!(ghost.is_some(), "a follower collected");

    // The holder dies: b leads once the Lease expires.
    holder.abort();
    let released = tokio::time::Instant::now();
    let broken = inventory
        .wait_for("broken", "published", HELD + LEASE + CONVERGE, |p| {
            has_condition(p, CONTROL_PLANE_HEALTHY, "False", "EndpointForbidden")
        })
        .await?
        .unwrap();
    eprintln!(
        "replica-b published {:?} after the holder stopped renewing (lease {HELD:?})",
        released.elapsed()
    );
    let status = broken.status.unwrap();
    assert!(
        status.access_providers.is_empty(),
        "no way in to an unusable definition"
    );
    let credentials = find_condition(&status.conditions, "CredentialsValid");
    assert_eq!(credentials.map(|c| c.status.as_str()), Some("Unknown"));
    inventory
        .wait_for("ghost", "collected", CONVERGE, |p| p.is_none())
        .await?;
    // Another manager's profiles stay as they were, even under a member's name.
    for name in ["member1", "elsewhere"] {
        let kept = inventory.get(name).await?.unwrap();
        assert_eq!(
            kept.spec.cluster_manager.name, "open-cluster-management",
            "{name}"
        );
        assert!(kept.status.is_none(), "{name} was written");
    }
    b.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_profile_another_manager_took_over_is_not_written_again() -> anyhow::Result<()> {
    let (s, inventory) = start_with_inventory(&["--publish-clusterprofiles", FLEET]).await;
    inventory
        .wait_for("member1", "healthy", START, healthy)
        .await?;
    // Another manager takes the profile over after Tether wrote it.
    let takeover = json!({
        "metadata": { "labels": { CLUSTER_MANAGER_LABEL: "open-cluster-management" } },
        "spec": { "clusterManager": { "name": "open-cluster-management" } },
    });
    inventory
        .api()
        .patch("member1", &PatchParams::default(), &Patch::Merge(takeover))
        .await?;
    // The member's health changes: Tether has a new status to write.
    s.karmada
        .write_secret("member1", "not-a-token", s.member(1).ca_pem())
        .await?;
    s.wait("member1", "Ready=False/Unauthorized", CONVERGE)
        .await?;
    // More than a retry period after the status changed.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let kept = inventory.get("member1").await?.unwrap();
    assert_eq!(
        manager_label(&kept),
        Some("open-cluster-management"),
        "the label was written over"
    );
    assert_eq!(kept.spec.cluster_manager.name, "open-cluster-management");
    assert!(
        !has_condition(Some(&kept), CONTROL_PLANE_HEALTHY, "False", "Unauthorized"),
        "the status was written over: {:?}",
        kept.status
    );
    Ok(())
}
