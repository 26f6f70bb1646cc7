//! Properties of the `ExecCredential` parser, for any stdout a plugin may print: no panic, a
//! typed error or a credential, and the token never in the error.

use proptest::prelude::*;

use crate::{
    exec::{ExecApiVersion, wire::ExecOutput},
    test_util::proptest_config,
};

/// A token that must never appear in an error.
const TOKEN: &str = "tok-3f9a1c-never-echo";

/// JSON values that are sometimes the token, sometimes of the wrong type.
fn value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::json!(TOKEN)),
        Just(serde_json::json!([TOKEN])),
        Just(serde_json::json!({ "x": TOKEN })),
        Just(serde_json::Value::Null),
        any::<i64>().prop_map(serde_json::Value::from),
        "\\PC{0,12}".prop_map(serde_json::Value::from),
    ]
}

/// ExecCredential-shaped documents with the token in odd places.
fn document() -> impl Strategy<Value = Vec<u8>> {
    let api_version = prop_oneof![
        Just("client.authentication.k8s.io/v1".to_owned()),
        Just("client.authentication.k8s.io/v1beta1".to_owned()),
        Just(TOKEN.to_owned()),
        "\\PC{0,10}",
    ];
    let kind = prop_oneof![Just("ExecCredential".to_owned()), Just(TOKEN.to_owned())];
    let field = prop_oneof![
        Just("token"),
        Just("clientCertificateData"),
        Just("clientKeyData"),
        Just("expirationTimestamp"),
        Just("other"),
    ];
    let status = proptest::collection::btree_map(field, value(), 0..4);
    (
        api_version,
        kind,
        proptest::option::of(status),
        any::<bool>(),
    )
        .prop_map(|(api_version, kind, status, truncate)| {
            let mut doc = serde_json::json!({ "apiVersion": api_version, "kind": kind });
            if let Some(status) = status {
                doc["status"] = serde_json::json!(status);
            }
            let mut bytes = serde_json::to_vec(&doc).unwrap_or_default();
            if truncate {
                bytes.truncate(bytes.len() / 2);
            }
            bytes
        })
}

proptest! {
    #![proptest_config(proptest_config(2_000))]

    #[test]
    fn any_document_parses_or_is_a_typed_error_without_the_token(stdout in document()) {
        for version in [ExecApiVersion::V1, ExecApiVersion::V1Beta1] {
            if let Err(err) = ExecOutput::from_json(&stdout, version) {
                let text = format!("{err} {err:?}");
                prop_assert!(!text.contains(TOKEN), "{}", text);
            }
        }
    }

    #[test]
    fn any_bytes_parse_or_are_a_typed_error(stdout in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = ExecOutput::from_json(&stdout, ExecApiVersion::V1);
    }
}
