//! Properties of every member-client parser of untrusted input: the endpoint and proxy URL
//! checks, the endpoint policy, CIDRs, PEM bundles, tokens and their JWT `exp`, and the text
//! sanitizer, JWT claims and the exec plugins file. Each holds for any input: no panic, a
//! typed error, no token in the error, and nothing larger than the input explains.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails by panicking"
)]

use std::net::IpAddr;

use base64::Engine as _;
use member_client::{
    Credential, SourceError,
    exec::{ExecPluginsFile, ExecPluginsFileError},
    jwt_claims::JwtClaims,
    test_util::proptest_config,
    text::Text,
    validation::EndpointPolicy,
    validation::MemberEndpoint,
    validation::ValidationError,
    validation::{self, Cidr},
};
use proptest::prelude::*;

/// base64url, padded or not: JWT segments come both ways.
fn base64url(padded: bool) -> base64::engine::GeneralPurpose {
    if padded {
        base64::engine::general_purpose::URL_SAFE
    } else {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
    }
}

/// A password that must never be echoed.
const PASSWORD: &str = "hunter2-never-echo";

/// URL-shaped strings: schemes, user info, hosts of every class, ports and paths, or noise.
fn url() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec!["https://", "http://", "ftp://", "", "HTTPS://"]);
    let userinfo = prop_oneof![
        Just(String::new()),
        Just(format!("admin:{PASSWORD}@")),
        Just(format!("{PASSWORD}@"))
    ];
    let host = prop_oneof![
        any::<std::net::Ipv4Addr>().prop_map(|ip| ip.to_string()),
        any::<std::net::Ipv6Addr>().prop_map(|ip| format!("[{ip}]")),
        "[a-z0-9.-]{0,30}",
        Just("metadata.google.internal".to_owned()),
        Just("localhost".to_owned()),
        "\\PC{0,20}",
    ];
    let port = prop_oneof![
        Just(String::new()),
        (0u32..70_000).prop_map(|p| format!(":{p}"))
    ];
    let path = prop_oneof![Just(String::new()), "/[ -~]{0,20}"];
    prop_oneof![
        (scheme, userinfo, host, port, path).prop_map(|(s, u, h, p, q)| format!("{s}{u}{h}{p}{q}")),
        "\\PC{0,80}",
        any::<String>(),
    ]
}

fn policy() -> impl Strategy<Value = EndpointPolicy> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(loopback, http, insecure)| {
        let base = if loopback {
            EndpointPolicy::loopback()
        } else {
            EndpointPolicy::default()
        };
        base.allow_plain_http(http).allow_insecure_tls(insecure)
    })
}

fn assert_clean(text: &str) {
    assert!(!text.contains(PASSWORD), "user info echoed: {text}");
    let control = text.chars().any(char::is_control);
    assert!(!control, "control character in: {text:?}");
}

proptest! {
    // 2,000 cases per property; with the registry's, well over 10,000 in all.
    #![proptest_config(proptest_config(2_000))]

    #[test]
    fn endpoint_and_proxy_checks_are_total_and_never_echo_user_info(
        endpoint in url(),
        proxy in proptest::option::of(url()),
        insecure in any::<bool>(),
        policy in policy(),
    ) {
        let member = MemberEndpoint { insecure_skip_tls_verify: insecure, proxy_url: proxy, ..MemberEndpoint::new(endpoint) };
        match validation::route(&policy, &member) {
            Ok(route) => {
                prop_assert!(matches!(route.endpoint.scheme_str(), Some("https" | "http")));
                prop_assert!(!route.endpoint.to_string().contains(PASSWORD));
                prop_assert!(!insecure || policy.insecure_tls_allowed());
            }
            Err(err) => {
                let typed = matches!(
                    err,
                    ValidationError::Endpoint(_) | ValidationError::Forbidden(_) | ValidationError::Proxy(_)
                );
                prop_assert!(typed, "{:?}", err);
                assert_clean(&err.to_string());
                assert_clean(&format!("{:?}", err).replace('\\', ""));
            }
        }
    }

    #[test]
    fn forbidden_address_classes_are_refused_by_default(ip in any::<IpAddr>()) {
        let refused = EndpointPolicy::default().check_ip(ip).is_err();
        let canonical = ip.to_canonical();
        let must_refuse = match canonical {
            IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified()
                || v4.is_multicast() || v4.is_broadcast() || v4.octets()[0] == 0,
            IpAddr::V6(v6) => v6.is_loopback() || v6.is_unicast_link_local() || v6.is_unspecified()
                || v6.is_multicast(),
        };
        prop_assert!(!must_refuse || refused, "{} must be refused", ip);
        let everything = EndpointPolicy::default()
            .allow("0.0.0.0/0".parse().unwrap())
            .allow("::/0".parse().unwrap());
        prop_assert!(everything.check_ip(ip).is_ok(), "an allowed range wins: {}", ip);
    }

    #[test]
    fn cidr_parsing_is_total(s in "\\PC{0,50}", ip in any::<IpAddr>(), prefix in 0u8..=140) {
        let _ = s.parse::<Cidr>();
        let written = format!("{ip}/{prefix}");
        let max = if ip.is_ipv4() { 32 } else { 128 };
        prop_assert_eq!(written.parse::<Cidr>().is_ok(), prefix <= max);
        if let Ok(cidr) = written.parse::<Cidr>() {
            prop_assert!(cidr.contains(ip));
        }
    }

    #[test]
    fn pem_bundles_are_certificates_or_a_typed_error(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..512),
            ("[A-Za-z0-9+/=\n]{0,300}", "[A-Z ]{0,20}").prop_map(|(body, label)| format!(
                "-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"
            ).into_bytes()),
            "[A-Za-z0-9+/=]{0,200}".prop_map(|body| format!(
                "-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"
            ).into_bytes()),
        ],
    ) {
        match validation::ca_bundle(&bytes) {
            Ok(certs) => prop_assert!(!certs.is_empty()),
            Err(err) => {
                prop_assert!(matches!(err, ValidationError::CaBundle(_)));
                prop_assert!(err.detail().len() <= Text::MAX_BYTES + 64);
            }
        }
    }

    #[test]
    fn tokens_parse_or_fail_typed_and_are_never_in_the_error(
        raw in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            "[ -~\t\n\r]{0,64}".prop_map(String::into_bytes),
            Just(vec![b'a'; Credential::MAX_TOKEN_BYTES + 1]),
        ],
    ) {
        match Credential::from_token_bytes(&raw) {
            Ok(credential) => {
                let token = String::from_utf8_lossy(raw.trim_ascii()).to_string();
                let printed = format!("{:?}", credential);
                prop_assert!(token.len() < 12 || !printed.contains(&token), "{}", printed);
            }
            Err(err) => {
                let typed = matches!(
                    err,
                    SourceError::EmptyToken | SourceError::TokenNotUtf8
                        | SourceError::TokenNotHeaderSafe | SourceError::TokenTooLong { .. }
                );
                prop_assert!(typed, "{:?}", err);
                let token = String::from_utf8_lossy(raw.trim_ascii()).to_string();
                let text = format!("{} {:?}", err, err);
                prop_assert!(token.len() < 8 || !text.contains(&token), "{}", text);
            }
        }
    }

    #[test]
    fn jwt_exp_extraction_is_total(
        exp in prop_oneof![
            any::<f64>().prop_map(|f| serde_json::json!(f)),
            any::<i64>().prop_map(|i| serde_json::json!(i)),
            any::<u64>().prop_map(|i| serde_json::json!(i)),
            "\\PC{0,10}".prop_map(|s| serde_json::json!(s)),
            Just(serde_json::json!(null)),
            Just(serde_json::json!({"nested": [1, 2]})),
        ],
        noise in "[A-Za-z0-9_=-]{0,20}",
        padded in any::<bool>(),
    ) {
        let engine = base64url(padded);
        let payload = engine.encode(serde_json::json!({ "exp": exp }).to_string());
        for token in [
            format!("eyJhbGciOiJSUzI1NiJ9.{payload}.sig"),
            format!("eyJ.{noise}.sig"),
            format!("{noise}.{payload}"),
            format!("a.{payload}.b.c"),
        ] {
            let credential = Credential::from_token_bytes(token.as_bytes()).unwrap();
            if let Some(at) = credential.expires_at() {
                prop_assert!(at >= std::time::SystemTime::UNIX_EPOCH);
            }
        }
    }

    #[test]
    fn sanitized_text_is_bounded_and_has_no_control_characters(raw in any::<String>(), bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        for text in [Text::new(&raw), Text::from_bytes(&bytes)] {
            prop_assert!(text.as_str().len() <= Text::MAX_BYTES);
            prop_assert!(!text.as_str().chars().any(char::is_control));
        }
    }
}

/// JSON values of every type, claims of the right type among them.
fn claim() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        "\\PC{0,16}".prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        Just(serde_json::json!(1e308)),
        Just(serde_json::json!(-0.0)),
        Just(serde_json::Value::Null),
        proptest::collection::vec("\\PC{0,8}", 0..6).prop_map(|v| serde_json::json!(v)),
        Just(serde_json::json!([1, null, {"a": "b"}, "aud"])),
        Just(serde_json::json!({"nested": {"exp": 1}})),
    ]
}

/// Exec plugins files: YAML (or JSON) of the provider file's shape with hostile names,
/// commands and patterns.
fn exec_plugins_yaml() -> impl Strategy<Value = String> {
    let pattern = prop_oneof![
        "[a-z0-9.*+?()|-]{0,12}",
        Just("(".to_owned()),
        Just("a{4294967295}".to_owned()),
        Just("(a{1000}){1000}".to_owned()),
        ("[a-z]", 1usize..1_500).prop_map(|(unit, n)| unit.repeat(n)),
    ];
    let entry = (
        prop_oneof!["[a-z]{0,6}", ("[ -~]", 1usize..2_000).prop_map(|(u, n)| u.repeat(n))],
        proptest::option::of(prop_oneof!["/[a-z/]{1,12}", "[a-z]{1,6}", "\\PC{0,10}"]),
        proptest::collection::vec(pattern.clone(), 0..3),
        proptest::collection::vec(("[A-Z_]{0,6}|HOME|PATH", pattern), 0..2),
    )
        .prop_map(|(name, command, args, env)| {
            serde_json::json!({
                "name": name,
                "execConfig": { "command": command, "args": ["--x"],
                                "env": [{ "name": "A", "value": "b" }] },
                "definitionArgs": args.iter().map(|p| serde_json::json!({ "pattern": p })).collect::<Vec<_>>(),
                "definitionEnv": env.iter().map(|(n, p)| serde_json::json!({ "name": n, "pattern": p })).collect::<Vec<_>>(),
            })
        });
    prop_oneof![
        proptest::collection::vec(entry, 0..4)
            .prop_map(|entries| serde_json::json!({ "providers": entries }).to_string()),
        "providers:\n(- name: [a-z]{0,4}\n  execConfig: \\{command: /[a-z]{0,4}\\}\n){0,3}",
        Just("providers: &a [*a]".to_owned()),
        Just("a: &a [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nproviders: []".to_owned()),
        "\\PC{0,200}",
    ]
}

proptest! {
    #![proptest_config(proptest_config(1_000))]

    /// Any token, JWT-shaped or not, with claims of any type: claims or none, never a panic;
    /// a claim read is one the payload holds, so none is larger than the token.
    #[test]
    fn jwt_claims_are_read_or_absent_for_any_token(
        claims in proptest::collection::btree_map(
            prop_oneof![Just("iss"), Just("aud"), Just("sub"), Just("exp"), Just("iat"), Just("nbf"), Just("x")],
            claim(),
            0..7,
        ),
        noise in "\\PC{0,40}",
        padded in any::<bool>(),
    ) {
        let engine = base64url(padded);
        let payload = engine.encode(serde_json::json!(claims).to_string());
        for token in [
            format!("e30.{payload}.sig"),
            format!("e30.{payload}"),
            format!("e30.{payload}.sig.x"),
            format!("e30.{noise}.sig"),
            format!("{noise}.{payload}.{noise}"),
            noise.clone(),
        ] {
            if let Some(read) = JwtClaims::of(&token) {
                let texts = read.iss.iter().chain(&read.sub).chain(&read.aud);
                let total: usize = texts.map(String::len).sum();
                prop_assert!(total <= token.len(), "{} bytes from {}", total, token.len());
                prop_assert!(read.aud.len() <= token.len());
                for time in [read.exp, read.iat, read.nbf].into_iter().flatten() {
                    prop_assert!(time >= std::time::SystemTime::UNIX_EPOCH);
                }
            }
        }
    }

    /// Any exec plugins file (`--exec-plugins`): declarations or a typed error whose size
    /// follows the input's (a quoted name may escape each byte into at most 10).
    #[test]
    fn exec_plugins_files_are_declarations_or_bounded_typed_errors(
        raw in prop_oneof![
            exec_plugins_yaml().prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..256),
        ],
    ) {
        match ExecPluginsFile::parse(&raw) {
            Ok(file) => {
                for (declaration, name) in file.declarations().zip(file.names()) {
                    prop_assert!(!name.is_empty());
                    prop_assert!(declaration.command().is_absolute(), "{:?}", declaration.command());
                }
            }
            Err(err) => {
                prop_assert!(
                    !matches!(err, ExecPluginsFileError::Read(_) | ExecPluginsFileError::TooLarge),
                    "{:?}", err
                );
                let shown = err.to_string();
                prop_assert!(shown.len() <= 10 * raw.len() + 1024, "{} bytes from {}", shown.len(), raw.len());
            }
        }
    }
}
