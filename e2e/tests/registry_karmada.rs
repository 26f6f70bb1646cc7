//! The registry against a real control plane holding Karmada `Cluster`s and their Secrets,
//! and a real member apiserver the resulting clients talk to.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

mod registry_support;

use std::time::{Duration, Instant};

use cluster_registry::karmada::Cluster as KarmadaCluster;
use cluster_registry::{MemberState, RegistryBuilder, RegistryEvent, Source, SourceState};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use member_client::{FailureKind, SecretRef};
use registry_support::{
    Agents, expect_invalid, list_namespaces, member_client, next_event, next_event_of,
    next_upserted, whoami,
};
use serde_json::json;
use testkit::Environment;

/// Installs the committed Cluster CRD and waits until it is served.
async fn install_crd(client: &kube::Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/crds/cluster.karmada.io_clusters.yaml"
    ))
    .unwrap();
    let crd: CustomResourceDefinition = serde_yaml::from_str(&yaml).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let served = Api::<KarmadaCluster>::all(client.clone())
            .list_metadata(&Default::default())
            .await
            .is_ok();
        if served {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the Cluster CRD is not served after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn secret(name: &str, token: &[u8], ca: &str) -> Secret {
    let mut secret: Secret =
        serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap();
    secret.data = Some(
        [
            ("token".to_owned(), ByteString(token.to_vec())),
            ("caBundle".to_owned(), ByteString(ca.as_bytes().to_vec())),
        ]
        .into(),
    );
    secret
}

fn cluster(name: &str, mode: &str, endpoint: &str, secret_ns: &str) -> KarmadaCluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": { "name": name },
        "spec": {
            "syncMode": mode,
            "apiEndpoint": endpoint,
            "secretRef": { "namespace": secret_ns, "name": name },
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn karmada_cluster_follows_rotation_deletion_and_garbage() {
    let env = Environment::with_members(1).await.unwrap();
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client().unwrap();
    install_crd(&admin).await;
    let agents = Agents::create(member).await.unwrap();

    let ns = cp.create_namespace("karmada-cluster").await.unwrap();
    let secrets = Api::<Secret>::namespaced(admin.clone(), &ns);
    let clusters = Api::<KarmadaCluster>::all(admin.clone());
    let pp = PostParams::default();
    secrets
        .create(
            &pp,
            &secret("member1", agents.token_a.as_bytes(), member.ca_pem()),
        )
        .await
        .unwrap();
    clusters
        .create(&pp, &cluster("member1", "Push", member.endpoint(), &ns))
        .await
        .unwrap();

    let (registry, mut events, driver) = RegistryBuilder::new().karmada(admin.clone()).build();
    let driver = tokio::spawn(driver.run());

    // Upserted, and a working client that authenticates as agent-a.
    let upserted = next_upserted(&mut events).await.unwrap();
    let spec = &upserted.0;
    assert_eq!(spec.name, "member1");
    assert_eq!(spec.api_endpoint, member.endpoint());
    assert_eq!(spec.secret_ref, SecretRef::new(&ns, "member1"));
    assert_eq!(
        upserted.1.as_deref(),
        Some(member.ca_pem().as_bytes()),
        "the CA travels with the member"
    );
    let client = member_client(&registry, &upserted).unwrap();
    assert_eq!(list_namespaces(&client).await, Ok(()));
    assert_eq!(whoami(&client).await.unwrap(), agents.user("agent-a"));

    // Bad definitions are reported and leave member1 alone.
    clusters
        .create(&pp, &cluster("pulled", "Pull", member.endpoint(), &ns))
        .await
        .unwrap();
    clusters
        .create(
            &pp,
            &cluster("plain-http", "Push", "http://127.0.0.1:1", &ns),
        )
        .await
        .unwrap();
    let event = next_event_of(&mut events, "pulled").await.unwrap();
    expect_invalid(&event, "pulled", "PullMode").unwrap();
    let event = next_event_of(&mut events, "plain-http").await.unwrap();
    expect_invalid(&event, "plain-http", "EndpointInvalid").unwrap();
    assert_eq!(registry.state("member1"), Some(MemberState::Ready));

    // Rotate to agent-b: the same client's next request carries the new token.
    let mut rotated = secret("member1", agents.token_b.as_bytes(), member.ca_pem());
    rotated.metadata = secrets.get("member1").await.unwrap().metadata;
    secrets.replace("member1", &pp, &rotated).await.unwrap();
    assert_eq!(
        next_event_of(&mut events, "member1").await.unwrap(),
        RegistryEvent::CredentialsRotated {
            name: "member1".into(),
            secret: SecretRef::new(&ns, "member1"),
        }
    );
    assert_eq!(whoami(&client).await.unwrap(), agents.user("agent-b"));
    // ...and the old token is not needed any more.
    member
        .revoke(&agents.ns, "agent-a", &agents.token_a)
        .await
        .unwrap();
    assert_eq!(list_namespaces(&client).await, Ok(()));

    // Garbage: a token that is not UTF-8.
    let patch =
        |token: &[u8]| Patch::Merge(json!({ "data": { "token": ByteString(token.to_vec()) } }));
    secrets
        .patch(
            "member1",
            &PatchParams::default(),
            &patch(&[0xff, 0xfe, 0x00]),
        )
        .await
        .unwrap();
    let event = next_event_of(&mut events, "member1").await.unwrap();
    expect_invalid(&event, "member1", "SecretInvalid").unwrap();
    assert_eq!(
        list_namespaces(&client).await,
        Err(FailureKind::CredentialUnavailable)
    );

    // Fixed again: Upserted (the collector resumes the member).
    secrets
        .patch(
            "member1",
            &PatchParams::default(),
            &patch(agents.token_b.as_bytes()),
        )
        .await
        .unwrap();
    assert!(matches!(
        next_event_of(&mut events, "member1").await.unwrap(),
        RegistryEvent::Upserted { .. }
    ));
    assert_eq!(list_namespaces(&client).await, Ok(()));

    // The Secret deleted: SecretNotFound, and requests fail as CredentialUnavailable.
    secrets
        .delete("member1", &DeleteParams::default())
        .await
        .unwrap();
    let event = next_event_of(&mut events, "member1").await.unwrap();
    expect_invalid(&event, "member1", "SecretNotFound").unwrap();
    assert_eq!(
        list_namespaces(&client).await,
        Err(FailureKind::CredentialUnavailable)
    );

    // The Cluster deleted: Removed.
    clusters
        .delete("member1", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        next_event_of(&mut events, "member1").await.unwrap(),
        RegistryEvent::Removed("member1".into())
    );
    assert_eq!(registry.state("member1"), None);
    driver.abort();
}

#[tokio::test]
async fn a_new_ca_bundle_is_an_upsert_and_unrelated_changes_are_silent() {
    let env = Environment::with_members(1).await.unwrap();
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client().unwrap();
    install_crd(&admin).await;
    let agents = Agents::create(member).await.unwrap();
    let ns = cp.create_namespace("karmada-cluster").await.unwrap();
    let secrets = Api::<Secret>::namespaced(admin.clone(), &ns);
    let pp = PostParams::default();
    // The Secret of member1 references the *control plane's* CA: TLS must fail.
    secrets
        .create(
            &pp,
            &secret("member1", agents.token_a.as_bytes(), cp.ca_pem()),
        )
        .await
        .unwrap();
    Api::<KarmadaCluster>::all(admin.clone())
        .create(&pp, &cluster("member1", "Push", member.endpoint(), &ns))
        .await
        .unwrap();
    let (registry, mut events, driver) = RegistryBuilder::new().karmada(admin.clone()).build();
    let driver = tokio::spawn(driver.run());
    let upserted = next_upserted(&mut events).await.unwrap();
    let wrong_ca = member_client(&registry, &upserted).unwrap();
    assert_eq!(
        list_namespaces(&wrong_ca).await,
        Err(FailureKind::Unreachable)
    );
    let invalidations = registry.tokens().stats().invalidations;

    // An unrelated change (a label, another key) says nothing and invalidates nothing...
    secrets
        .patch(
            "member1",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": { "labels": { "team": "x" } },
                "stringData": { "note": "unrelated" },
            })),
        )
        .await
        .unwrap();
    // ...which the next event proves: it is the CA change that follows.
    secrets
        .patch(
            "member1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "stringData": { "caBundle": member.ca_pem() } })),
        )
        .await
        .unwrap();
    let upserted = next_upserted(&mut events).await.unwrap();
    assert_eq!(upserted.1.as_deref(), Some(member.ca_pem().as_bytes()));
    assert_eq!(registry.tokens().stats().invalidations, invalidations + 1);
    let right_ca = member_client(&registry, &upserted).unwrap();
    assert_eq!(whoami(&right_ca).await.unwrap(), agents.user("agent-a"));
    driver.abort();
}

#[tokio::test]
async fn secrets_are_watched_only_in_referenced_namespaces() {
    let env = Environment::with_members(1).await.unwrap();
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client().unwrap();
    install_crd(&admin).await;
    let agents = Agents::create(member).await.unwrap();
    let referenced = cp.create_namespace("karmada-cluster").await.unwrap();
    let other = cp.create_namespace("unrelated").await.unwrap();
    let pp = PostParams::default();
    for ns in [&referenced, &other] {
        Api::<Secret>::namespaced(admin.clone(), ns)
            .create(
                &pp,
                &secret("member1", agents.token_a.as_bytes(), member.ca_pem()),
            )
            .await
            .unwrap();
    }
    Api::<KarmadaCluster>::all(admin.clone())
        .create(
            &pp,
            &cluster("member1", "Push", member.endpoint(), &referenced),
        )
        .await
        .unwrap();
    let (registry, mut events, driver) = RegistryBuilder::new().karmada(admin.clone()).build();
    let driver = tokio::spawn(driver.run());
    assert!(matches!(
        next_event(&mut events).await.unwrap(),
        RegistryEvent::Upserted { .. }
    ));
    assert!(
        registry
            .secrets()
            .get(&SecretRef::new(&referenced, "member1"))
            .is_some()
    );
    assert!(
        registry
            .secrets()
            .get(&SecretRef::new(&other, "member1"))
            .is_none(),
        "a namespace no member references is not watched"
    );
    driver.abort();
}

#[tokio::test]
async fn watches_resume_after_a_control_plane_restart() {
    let mut env = Environment::with_members(1).await.unwrap();
    let member = env.cluster(1).clone();
    let cp = env.control_plane().clone();
    let admin = cp.admin_client().unwrap();
    install_crd(&admin).await;
    let agents = Agents::create(&member).await.unwrap();
    let ns = cp.create_namespace("karmada-cluster").await.unwrap();
    let secrets = Api::<Secret>::namespaced(admin.clone(), &ns);
    let pp = PostParams::default();
    secrets
        .create(
            &pp,
            &secret("member1", agents.token_a.as_bytes(), member.ca_pem()),
        )
        .await
        .unwrap();
    Api::<KarmadaCluster>::all(admin.clone())
        .create(&pp, &cluster("member1", "Push", member.endpoint(), &ns))
        .await
        .unwrap();
    let (registry, mut events, driver) = RegistryBuilder::new().karmada(admin.clone()).build();
    let driver = tokio::spawn(driver.run());
    let upserted = next_upserted(&mut events).await.unwrap();
    let client = member_client(&registry, &upserted).unwrap();

    // Every watch of the registry ends with the control plane; it must reconnect by itself.
    env.restart(testkit::CONTROL_PLANE, Default::default())
        .await
        .unwrap();
    assert_eq!(
        registry.state("member1"),
        Some(MemberState::Ready),
        "an outage of the control plane changes no member"
    );
    let mut rotated = secret("member1", agents.token_b.as_bytes(), member.ca_pem());
    rotated.metadata = secrets.get("member1").await.unwrap().metadata;
    secrets.replace("member1", &pp, &rotated).await.unwrap();
    assert!(matches!(
        next_event_of(&mut events, "member1").await.unwrap(),
        RegistryEvent::CredentialsRotated { .. }
    ));
    assert_eq!(whoami(&client).await.unwrap(), agents.user("agent-b"));
    driver.abort();
}

/// Server-side applies `object` through `api` (the admin's).
async fn apply<K>(api: Api<K>, object: serde_json::Value)
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    let name = object.meta().name.clone().unwrap();
    api.patch(
        &name,
        &PatchParams::apply("tether-e2e"),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_namespace_the_registry_may_not_read_is_secret_forbidden_until_rbac_allows_it() {
    use k8s_openapi::api::{
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    };

    let env = Environment::with_members(1).await.unwrap();
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client().unwrap();
    install_crd(&admin).await;
    let agents = Agents::create(member).await.unwrap();
    let ns = cp.create_namespace("karmada-cluster").await.unwrap();
    let pp = PostParams::default();
    Api::<Secret>::namespaced(admin.clone(), &ns)
        .create(
            &pp,
            &secret("member1", agents.token_a.as_bytes(), member.ca_pem()),
        )
        .await
        .unwrap();
    Api::<KarmadaCluster>::all(admin.clone())
        .create(&pp, &cluster("member1", "Push", member.endpoint(), &ns))
        .await
        .unwrap();

    // The registry's identity may read Clusters, and nothing else.
    let home = cp.create_namespace("tether-system").await.unwrap();
    let subject = json!([{ "kind": "ServiceAccount", "name": "registry", "namespace": home }]);
    apply(
        Api::<ServiceAccount>::namespaced(admin.clone(), &home),
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "registry" } }),
    )
    .await;
    apply(Api::<ClusterRole>::all(admin.clone()), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": "e2e-cluster-reader" },
        "rules": [{ "apiGroups": ["cluster.karmada.io"], "resources": ["clusters"], "verbs": ["get", "list", "watch"] }],
    }))
    .await;
    apply(Api::<ClusterRoleBinding>::all(admin.clone()), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": "e2e-cluster-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-cluster-reader" },
        "subjects": subject,
    }))
    .await;
    let token = cp
        .mint_token(&home, "registry", Duration::from_secs(3600))
        .await
        .unwrap();
    let limited = cp.client_with_token(&token).unwrap();

    let (registry, mut events, driver) = RegistryBuilder::new().karmada(limited).build();
    let driver = tokio::spawn(driver.run());
    let event = next_event_of(&mut events, "member1").await.unwrap();
    expect_invalid(&event, "member1", "SecretForbidden").unwrap();
    let RegistryEvent::Invalid { reason, .. } = event else {
        unreachable!("expect_invalid checked it");
    };
    let detail = reason.detail().unwrap_or_default();
    assert!(
        detail.contains("secrets") && detail.contains(&ns),
        "the apiserver's refusal is quoted: {detail}"
    );

    // Granting read access to that namespace is enough: the watch's retry lists it.
    let granted = Instant::now();
    apply(Api::<Role>::namespaced(admin.clone(), &ns), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": { "name": "tether-secrets" },
        "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"] }],
    }))
    .await;
    apply(Api::<RoleBinding>::namespaced(admin.clone(), &ns), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": "tether-secrets" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tether-secrets" },
        "subjects": subject,
    }))
    .await;
    // The registry's watch backoff tops out at 10 s between retries; allow several.
    let event = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let event = events.recv().await.unwrap();
            if event.member() == "member1" {
                return event;
            }
        }
    })
    .await
    .unwrap();
    assert!(
        matches!(event, RegistryEvent::Upserted { .. }),
        "expected Upserted, got {event:?}"
    );
    eprintln!("member1 upserted {:?} after the grant", granted.elapsed());
    assert_eq!(registry.state("member1"), Some(MemberState::Ready));
    assert_eq!(
        registry.sources().now().get(&Source::KarmadaClusters),
        Some(&SourceState::Listed),
        "the Clusters were readable throughout"
    );
    driver.abort();
}
