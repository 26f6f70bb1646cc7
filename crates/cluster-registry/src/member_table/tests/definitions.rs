//! Definitions added, changed, renamed, duplicated and removed.

use std::path::PathBuf;

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

/// Defines member1 twice, as the Karmada Cluster member1 and as a member file, in either
/// order; returns the member file's origin.
async fn define_member1_twice(h: &mut Harness, file_first: bool) -> Origin {
    let path = PathBuf::from("/m/member1.yaml");
    let file_key = Origin::file_key(&path);
    h.table
        .apply_secret(file_key.clone(), secret(&[("token", b"t2")]))
        .await
        .unwrap();
    let file_spec = MemberSpec {
        secret_ref: file_key,
        ..spec("member1", "https://10.9.9.9")
    };
    let file = Origin::File(path);
    let file_def = def_with("member1", file_spec);
    if !file_first {
        h.define("member1", def("member1")).await;
    }
    (h.table.apply_definition(file.clone(), file_def).await).unwrap();
    if file_first {
        h.define("member1", def("member1")).await;
    }
    file
}

#[rstest::rstest]
#[case::cluster_first(false)]
#[case::file_first(true)]
#[tokio::test]
async fn two_definitions_of_one_name_are_both_invalid_whatever_the_order(#[case] file_first: bool) {
    let mut h = harness();
    h.write_secret(&[("token", b"t1")]).await;
    h.list_namespace().await;
    let file = define_member1_twice(&mut h, file_first).await;
    let mut last = None;
    while let Some(event) = h.next() {
        last = Some(event);
    }
    let Some(RegistryEvent::Invalid { name, reason }) = last else {
        panic!("expected member1 to end Invalid, got {last:?}");
    };
    assert_eq!(name, "member1");
    assert_eq!(reason.condition_reason(), "DefinitionInvalid");
    let detail = reason.to_string();
    for says in [
        "claimed by 2 definitions",
        "Karmada Cluster member1",
        "member file /m/member1.yaml",
    ] {
        assert!(detail.contains(says), "{detail:?} lacks {says:?}");
    }
    assert_eq!(h.state("member1"), Some(MemberState::Invalid { reason }));
    assert_eq!(h.origin("member1"), None, "neither definition is in use");

    // when one goes, the other is used, whichever it is
    h.table.remove_definition(&file).await.unwrap();
    assert_eq!(
        h.expect_upserted(),
        spec("member1", "https://10.0.0.1:6443")
    );
    assert_eq!(h.origin("member1"), Some(karmada_origin("member1")));
    define_member1_twice(&mut h, file_first).await;
    h.expect_invalid("member1");
    h.undefine("member1").await;
    assert_eq!(h.expect_upserted().endpoint.url, "https://10.9.9.9");
    assert_eq!(h.origin("member1"), Some(file));
}

#[tokio::test]
async fn a_renamed_member_is_removed_then_upserted() {
    let mut h = ready_member1().await;
    h.table
        .apply_secret(key("member9"), secret(&[("token", b"t9")]))
        .await
        .unwrap();
    h.define("member1", def("member9")).await;
    assert_eq!(h.next(), Some(RegistryEvent::Removed("member1".into())));
    assert_eq!(h.expect_upserted().name, "member9");
}
