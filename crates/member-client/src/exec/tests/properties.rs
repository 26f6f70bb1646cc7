//! Properties of the `ExecCredential` parser, for any stdout a plugin may print: no panic, a
//! typed error or a credential, and the token never in the error. At its edges too: RFC 3339
//! times of every shape and out-of-range value, and fields far larger than any credential,
//! give a typed error whose text holds nothing of the input.

use proptest::prelude::*;

use crate::{
    exec::{
        ExecApiVersion,
        wire::{ExecOutput, parse_rfc3339},
    },
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

/// The longest an error may be: every variant is a fixed sentence with numbers.
const MAX_ERROR_BYTES: usize = 256;

/// Times in RFC 3339's shape with every field at and past its range, odd separators, long
/// fractions and offsets, and noise.
fn timestamp() -> impl Strategy<Value = String> {
    let number = |width: usize| {
        prop_oneof![
            (0u32..10u32.pow(width as u32)).prop_map(move |n| format!("{n:0width$}")),
            Just("9".repeat(width)),
            Just("-".repeat(width)),
        ]
    };
    (
        (number(4), number(2), number(2)),
        (number(2), number(2), number(2)),
        prop_oneof![Just("T"), Just("t"), Just(" "), Just("")],
        prop::option::of("[0-9]{0,40}"),
        prop_oneof![
            Just("Z".to_owned()),
            Just("z".to_owned()),
            "[+-][0-9]{2}:[0-9]{2}",
            Just("+99:99".to_owned()),
            Just("".to_owned()),
            "\\PC{0,4}",
        ],
    )
        .prop_map(|((y, mo, d), (h, mi, s), t, fraction, offset)| {
            let fraction = fraction.map(|f| format!(".{f}")).unwrap_or_default();
            format!("{y}-{mo}-{d}{t}{h}:{mi}:{s}{fraction}{offset}")
        })
}

proptest! {
    #![proptest_config(proptest_config(1_000))]

    #[test]
    fn any_time_parses_or_is_refused(text in prop_oneof![timestamp(), "\\PC{0,40}"]) {
        if parse_rfc3339(&text).is_some() {
            // Accepted only in the one format: 20 bytes at least, `T` at 10 (upper-case, as
            // Go reads it).
            prop_assert!(text.len() >= 20, "{:?}", text);
            prop_assert_eq!(text.as_bytes()[10], b'T', "{:?}", text);
        }
    }

    #[test]
    fn oversized_and_odd_fields_give_a_credential_or_a_short_typed_error(
        token in prop_oneof![
            Just(String::new()),
            "[A-Za-z0-9._-]{1,40}",
            (1usize..200_000).prop_map(|n| "t".repeat(n)),
            "\\PC{0,20}",
        ],
        certificate in prop::option::of(prop_oneof![
            "\\PC{0,20}",
            (1usize..100_000).prop_map(|n| "c".repeat(n)),
        ]),
        key in prop::option::of("\\PC{0,20}"),
        expires in prop::option::of(prop_oneof![timestamp(), "\\PC{0,20}"]),
    ) {
        let mut status = serde_json::json!({ "token": token });
        if let Some(certificate) = certificate {
            status["clientCertificateData"] = certificate.into();
        }
        if let Some(key) = key {
            status["clientKeyData"] = key.into();
        }
        if let Some(expires) = expires {
            status["expirationTimestamp"] = expires.into();
        }
        let stdout = serde_json::to_vec(&serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": status,
        })).unwrap_or_default();
        if let Err(err) = ExecOutput::from_json(&stdout, ExecApiVersion::V1) {
            let shown = format!("{err}");
            prop_assert!(shown.len() <= MAX_ERROR_BYTES, "{} bytes: {}", shown.len(), shown);
        }
    }
}
