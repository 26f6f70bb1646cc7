//! The registry against a real control plane holding Karmada `Cluster`s and their Secrets,
//! and a real member apiserver the resulting clients talk to: a member's credential over its
//! lifetime (rotation, garbage, deletion, a new CA).

mod registry_support;

use cluster_registry::{MemberState, RegistryEvent};
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use member_client::{CredentialKey, FailureKind};
use registry_support::karmada::{KarmadaSetup, cluster, secret};
use registry_support::{
    expect_invalid, expect_usable_again, list_namespaces, member_client, next_event_of,
    next_upserted, whoami,
};
use serde_json::json;

#[tokio::test]
async fn karmada_cluster_follows_rotation_deletion_and_garbage() -> anyhow::Result<()> {
    let setup = KarmadaSetup::start().await?;
    let (member, agents, ns) = (setup.member(), &setup.agents, &setup.ns);
    let (secrets, clusters) = (setup.secrets(), setup.clusters());
    let pp = PostParams::default();
    setup.define_member1(member.ca_pem()).await?;

    let (registry, mut events, driver) = setup.registry(setup.admin.clone()).build();
    let driver = tokio::spawn(driver.run());

    // Upserted, and a working client that authenticates as agent-a.
    let upserted = next_upserted(&mut events).await?;
    let spec = &upserted.0;
    assert_eq!(spec.name, "member1");
    assert_eq!(spec.endpoint.url, member.endpoint());
    assert_eq!(spec.secret_ref, CredentialKey::new(ns, "member1"));
    assert_eq!(
        upserted.1.as_deref(),
        Some(member.ca_pem().as_bytes()),
        "the CA travels with the member"
    );
    let client = member_client(&registry, &upserted)?;
    assert_eq!(list_namespaces(&client).await, Ok(()));
    assert_eq!(whoami(&client).await?, agents.user("agent-a"));

    // Bad definitions are reported and leave member1 alone. Never dialled: the registry
    // refuses these before any client exists.
    for (name, endpoint, secret_ns) in [
        ("pulled", member.endpoint(), ns.as_str()),
        ("plain-http", "http://127.0.0.1:1", ns),
        ("metadata", "https://169.254.169.254", ns),
        ("userinfo", "https://admin:hunter2@127.0.0.1:1", ns),
        ("elsewhere", member.endpoint(), "kube-system"),
    ] {
        let mode = if name == "pulled" { "Pull" } else { "Push" };
        let definition = cluster(name, mode, endpoint, secret_ns);
        clusters.create(&pp, &definition).await?;
    }
    for (name, reason) in [
        ("pulled", "PullMode"),
        ("plain-http", "EndpointForbidden"),
        ("metadata", "EndpointForbidden"),
        ("userinfo", "EndpointForbidden"),
        ("elsewhere", "SecretForbidden"),
    ] {
        let event = next_event_of(&mut events, name).await?;
        expect_invalid(&event, name, reason)?;
        assert!(!format!("{event:?}").contains("hunter2"), "{event:?}");
    }
    assert!(
        registry
            .secrets()
            .get(&CredentialKey::new("kube-system", "elsewhere"))
            .is_none(),
        "a namespace outside --secret-namespace is never read"
    );
    assert_eq!(registry.state("member1"), Some(MemberState::Ready));

    // Rotate to agent-b: the same client's next request carries the new token.
    let mut rotated = secret("member1", agents.token_b.as_bytes(), member.ca_pem());
    rotated.metadata = secrets.get("member1").await?.metadata;
    secrets.replace("member1", &pp, &rotated).await?;
    assert_eq!(
        next_event_of(&mut events, "member1").await?,
        RegistryEvent::CredentialsRotated {
            name: "member1".into(),
            secret: CredentialKey::new(ns, "member1"),
        }
    );
    assert_eq!(whoami(&client).await?, agents.user("agent-b"));
    // ...and the old token is not needed any more.
    member
        .revoke(&agents.ns, "agent-a", &agents.token_a)
        .await?;
    assert_eq!(list_namespaces(&client).await, Ok(()));

    // Garbage: a token that is not UTF-8.
    let unavailable = Err(FailureKind::CredentialUnavailable);
    let patch_token = |token: &[u8]| {
        let patch = Patch::Merge(json!({ "data": { "token": ByteString(token.to_vec()) } }));
        let secrets = secrets.clone();
        async move {
            secrets
                .patch("member1", &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
    };
    patch_token(&[0xff, 0xfe, 0x00]).await;
    let event = next_event_of(&mut events, "member1").await?;
    expect_invalid(&event, "member1", "SecretInvalid")?;
    assert_eq!(list_namespaces(&client).await, unavailable);

    // Fixed again: Upserted (the collector resumes the member).
    patch_token(agents.token_b.as_bytes()).await;
    let event = next_event_of(&mut events, "member1").await?;
    expect_usable_again(event, &client).await?;

    // The Secret deleted: SecretNotFound, and requests fail as CredentialUnavailable.
    secrets.delete("member1", &DeleteParams::default()).await?;
    let event = next_event_of(&mut events, "member1").await?;
    expect_invalid(&event, "member1", "SecretNotFound")?;
    assert_eq!(list_namespaces(&client).await, unavailable);

    // The Cluster deleted: Removed.
    clusters.delete("member1", &DeleteParams::default()).await?;
    assert_eq!(
        next_event_of(&mut events, "member1").await?,
        RegistryEvent::Removed("member1".into())
    );
    assert_eq!(registry.state("member1"), None);
    driver.abort();
    Ok(())
}

#[tokio::test]
async fn a_new_ca_bundle_is_an_upsert_and_unrelated_changes_are_silent() -> anyhow::Result<()> {
    let setup = KarmadaSetup::start().await?;
    let (member, agents) = (setup.member(), &setup.agents);
    // The Secret of member1 references the *control plane's* CA: TLS must fail.
    setup.define_member1(setup.control_plane().ca_pem()).await?;
    let (registry, mut events, driver) = setup.registry(setup.admin.clone()).build();
    let driver = tokio::spawn(driver.run());
    let upserted = next_upserted(&mut events).await?;
    let wrong_ca = member_client(&registry, &upserted)?;
    let listed = list_namespaces(&wrong_ca).await;
    assert_eq!(listed, Err(FailureKind::Unreachable));
    let invalidations = registry.tokens().stats().invalidations;

    // An unrelated change (a label, another key) says nothing and invalidates nothing...
    let merge = |patch: serde_json::Value| {
        let secrets = setup.secrets();
        async move {
            secrets
                .patch("member1", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    merge(json!({
        "metadata": { "labels": { "team": "x" } },
        "stringData": { "note": "unrelated" },
    }))
    .await;
    // ...which the next event proves: it is the CA change that follows.
    merge(json!({ "stringData": { "caBundle": member.ca_pem() } })).await;
    let upserted = next_upserted(&mut events).await?;
    assert_eq!(upserted.1.as_deref(), Some(member.ca_pem().as_bytes()));
    assert_eq!(registry.tokens().stats().invalidations, invalidations + 1);
    let right_ca = member_client(&registry, &upserted)?;
    assert_eq!(whoami(&right_ca).await?, agents.user("agent-a"));
    driver.abort();
    Ok(())
}
