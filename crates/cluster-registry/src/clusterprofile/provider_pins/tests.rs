use super::*;
use rstest::rstest;
use serde_json::{Value, json};

const PROFILE: PinnedProfile<'static> = PinnedProfile {
    name: "member2",
    namespace: "inventory",
};

fn pins(value: Value) -> Result<ProfilePins, serde_json::Error> {
    serde_json::from_value(value)
}

fn cluster(server: &str, config: Value) -> ProfileCluster {
    serde_json::from_value(json!({
        "server": server,
        "extensions": [{"name": super::super::EXEC_EXTENSION, "extension": config}],
    }))
    .unwrap()
}

fn secretreader_pins() -> ProfilePins {
    pins(json!({
        "profileConfigPins": {"clusterName": "$(PROFILE_NAME)",
                              "inventory": "$(PROFILE_NAMESPACE)",
                              "region": {"pattern": "^(eu|us)-[a-z]+$"}},
        "serverPatterns": ["^https://[a-z0-9.-]+\\.example\\.com(:443)?$"],
    }))
    .unwrap()
}

/// Why the secretreader pins refuse a profile whose cluster is at `server` with `config`.
fn refused(server: &str, config: Value) -> InvalidReason {
    (secretreader_pins().check("p", PROFILE, &cluster(server, config))).unwrap_err()
}

fn own_config() -> Value {
    json!({"clusterName": "member2", "inventory": "inventory", "region": "eu-west"})
}

#[test]
fn a_provider_file_carries_the_pins_beside_upstreams_keys() {
    let entry = |server: &str| {
        json!({"providers": [{"name": "secretreader",
            "execConfig": {"command": "/bin/secretreader-plugin"},
            "profileSourcedCLIArgsPolicy": "Ignore",
            "profileConfigPins": {"clusterName": "$(PROFILE_NAME)"},
            "serverPatterns": [server]}]})
        .to_string()
    };
    let file = super::super::ProviderFile::parse(entry("^https://x$").as_bytes()).unwrap();
    let pins = &file.provider("secretreader").unwrap().pins;
    assert_eq!(
        pins.config.get("clusterName"),
        Some(&ConfigPin::Equals(PROFILE_NAME_VAR.to_owned()))
    );
    assert_eq!(pins.server_patterns[0].as_str(), "^https://x$");
    let err = super::super::ProviderFile::parse(entry("https://x").as_bytes())
        .unwrap_err()
        .to_string();
    assert!(err.contains("must be anchored"), "{err}");
}

#[test]
fn no_pins_pin_nothing() {
    let none = pins(json!({})).unwrap();
    let any = cluster("https://attacker", json!({"clusterName": "member1"}));
    assert_eq!(none.check("p", PROFILE, &any), Ok(()));
}

#[test]
fn a_profile_that_keeps_every_pin_is_served() {
    let own = cluster("https://m2.example.com:443", own_config());
    assert_eq!(secretreader_pins().check("p", PROFILE, &own), Ok(()));
}

#[rstest]
#[case::attacker("https://attacker.test")]
#[case::suffix("https://m2.example.com.attacker.test")]
#[case::userinfo("https://m2.example.com@attacker.test")]
#[case::trailing_newline("https://m2.example.com\n")]
#[case::other_port("https://m2.example.com:6443")]
fn a_server_outside_the_patterns_is_forbidden(#[case] server: &str) {
    let err = refused(server, own_config());
    assert_eq!(err.condition_reason(), "EndpointForbidden", "{err}");
    assert!(
        err.to_string()
            .contains(r#"serverPatterns ["^https://[a-z0-9.-]+\\.example\\.com(:443)?$"]"#),
        "{err}"
    );
}

#[test]
fn a_proxy_is_refused_unless_a_proxy_pattern_allows_it() {
    let mut proxied = cluster("https://m2.example.com", own_config());
    proxied.proxy_url = Some("http://attacker.test:3128".into());
    let err = secretreader_pins()
        .check("p", PROFILE, &proxied)
        .unwrap_err();
    assert_eq!(err.condition_reason(), "EndpointForbidden");
    assert!(err.to_string().contains("proxyPatterns"), "{err}");
    let mut allowing = secretreader_pins();
    allowing.proxy_patterns = vec![AnchoredPattern::new("^http://proxy\\.corp:3128$").unwrap()];
    assert!(allowing.check("p", PROFILE, &proxied).is_err());
    proxied.proxy_url = Some("http://proxy.corp:3128".into());
    assert_eq!(allowing.check("p", PROFILE, &proxied), Ok(()));
}

#[rstest]
#[case::another_members_cluster_name(json!({"clusterName": "member1", "inventory": "inventory",
                         "region": "eu-west"}),
    "\"clusterName\" to \"member2\"; profile inventory/member2 sets \"member1\"")]
#[case::extra_key(json!({"clusterName": "member2", "inventory": "inventory",
                         "region": "eu-west", "namespace": "kube-system"}), "sets \"namespace\"")]
#[case::missing_key(json!({"clusterName": "member2", "inventory": "inventory"}), "sets nothing")]
#[case::not_a_string(json!({"clusterName": ["member2"], "inventory": "inventory",
                            "region": "eu-west"}), "[\"member2\"]")]
#[case::pattern_broken(json!({"clusterName": "member2", "inventory": "inventory",
                              "region": "ap-east"}), "the pattern")]
#[case::namespace(json!({"clusterName": "member2", "inventory": "other",
                         "region": "eu-west"}), "\"inventory\" to \"inventory\"")]
#[case::not_an_object(json!("member2"), "not an object")]
fn a_config_outside_the_pins_is_invalid(#[case] config: Value, #[case] says: &str) {
    let err = refused("https://m2.example.com", config);
    assert_eq!(err.condition_reason(), "DefinitionInvalid");
    assert!(err.to_string().contains(says), "{err}");
}

#[test]
fn a_missing_extension_breaks_a_config_pin() {
    let bare: ProfileCluster =
        serde_json::from_value(json!({"server": "https://m2.example.com"})).unwrap();
    let err = secretreader_pins().check("p", PROFILE, &bare).unwrap_err();
    assert_eq!(err.condition_reason(), "DefinitionInvalid");
}

#[test]
fn an_alternation_is_anchored_at_both_ends() {
    let pattern = AnchoredPattern::new("^a|b$").unwrap();
    assert!(pattern.matches("a") && pattern.matches("b"));
    assert!(!pattern.matches("a-and-more") && !pattern.matches("more-b"));
    let multiline = AnchoredPattern::new("^(?m)x$").unwrap();
    assert!(!multiline.matches("x\nhttps://attacker"));
}

#[rstest]
#[case::unanchored_start(json!({"serverPatterns": ["https://x$"]}), "anchored")]
#[case::unanchored_end(json!({"serverPatterns": ["^https://x"]}), "anchored")]
#[case::escaped_end(json!({"serverPatterns": ["^https://x\\$"]}), "anchored")]
#[case::not_a_regex(json!({"serverPatterns": ["^(https$"]}), "not a valid regular expression")]
#[case::unknown_variable(json!({"profileConfigPins": {"clusterName": "$(PROFILE)"}}),
                         "names a variable")]
#[case::pin_shape(json!({"profileConfigPins": {"clusterName": 7}}), "string or")]
#[case::pin_object(json!({"profileConfigPins": {"clusterName": {"regex": "^x$"}}}), "string or")]
#[case::pin_pattern(json!({"profileConfigPins": {"clusterName": {"pattern": "x"}}}), "anchored")]
fn unusable_pins_are_refused(#[case] value: Value, #[case] says: &str) {
    let err = pins(value).unwrap_err().to_string();
    assert!(err.contains(says), "{err}");
}
