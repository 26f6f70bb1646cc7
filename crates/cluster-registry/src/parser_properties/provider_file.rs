//! Properties of the provider file parser (`--clusterprofile-provider-file`): for arbitrary
//! bytes and for files of upstream's shape with hostile names, commands and patterns, no
//! panic, a file or a typed error, an error whose size follows the input's (never a declared
//! repetition's), and every accepted provider named, absolute and declared.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::config_of;
use crate::clusterprofile::{ProviderFile, ProviderFileError};

/// Patterns a provider may give: ordinary, invalid, and ones that declare far more than
/// they spell (a repetition of billions, nested repetitions).
fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9.*+?()\\[\\]|-]{0,20}",
        Just("(".to_owned()),
        Just("a{4294967295}".to_owned()),
        Just("(a{1000}){1000}".to_owned()),
        Just("((((a*)*)*)*)*".to_owned()),
        Just("\\p{Greek}{65535}".to_owned()),
        ("[a-z]", 1usize..400).prop_map(|(unit, n)| unit.repeat(n)),
        any::<String>(),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9-]{0,12}",
        "\\PC{0,20}",
        ("[ -~]", 1usize..4_000).prop_map(|(unit, n)| unit.repeat(n)),
    ]
}

fn command() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        "/[a-z/]{1,20}",
        "[a-z]{1,10}",
        Just("/".to_owned()),
        Just(String::new()),
        "\\PC{0,20}",
    ])
}

fn provider() -> impl Strategy<Value = Value> {
    (
        name(),
        command(),
        prop::option::of(prop::collection::vec("\\PC{0,10}", 0..4)),
        prop::option::of(prop::collection::vec(
            ("[A-Z_]{0,8}", "\\PC{0,8}", any::<bool>()),
            0..3,
        )),
        prop_oneof![Just("Ignore"), Just("Append"), Just("Replace"), Just("Prepend")],
        prop::collection::vec(pattern(), 0..3),
        prop::collection::vec(("[A-Z_]{0,8}|HOME|PATH", pattern()), 0..3),
    )
        .prop_map(|(name, command, args, env, policy, arg_patterns, env_rules)| {
            let env = env.map(|env| {
                env.into_iter()
                    .map(|(name, value, complete)| {
                        if complete {
                            json!({ "name": name, "value": value })
                        } else {
                            json!({ "name": name })
                        }
                    })
                    .collect::<Vec<_>>()
            });
            json!({
                "name": name,
                "execConfig": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": command, "args": args, "env": env,
                },
                "profileSourcedCLIArgsPolicy": policy,
                "definitionArgs": arg_patterns.iter().map(|p| json!({ "pattern": p })).collect::<Vec<_>>(),
                "definitionEnv": env_rules.iter().map(|(n, p)| json!({ "name": n, "pattern": p })).collect::<Vec<_>>(),
            })
        })
}

/// Parses `raw`: a file whose every provider is usable, or an error no larger than the input
/// can explain (a name is quoted, so each byte may become an escape of at most 10).
fn check(raw: &[u8]) -> Result<(), TestCaseError> {
    match ProviderFile::parse(raw) {
        Ok(file) => {
            for name in file.names() {
                let provider = file.provider(name);
                prop_assert!(!name.is_empty());
                prop_assert!(provider.is_some_and(|p| p.declaration().is_some()));
            }
            for command in file.commands() {
                prop_assert!(command.is_absolute(), "{:?}", command);
            }
        }
        Err(err) => {
            prop_assert!(!matches!(err, ProviderFileError::Read(_)), "{err:?}");
            let shown = err.to_string();
            prop_assert!(
                shown.len() <= 10 * raw.len() + 1024,
                "{} bytes from {}",
                shown.len(),
                raw.len()
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config_of(512))]

    #[test]
    fn arbitrary_bytes_are_a_provider_file_or_a_typed_error(
        raw in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        check(&raw)?;
    }

    #[test]
    fn hostile_providers_are_usable_or_refused_with_a_bounded_reason(
        providers in prop::collection::vec(provider(), 0..4),
    ) {
        let raw = serde_json::to_vec(&json!({ "providers": providers })).unwrap();
        check(&raw)?;
    }
}
