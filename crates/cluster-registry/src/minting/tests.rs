use std::collections::BTreeMap;

use member_client::CredentialKey;
use rstest::rstest;

use super::*;

fn home() -> TokenHome {
    TokenHome::KarmadaSecret(CredentialKey::new("karmada-cluster", "m1"))
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The rotation `pairs` of annotations ask for, with [`home`].
fn rotation_of(pairs: &[(&str, &str)]) -> MintRequest {
    MintRequest::from_annotations(&annotations(pairs), home())
        .unwrap()
        .unwrap()
}

#[test]
fn every_annotation_is_read() {
    let rotation = rotation_of(&[
        (SERVICE_ACCOUNT_ANNOTATION, " tether/collector "),
        (MINT_ANNOTATION, "false"),
        (EXPIRATION_ANNOTATION, "7200"),
        (AUDIENCES_ANNOTATION, "api, vault,"),
        (MINT_NOW_ANNOTATION, "2026-12-02T10:00:00Z"),
    ]);
    assert_eq!(rotation.service_account.to_string(), "tether/collector");
    assert_eq!(rotation.enabled, Some(false));
    assert!(rotation.opts_out(), "the member may always opt out");
    assert_eq!(rotation.expiration_seconds, 7200);
    assert_eq!(rotation.audiences, ["api", "vault"]);
    assert_eq!(rotation.requested.as_deref(), Some("2026-12-02T10:00:00Z"));
    assert_eq!(rotation.home, home());
}

/// Definitions written before the annotations were named for minting keep working for a
/// release; where both spellings are there, the new one wins.
#[test]
fn the_former_spellings_are_read_where_the_new_ones_are_absent() {
    let former: BTreeMap<&str, &str> = FORMER_ANNOTATIONS.into_iter().collect();
    let rotation = rotation_of(&[
        (former[SERVICE_ACCOUNT_ANNOTATION], "tether/collector"),
        (former[MINT_ANNOTATION], "false"),
        (former[EXPIRATION_ANNOTATION], "7200"),
        (former[AUDIENCES_ANNOTATION], "api"),
        (former[MINT_NOW_ANNOTATION], "now"),
        (EXPIRATION_ANNOTATION, "5400"),
    ]);
    assert_eq!(rotation.service_account.to_string(), "tether/collector");
    assert_eq!(rotation.enabled, Some(false));
    assert_eq!(rotation.expiration_seconds, 5400);
    assert_eq!(rotation.audiences, ["api"]);
    assert_eq!(rotation.requested.as_deref(), Some("now"));
    assert_eq!(
        former[MINT_ANNOTATION], "tether.io/rotate-tokens",
        "the former spelling of the opt-out"
    );
}

#[test]
fn without_a_choice_the_operator_decides() {
    let rotation = rotation_of(&[(SERVICE_ACCOUNT_ANNOTATION, "tether/collector")]);
    assert_eq!(rotation.enabled, None);
    assert!(!rotation.opts_out());
    assert_eq!(rotation.expiration_seconds, DEFAULT_EXPIRATION_SECONDS);
    assert_eq!(rotation.requested, None);
}

#[rstest]
#[case::nothing(&[])]
#[case::opted_out_without_account(&[(MINT_ANNOTATION, "false")])]
#[case::unrelated(&[("tether.io/other", "x")])]
fn no_service_account_is_no_request(#[case] pairs: &[(&str, &str)]) {
    assert_eq!(
        MintRequest::from_annotations(&annotations(pairs), home()).unwrap(),
        None
    );
}

#[rstest]
#[case::on_without_account(&[(MINT_ANNOTATION, "true")], MINT_ANNOTATION)]
#[case::not_a_bool(&[(SERVICE_ACCOUNT_ANNOTATION, "a/b"), (MINT_ANNOTATION, "yes")], MINT_ANNOTATION)]
#[case::no_slash(&[(SERVICE_ACCOUNT_ANNOTATION, "collector")], SERVICE_ACCOUNT_ANNOTATION)]
#[case::bad_namespace(&[(SERVICE_ACCOUNT_ANNOTATION, "a.b/c")], SERVICE_ACCOUNT_ANNOTATION)]
#[case::bad_name(&[(SERVICE_ACCOUNT_ANNOTATION, "a/B_c")], SERVICE_ACCOUNT_ANNOTATION)]
#[case::too_short(&[(SERVICE_ACCOUNT_ANNOTATION, "a/b"), (EXPIRATION_ANNOTATION, "599")], EXPIRATION_ANNOTATION)]
#[case::too_long(&[(SERVICE_ACCOUNT_ANNOTATION, "a/b"), (EXPIRATION_ANNOTATION, "4294967296")], EXPIRATION_ANNOTATION)]
#[case::not_a_number(&[(SERVICE_ACCOUNT_ANNOTATION, "a/b"), (EXPIRATION_ANNOTATION, "1h")], EXPIRATION_ANNOTATION)]
#[case::spaced_audience(&[(SERVICE_ACCOUNT_ANNOTATION, "a/b"), (AUDIENCES_ANNOTATION, "a b")], AUDIENCES_ANNOTATION)]
#[case::control_in_request(&[(SERVICE_ACCOUNT_ANNOTATION, "a/b"), (MINT_NOW_ANNOTATION, "a\u{1b}b")], MINT_NOW_ANNOTATION)]
fn a_bad_request_is_an_invalid_definition_naming_its_annotation(
    #[case] pairs: &[(&str, &str)],
    #[case] named: &str,
) {
    let err = MintRequest::from_annotations(&annotations(pairs), home()).unwrap_err();
    assert_eq!(err.condition_reason(), "DefinitionInvalid");
    assert!(err.to_string().contains(named), "{err}");
}

#[test]
fn what_a_request_may_hold_is_bounded() {
    let many = vec!["a"; 17].join(",");
    let long = "x".repeat(257);
    for (annotation, value) in [
        (AUDIENCES_ANNOTATION, &many),
        (AUDIENCES_ANNOTATION, &long),
        (MINT_NOW_ANNOTATION, &long),
    ] {
        let pairs = annotations(&[(SERVICE_ACCOUNT_ANNOTATION, "a/b"), (annotation, value)]);
        assert!(MintRequest::from_annotations(&pairs, home()).is_err());
    }
}

#[rstest::rstest]
#[case::mint_now("mintNow")]
#[case::former_spelling("rotateNow")]
fn a_member_file_block_reads_as_the_annotations_do(#[case] now: &str) {
    let block: MintBlock = serde_yaml::from_str(&format!(
        "serviceAccount: tether/collector\nenabled: true\nexpirationSeconds: 900\n\
         audiences: [api]\n{now}: \"1\"\n",
    ))
    .unwrap();
    let rotation = block.request("/m/m1.token".into()).unwrap();
    assert_eq!(rotation.service_account.name, "collector");
    assert_eq!(rotation.enabled, Some(true));
    assert_eq!(rotation.expiration_seconds, 900);
    assert_eq!(rotation.audiences, ["api"]);
    assert_eq!(rotation.requested.as_deref(), Some("1"));
    assert_eq!(rotation.home, TokenHome::File("/m/m1.token".into()));

    let bad: MintBlock =
        serde_yaml::from_str("serviceAccount: tether/collector\nexpirationSeconds: 60\n").unwrap();
    let err = bad.request("/m/t".into()).unwrap_err();
    assert!(err.to_string().contains("mint.expirationSeconds"), "{err}");
    assert!(serde_yaml::from_str::<MintBlock>("serviceAccount: a/b\nextra: 1\n").is_err());
}
