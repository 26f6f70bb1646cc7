//! A member file's `rotation:` block.

use super::*;
use crate::token_rotation::TokenHome;

#[test]
fn a_rotation_block_names_the_token_file_as_the_home() {
    let dir = Dir::new();
    dir.write("t", "token");
    let member = dir.member(
        "name: m1\napiEndpoint: https://h:6443\ntokenFile: t\n\
         rotation:\n  serviceAccount: tether/collector\n  enabled: true\n",
    );
    let rotation = member
        .definition
        .spec
        .unwrap()
        .token_rotation
        .expect("a rotation");
    assert_eq!(rotation.home, TokenHome::File(dir.path("t")));
    assert_eq!(rotation.enabled, Some(true));
}

#[rstest]
#[case::exec(
    "name: m1\napiEndpoint: https://h:6443\nexec:\n  apiVersion: client.authentication.k8s.io/v1\n  \
     command: /bin/p\nrotation:\n  serviceAccount: a/b\n"
)]
#[case::kubeconfig("name: m1\nkubeconfig: k\nrotation:\n  serviceAccount: a/b\n")]
#[case::outside(
    "name: m1\napiEndpoint: https://h:6443\ntokenFile: sub/../t\nrotation:\n  serviceAccount: a/b\n"
)]
#[case::in_a_subdirectory(
    "name: m1\napiEndpoint: https://h:6443\ntokenFile: sub/t\nrotation:\n  serviceAccount: a/b\n"
)]
#[case::bad_account(
    "name: m1\napiEndpoint: https://h:6443\ntokenFile: t\nrotation:\n  serviceAccount: b\n"
)]
fn a_rotation_without_a_plain_token_file_is_definition_invalid(#[case] yaml: &str) {
    let dir = Dir::new();
    dir.write("t", "token").write("k", "garbage");
    let member = dir.member(yaml);
    assert_eq!(
        member.refused().condition_reason(),
        "DefinitionInvalid",
        "{yaml}"
    );
}
