//! The registry's watches on a real control plane holding Karmada `Cluster`s: which Secrets
//! they read, how they come back after the control plane restarts, and what a namespace the
//! registry may not read does to its members.

mod registry_support;

use std::time::{Duration, Instant};

use cluster_registry::{MemberState, RegistryEvent, Source, SourceState};
use e2e::{limits::HOUR, manifest_apply::apply_object};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use member_client::CredentialKey;
use registry_support as support;
use serde_json::json;
use support::karmada::{KarmadaSetup, secret};

#[tokio::test]
async fn secrets_are_watched_only_in_referenced_namespaces() -> anyhow::Result<()> {
    let setup = KarmadaSetup::start().await?;
    let member = setup.member();
    let other = setup.control_plane().create_namespace("unrelated").await?;
    let stray = secret("member1", setup.agents.token_a.as_bytes(), member.ca_pem());
    Api::<Secret>::namespaced(setup.admin.clone(), &other)
        .create(&PostParams::default(), &stray)
        .await?;
    setup.define_member1(member.ca_pem()).await?;
    let (registry, mut events, driver) = setup.registry(setup.admin.clone()).build();
    let driver = tokio::spawn(driver.run());
    assert!(matches!(
        support::next_event(&mut events).await?,
        RegistryEvent::Upserted { .. }
    ));
    let stored = |ns: &str| registry.secrets().get(&CredentialKey::new(ns, "member1"));
    assert!(stored(&setup.ns).is_some());
    assert!(
        stored(&other).is_none(),
        "a namespace no member references is not watched"
    );
    driver.abort();
    Ok(())
}

#[tokio::test]
async fn only_referenced_secrets_are_kept_and_a_later_reference_brings_its_secret()
-> anyhow::Result<()> {
    let setup = KarmadaSetup::start().await?;
    let member = setup.member();
    let pp = PostParams::default();
    // member2's Secret exists before any Cluster names it.
    setup.write_agent_b_secret("member2").await?;
    setup.define_member1(member.ca_pem()).await?;
    let (registry, mut events, driver) = setup.registry(setup.admin.clone()).build();
    let driver = tokio::spawn(driver.run());
    let first = support::next_event_of(&mut events, "member1").await?;
    assert!(matches!(first, RegistryEvent::Upserted { .. }), "{first:?}");
    let stored = |name: &str| registry.secrets().get(&CredentialKey::new(&setup.ns, name));
    assert!(stored("member1").is_some());
    assert!(stored("member2").is_none(), "no Cluster names it: not kept");

    // A Cluster that names it now: the namespace is listed again and member2 is Ready.
    let member2 = support::karmada::cluster("member2", "Push", member.endpoint(), &setup.ns);
    setup.clusters().create(&pp, &member2).await?;
    let second = support::next_event_of(&mut events, "member2").await?;
    let upserted = matches!(second, RegistryEvent::Upserted { .. });
    assert!(upserted, "{second:?}");
    assert!(stored("member2").is_some());
    assert!(
        stored("member1").is_some(),
        "the relist keeps what was kept"
    );
    driver.abort();
    Ok(())
}

#[tokio::test]
async fn watches_resume_after_a_control_plane_restart() -> anyhow::Result<()> {
    let mut setup = KarmadaSetup::start().await?;
    let member = setup.member().clone();
    setup.define_member1(member.ca_pem()).await?;
    let (registry, mut events, driver) = setup.registry(setup.admin.clone()).build();
    let driver = tokio::spawn(driver.run());
    let client = support::member_client(&registry, &support::next_upserted(&mut events).await?)?;

    // Every watch of the registry ends with the control plane; it must reconnect by itself.
    setup
        .env
        .restart(testkit::CONTROL_PLANE, Default::default())
        .await?;
    assert_eq!(
        registry.state("member1"),
        Some(MemberState::Ready),
        "an outage of the control plane changes no member"
    );
    setup.write_agent_b_secret("member1").await?;
    assert!(matches!(
        support::next_event_of(&mut events, "member1").await?,
        RegistryEvent::CredentialsRotated { .. }
    ));
    let who = support::whoami(&client).await?;
    assert_eq!(who, setup.agents.user("agent-b"));
    driver.abort();
    Ok(())
}

#[tokio::test]
async fn a_namespace_the_registry_may_not_read_is_secret_forbidden_until_rbac_allows_it()
-> anyhow::Result<()> {
    let setup = KarmadaSetup::start().await?;
    let (cp, admin, ns) = (setup.control_plane(), &setup.admin, &setup.ns);
    setup.define_member1(setup.member().ca_pem()).await?;

    // The registry's identity may read Clusters, and nothing else.
    let home = cp.create_namespace("tether-system").await?;
    let subject = json!([{ "kind": "ServiceAccount", "name": "registry", "namespace": home }]);
    cp.create_unbound_service_account(&home, "registry").await?;
    apply_object(admin, &json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": "e2e-cluster-reader" },
        "rules": [{ "apiGroups": ["cluster.karmada.io"], "resources": ["clusters"], "verbs": ["get", "list", "watch"] }],
    })).await?;
    apply_object(admin, &json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": "e2e-cluster-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-cluster-reader" },
        "subjects": subject,
    })).await?;
    let token = cp.mint_token(&home, "registry", HOUR).await?;
    let limited = cp.client_with_token(&token)?;

    let (registry, mut events, driver) = setup.registry(limited).build();
    let driver = tokio::spawn(driver.run());
    let event = support::next_event_of(&mut events, "member1").await?;
    support::expect_invalid(&event, "member1", "SecretForbidden")?;
    let RegistryEvent::Invalid { reason, .. } = event else {
        unreachable!("expect_invalid checked it");
    };
    let detail = reason.detail().unwrap_or_default();
    assert!(
        detail.contains("secrets") && detail.contains(ns.as_str()),
        "the apiserver's refusal is quoted: {detail}"
    );

    // Granting read access to that namespace is enough: the watch's retry lists it.
    let granted = Instant::now();
    apply_object(admin, &json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": { "name": "tether-secrets", "namespace": ns },
        "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"] }],
    })).await?;
    apply_object(admin, &json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": "tether-secrets", "namespace": ns },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tether-secrets" },
        "subjects": subject,
    })).await?;
    // The registry's watch backoff tops out at 10 s between retries; allow several.
    let event = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let event = events.recv().await.unwrap();
            if event.member() == "member1" {
                return event;
            }
        }
    })
    .await?;
    let upserted = matches!(event, RegistryEvent::Upserted { .. });
    assert!(upserted, "expected Upserted, got {event:?}");
    eprintln!("member1 upserted {:?} after the grant", granted.elapsed());
    assert_eq!(registry.state("member1"), Some(MemberState::Ready));
    assert_eq!(
        registry.sources().now().get(&Source::KarmadaClusters),
        Some(&SourceState::Listed),
        "the Clusters were readable throughout"
    );
    driver.abort();
    Ok(())
}
