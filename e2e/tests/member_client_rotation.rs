//! member-client against a real kube-apiserver: a long-lived watch survives token rotation,
//! revocation of the old token and an apiserver restart, without rebuilding the client. Beside
//! it, a client that baked the old token in at start (Karmada before PR #7663) goes blind.

use std::{sync::Arc, time::Duration};

use e2e::{informer::Informer, limits::HOUR};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ObjectList, PostParams},
};
use member_client::{
    CredentialCacheConfig, CredentialKey, CredentialState, FailureKind, MemberClientConfig,
    test_util::{FakeSource, TestMember},
};
use rstest::rstest;
use testkit::{Cluster, Environment, RestartOptions, status_code};

/// How long a rotated member may take to show a change made after the rotation.
const CONVERGE: Duration = Duration::from_secs(10);

/// A client of `cluster`'s member, its Secret (as the registry's in-memory store would hold it)
/// holding `token`.
fn member_client(cluster: &Cluster, token: &str) -> (Arc<FakeSource>, TestMember) {
    let secret = Arc::new(FakeSource::token(token));
    let key = CredentialKey::new("karmada-cluster", cluster.name());
    let config = MemberClientConfig::new(cluster.name(), cluster.endpoint(), key)
        .with_ca_bundle(cluster.ca_pem().as_bytes().to_vec());
    let member = TestMember::build(&secret, config, CredentialCacheConfig::default());
    (secret, member)
}

/// The ConfigMaps of `ns`, listed with the member's client.
async fn list_configmaps(member: &TestMember, ns: &str) -> kube::Result<ObjectList<ConfigMap>> {
    Api::namespaced(member.client.clone(), ns)
        .list(&Default::default())
        .await
}

async fn create_configmap(cluster: &Cluster, ns: &str, name: &str) -> anyhow::Result<()> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    Api::<ConfigMap>::namespaced(cluster.admin_client()?, ns)
        .create(&PostParams::default(), &cm)
        .await?;
    Ok(())
}

/// Rotates member1 from agent-a's token to agent-b's, revokes agent-a, restarts the apiserver so
/// that every watch must reconnect, then checks who still sees a change made afterwards.
#[rstest]
#[case::announced_by_the_secret_watch(true)]
#[case::the_cache_missed_through_401_refresh(false)]
#[tokio::test]
async fn watch_survives_rotation(#[case] tell_the_cache: bool) -> anyhow::Result<()> {
    let mut env = Environment::with_members(1).await?;
    let cluster = env.members()[0].clone();
    let ns = cluster.create_namespace("rotation").await?;
    for sa in ["agent-a", "agent-b"] {
        cluster.create_service_account(&ns, sa).await?;
    }
    let token_a = cluster.mint_token(&ns, "agent-a", HOUR).await?;
    let token_b = cluster.mint_token(&ns, "agent-b", HOUR).await?;

    let (secret, member) = member_client(&cluster, &token_a);
    let baked = cluster.client_with_token(&token_a)?;
    let ours = Informer::start(Api::<ConfigMap>::namespaced(member.client.clone(), &ns));
    let theirs = Informer::start(Api::<ConfigMap>::namespaced(baked.clone(), &ns));
    create_configmap(&cluster, &ns, "before").await?;
    assert!(ours.wait_for("before", CONVERGE).await);
    assert!(theirs.wait_for("before", CONVERGE).await);
    assert_eq!(member.health.current(), CredentialState::Valid);

    // The Secret now holds agent-b's token; the old one is revoked.
    secret.set_token(&token_b);
    if tell_the_cache {
        member.tokens.invalidate(&member.key).await;
    }
    cluster.revoke(&ns, "agent-a", &token_a).await?;
    env.restart(1, RestartOptions::default()).await?;
    create_configmap(&cluster, &ns, "after").await?;

    assert!(
        ours.wait_for("after", CONVERGE).await,
        "the member client's watch must reconnect with the new token"
    );
    assert_eq!(member.health.current(), CredentialState::Valid);
    if !tell_the_cache {
        let retries = member.health.stats().retries;
        assert!(retries >= 1, "the stale token was refreshed on a 401");
    }

    // The baked-in client: given as long again, it never sees the change, and says 401.
    assert!(
        !theirs.wait_for("after", CONVERGE).await,
        "a client with the token baked in cannot follow the rotation"
    );
    let err = Api::<ConfigMap>::namespaced(baked, &ns)
        .get("after")
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), Some(401), "{err}");
    let err = Api::<ConfigMap>::namespaced(member.client.clone(), &ns)
        .get("missing")
        .await
        .unwrap_err();
    let kind = FailureKind::of(&err);
    assert_eq!(kind, FailureKind::NotFound, "a 404 is still a 404: {err}");
    Ok(())
}

#[tokio::test]
async fn a_revoked_credential_still_in_the_secret_is_reported_as_rejected() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let cluster = env.members()[0].clone();
    let ns = cluster.create_namespace("revoked").await?;
    cluster.create_service_account(&ns, "agent").await?;
    let token = cluster.mint_token(&ns, "agent", HOUR).await?;
    let (secret, member) = member_client(&cluster, &token);
    list_configmaps(&member, &ns).await?;

    // The KAI-Scheduler incident: the ServiceAccount is deleted and recreated, the Secret is not
    // updated. Its token is dead, and must be reported as an auth failure.
    cluster
        .recreate_service_account(&ns, "agent", &token)
        .await?;
    let err = list_configmaps(&member, &ns).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::Unauthorized, "{err}");
    assert_eq!(member.health.current(), CredentialState::Unauthorized);

    // Updating the Secret heals it, with the same client.
    let fresh = cluster.mint_token(&ns, "agent", HOUR).await?;
    secret.set_token(fresh);
    member.tokens.invalidate(&member.key).await;
    list_configmaps(&member, &ns).await?;
    assert_eq!(member.health.current(), CredentialState::Valid);
    Ok(())
}
