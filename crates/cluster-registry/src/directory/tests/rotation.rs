//! A member file's `mint:` block (formerly `rotation:`).

use super::*;
use crate::minting::TokenHome;

#[rstest]
#[case::mint("mint")]
#[case::former_spelling("rotation")]
fn a_mint_block_names_the_token_file_as_the_home(#[case] key: &str) {
    let dir = Dir::new();
    dir.write("t", "token");
    let member = dir.member(&format!(
        "name: m1\napiEndpoint: https://h:6443\ntokenFile: t\n\
         {key}:\n  serviceAccount: tether/collector\n  enabled: true\n",
    ));
    let spec = member.definition.spec.unwrap();
    let rotation = spec.mint_request.expect("a rotation");
    assert_eq!(rotation.home, TokenHome::File(dir.path("t")));
    assert_eq!(rotation.enabled, Some(true));
}

#[rstest]
#[case::exec(
    "name: m1\napiEndpoint: https://h:6443\nexec:\n  apiVersion: client.authentication.k8s.io/v1\n  \
     command: /bin/p\nmint:\n  serviceAccount: a/b\n"
)]
#[case::kubeconfig("name: m1\nkubeconfig: k\nmint:\n  serviceAccount: a/b\n")]
#[case::outside(
    "name: m1\napiEndpoint: https://h:6443\ntokenFile: sub/../t\nmint:\n  serviceAccount: a/b\n"
)]
#[case::in_a_subdirectory(
    "name: m1\napiEndpoint: https://h:6443\ntokenFile: sub/t\nmint:\n  serviceAccount: a/b\n"
)]
#[case::bad_account(
    "name: m1\napiEndpoint: https://h:6443\ntokenFile: t\nmint:\n  serviceAccount: b\n"
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
