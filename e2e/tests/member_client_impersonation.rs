//! A member client acts as the user and groups its config names (a kubeconfig's `as` and
//! `as-groups`), as a `kube::Client` built from that kubeconfig does: a real kube-apiserver
//! answers a `SelfSubjectReview` as the impersonated user.

use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, UserInfo};
use kube::{Api, api::PostParams};
use member_client::{
    CredentialCacheConfig, CredentialKey, MemberClientConfig,
    test_util::{FakeSource, TestMember},
};
use testkit::Environment;

/// Who the member's apiserver says `member`'s requests come from.
async fn whoami(member: &TestMember) -> kube::Result<UserInfo> {
    let review = Api::<SelfSubjectReview>::all(member.client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(review.status.unwrap().user_info.unwrap())
}

#[tokio::test]
async fn the_member_answers_as_the_impersonated_user_and_groups() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let cluster = &env.members()[0];
    // The admin may impersonate anyone.
    let source = Arc::new(FakeSource::token(cluster.admin_token()?));
    let key = CredentialKey::new("karmada-cluster", cluster.name());
    let member_config = |impersonate: Option<&str>, groups: &[&str]| {
        let mut config = MemberClientConfig::new(cluster.name(), cluster.endpoint(), key.clone())
            .with_ca_bundle(cluster.ca_pem().as_bytes().to_vec());
        config.impersonate = impersonate.map(str::to_owned);
        config.impersonate_groups = groups.iter().map(|g| (*g).to_owned()).collect();
        config
    };
    let config = member_config(Some("alice"), &["ops", "dev"]);
    let member = TestMember::build(&source, config, CredentialCacheConfig::default());

    let alice = whoami(&member).await?;
    assert_eq!(alice.username.as_deref(), Some("alice"));
    let groups = alice.groups.unwrap_or_default();
    for group in ["ops", "dev", "system:authenticated"] {
        assert!(
            groups.iter().any(|g| g == group),
            "{group} not in {groups:?}"
        );
    }

    // The same credential without impersonation is the admin itself.
    let plain = TestMember::build(&source, member_config(None, &[]), Default::default());
    let admin = whoami(&plain).await?;
    assert_ne!(admin.username.as_deref(), Some("alice"), "{admin:?}");
    assert!(!admin.groups.unwrap_or_default().iter().any(|g| g == "ops"));
    Ok(())
}
