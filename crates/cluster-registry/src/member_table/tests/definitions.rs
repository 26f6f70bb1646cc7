//! Definitions added, changed, renamed, duplicated and removed.

use super::*;

#[tokio::test]
async fn removing_a_member_says_removed_once() {
    let mut h = ready_member1().await;
    h.undefine("member1").await;
    assert_eq!(h.next(), Some(RegistryEvent::Removed("member1".into())));
    h.undefine("member1").await;
    assert_eq!(h.next(), None);
    assert_eq!(h.state("member1"), None);
}

#[tokio::test]
async fn removing_a_pending_member_says_nothing() {
    let mut h = harness();
    h.define("member1", def("member1")).await;
    h.undefine("member1").await;
    assert_eq!(h.next(), None);
}

#[tokio::test]
async fn an_invalid_member_leaves_the_others_alone() {
    let mut h = ready_member1().await;
    let bad = MemberDefinition {
        name: "member2".into(),
        spec: Err(InvalidReason::EndpointInvalid("no".into())),
    };
    h.define("member2", bad).await;
    h.expect_invalid("member2");
    assert_eq!(h.next(), None);
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
}

#[tokio::test]
async fn a_changed_endpoint_is_an_upsert() {
    let mut h = ready_member1().await;
    let moved = spec("member1", "https://10.0.0.2:6443");
    h.define("member1", def_with("member1", moved.clone()))
        .await;
    assert_eq!(h.expect_upserted(), moved);
    // applying the same definition again says nothing
    h.define("member1", def("member1")).await;
    h.next();
    h.define("member1", def("member1")).await;
    assert_eq!(h.next(), None);
}

#[tokio::test]
async fn a_duplicate_name_waits_until_the_first_definition_goes() {
    let mut h = ready_member1().await;
    let file = Origin::File("/m/member1.yaml".into());
    let other = spec("member1", "https://10.9.9.9");
    h.table
        .apply_definition(file, def_with("member1", other.clone()))
        .await
        .unwrap();
    assert_eq!(h.next(), None, "the first definition stays in use");
    assert_eq!(h.origin("member1"), Some(karmada_origin("member1")));
    h.undefine("member1").await;
    assert_eq!(h.expect_upserted(), other);
    assert_eq!(
        h.origin("member1").map(|o| (o.source(), o.to_string())),
        Some(("directory", "member file /m/member1.yaml".to_owned())),
        "the view names the definition in use"
    );
}

#[tokio::test]
async fn a_renamed_member_is_removed_then_upserted() {
    let mut h = ready_member1().await;
    h.define(
        "member1",
        sharing_member1s_secret("member9", "https://10.0.0.1:6443"),
    )
    .await;
    assert_eq!(h.next(), Some(RegistryEvent::Removed("member1".into())));
    assert_eq!(h.expect_upserted().name, "member9");
}
