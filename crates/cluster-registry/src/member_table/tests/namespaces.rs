//! Karmada members wait for the Secrets of their namespace to be listed, or to be refused.

use super::*;

/// member1's Secret appears and its namespace is listed: member1 is upserted and Ready.
async fn list_and_expect_ready(h: &mut Harness) {
    h.write_secret(&[("token", b"t1")]).await;
    h.list_namespace().await;
    h.expect_upserted();
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
}

#[tokio::test]
async fn karmada_members_wait_for_their_namespace_to_be_listed() {
    let mut h = harness();
    h.define("member1", def("member1")).await;
    assert_eq!(
        h.next(),
        None,
        "nothing is said before the Secrets are listed"
    );
    assert_eq!(h.state("member1"), Some(MemberState::Pending));
    list_and_expect_ready(&mut h).await;
}

#[tokio::test]
async fn a_refused_list_makes_waiting_members_secret_forbidden_until_it_is_listed() {
    let mut h = harness();
    h.define("member1", def("member1")).await;
    let refusal = "secrets is forbidden: cannot list resource \"secrets\"".to_owned();
    h.table
        .namespace_forbidden("karmada-cluster", refusal.clone())
        .await
        .unwrap();
    let forbidden = list_forbidden(&refusal);
    assert_eq!(h.expect_invalid("member1"), forbidden);
    assert_eq!(
        h.state("member1"),
        Some(MemberState::Invalid { reason: forbidden })
    );
    // The watch retries and is refused again: nothing new to say.
    h.table
        .namespace_forbidden("karmada-cluster", refusal)
        .await
        .unwrap();
    assert_eq!(h.next(), None);

    // RBAC granted: the retry lists, and the member is used.
    list_and_expect_ready(&mut h).await;
}

#[tokio::test]
async fn a_refusal_after_a_list_keeps_what_was_listed() {
    let mut h = ready_member1().await;
    h.table
        .namespace_forbidden("karmada-cluster", "RBAC revoked".into())
        .await
        .unwrap();
    assert_eq!(h.next(), None);
    assert_eq!(h.state("member1"), Some(MemberState::Ready));
}

#[tokio::test]
async fn a_dropped_receiver_stops_the_table() {
    let mut h = harness();
    drop(h.events);
    h.table.namespace_listed("karmada-cluster").await.unwrap();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        h.table
            .apply_definition(karmada_origin("member1"), def("member1")),
    )
    .await
    .unwrap();
    assert!(closed.is_err());
}
