//! A Secret serves the one member it is bound to; a definition that names another member's
//! Secret is refused, and a new label or owner judges its definitions again.

use super::*;
use crate::secret_binding::SecretBinding;

/// Refused definitions name member1's Secret, the rule, and the label that would bind it.
fn assert_refused_for_member1s_secret(reason: &InvalidReason) {
    assert_eq!(reason.condition_reason(), "SecretForbidden", "{reason}");
    let detail = reason.to_string();
    assert!(
        detail.contains("Secret karmada-cluster/member1 ") && detail.contains("tether.io/member="),
        "{detail}"
    );
}

/// member1 ready, and `evil` defined with member1's Secret: refused, as the returned reason
/// says.
async fn evil_sharing_member1s_secret() -> (Harness, InvalidReason) {
    let mut h = ready_member1().await;
    h.define("evil", sharing_member1s_secret("evil", "https://10.0.0.3"))
        .await;
    let refused = h.expect_invalid("evil");
    (h, refused)
}

#[tokio::test]
async fn a_cluster_naming_another_members_secret_is_refused_and_hears_nothing_of_it() {
    let (mut h, refused) = evil_sharing_member1s_secret().await;
    assert_refused_for_member1s_secret(&refused);
    assert_eq!(h.next(), None);
    assert_eq!(h.state("member1"), Some(MemberState::Ready));

    // member1's rotation is member1's alone
    h.write_secret(&[("token", b"t2")]).await;
    h.expect_rotated("member1", key("member1"));
    assert_eq!(h.next(), None);
    assert!(matches!(
        h.state("evil"),
        Some(MemberState::Invalid {
            reason: InvalidReason::SecretForbidden(_)
        })
    ));
}

#[tokio::test]
async fn a_labelled_secret_serves_the_member_it_names_under_any_name() {
    let mut h = harness();
    h.list_namespace().await;
    let creds = key("creds-2");
    let labelled = secret(&[("token", b"t2")]).bound(SecretBinding::labelled("member2"));
    h.table.apply_secret(creds.clone(), labelled).await.unwrap();
    let named = |name: &str| {
        def_with(
            name,
            MemberSpec {
                secret_ref: creds.clone(),
                ..spec(name, "https://10.0.0.2")
            },
        )
    };
    h.define("member2", named("member2")).await;
    assert_eq!(h.expect_upserted().name, "member2");
    h.define("other", named("other")).await;
    let refused = h.expect_invalid("other").to_string();
    assert!(
        refused.contains("bound to member \"member2\" by its label tether.io/member"),
        "{refused}"
    );
}

#[tokio::test]
async fn relabelling_a_secret_judges_its_members_again_without_forgetting_the_token() {
    let (mut h, _) = evil_sharing_member1s_secret().await;
    let before = h.tokens.stats().invalidations;

    let relabelled = secret(&[("token", b"t1")]).bound(SecretBinding::labelled("evil"));
    h.table
        .apply_secret(key("member1"), relabelled)
        .await
        .unwrap();
    let mut told: Vec<(String, &str)> = std::iter::from_fn(|| h.next())
        .map(|event| match event {
            RegistryEvent::Invalid { name, reason } => (name, reason.condition_reason()),
            RegistryEvent::Upserted { spec, .. } => (spec.name, "Upserted"),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    told.sort();
    assert_eq!(
        told,
        [
            ("evil".to_owned(), "Upserted"),
            ("member1".to_owned(), "SecretForbidden")
        ]
    );
    assert_eq!(
        h.tokens.stats().invalidations,
        before,
        "the credential did not change"
    );

    // the label gone, the Secret serves the member of its name again
    h.write_secret(&[("token", b"t1")]).await;
    let mut told: Vec<String> = std::iter::from_fn(|| h.next())
        .map(|event| event.member().to_owned())
        .collect();
    told.sort();
    assert_eq!(told, ["evil", "member1"]);
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
    assert_refused_for_member1s_secret(&match h.state("evil") {
        Some(MemberState::Invalid { reason }) => reason,
        other => panic!("{other:?}"),
    });
}

#[tokio::test]
async fn a_definition_from_a_secret_cannot_name_another_credential() {
    let mut h = ready_member1().await;
    let argocd = Origin::ArgoCd(CredentialKey::new("argocd", "cluster-x"));
    h.table
        .apply_definition(argocd, sharing_member1s_secret("x", "https://10.0.0.4"))
        .await
        .unwrap();
    let refused = h.expect_invalid("x");
    assert_eq!(refused.condition_reason(), "SecretForbidden");
    assert!(refused.to_string().contains("not its own"), "{refused}");
}
