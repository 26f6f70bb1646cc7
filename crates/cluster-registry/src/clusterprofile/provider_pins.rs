//! What a provider entry pins of the profiles it serves (a Tether extension of upstream's
//! provider file): the plugin `config` a profile may hand over, and the servers (and proxies)
//! its credential may be sent to.
//!
//! Without pins, whoever writes a profile chooses the plugin's `config`, the server and the CA:
//! a secretreader-style plugin asked for `clusterName: <another member>` with `server:
//! https://attacker` fetches that member's token and the collector sends it there. A pin makes
//! the operator's provider entry, not the profile, decide both. A profile that breaks a pin is
//! refused before its plugin runs and before anything is dialled.
//!
//! ```json
//! {"name": "secretreader",
//!  "execConfig": {"command": "/usr/local/bin/secretreader-plugin", "provideClusterInfo": true},
//!  "profileConfigPins": {"clusterName": "$(PROFILE_NAME)",
//!                        "region": {"pattern": "^(eu|us)-[a-z]+-[0-9]$"}},
//!  "serverPatterns": ["^https://[a-z0-9.-]+\\.clusters\\.example\\.com(:443)?$"]}
//! ```

use std::collections::BTreeMap;

use member_client::{Text, exec::Pattern};
use serde::Deserialize;

use super::ProfileCluster;
use crate::InvalidReason;

/// In a pinned value, the name of the profile being read.
pub const PROFILE_NAME_VAR: &str = "$(PROFILE_NAME)";
/// In a pinned value, the namespace (inventory) of the profile being read.
pub const PROFILE_NAMESPACE_VAR: &str = "$(PROFILE_NAMESPACE)";

/// What a provider pins of the profiles it serves. Empty (the default) pins nothing, as
/// upstream's consumers do.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ProfilePins {
    /// `profileConfigPins`: when not empty, the profile's `client.authentication.k8s.io/exec`
    /// extension must be an object holding exactly these keys, each a string its pin accepts.
    #[serde(default, rename = "profileConfigPins")]
    pub config: BTreeMap<String, ConfigPin>,
    /// `serverPatterns`: when not empty, the access provider's `server` must match one.
    #[serde(default, rename = "serverPatterns")]
    pub server_patterns: Vec<AnchoredPattern>,
    /// `proxyPatterns`: with `serverPatterns`, a `proxy-url` must match one of these (none by
    /// default): a proxy of the profile's choosing, under a CA of its choosing, would read the
    /// credential sent to a pinned server.
    #[serde(default, rename = "proxyPatterns")]
    pub proxy_patterns: Vec<AnchoredPattern>,
}

/// What one pinned key of the plugin `config` must hold.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub enum ConfigPin {
    /// Exactly this string, after [`PROFILE_NAME_VAR`] and [`PROFILE_NAMESPACE_VAR`] are
    /// replaced by the profile's name and namespace. Written as a JSON string.
    Equals(String),
    /// A string the pattern matches whole. Written `{"pattern": "^...$"}`.
    Matches(AnchoredPattern),
}

/// A regular expression that must match a whole value, written `^...$` so that a reader of
/// the provider file sees it is anchored; compiled anchored at both ends whatever alternations
/// it holds (`^a|b$` matches `a` and `b`, nothing longer).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct AnchoredPattern(Pattern);

impl std::fmt::Debug for AnchoredPattern {
    // As written, so that a refusal quotes the operator's own pattern.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

/// The profile a pin is checked for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PinnedProfile<'a> {
    /// Its name, which is the member's.
    pub(crate) name: &'a str,
    /// Its namespace.
    pub(crate) namespace: &'a str,
}

impl AnchoredPattern {
    /// Compiles `written`, which must start with `^` and end with `$`.
    ///
    /// # Errors
    /// Not anchored, not a regular expression, or too large.
    pub fn new(written: &str) -> Result<Self, String> {
        if !(written.starts_with('^') && written.ends_with('$') && !written.ends_with("\\$")) {
            return Err(format!(
                "pattern {written:?} must be anchored: start with ^ and end with $"
            ));
        }
        Pattern::new(written).map(Self)
    }

    /// Whether the pattern matches all of `value`.
    pub fn matches(&self, value: &str) -> bool {
        self.0.is_match(value)
    }

    /// The pattern as the operator wrote it.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl TryFrom<String> for AnchoredPattern {
    type Error = String;

    fn try_from(written: String) -> Result<Self, String> {
        Self::new(&written)
    }
}

impl TryFrom<serde_json::Value> for ConfigPin {
    type Error = String;

    fn try_from(value: serde_json::Value) -> Result<Self, String> {
        match value {
            serde_json::Value::String(pinned) => {
                let rest = pinned
                    .replace(PROFILE_NAME_VAR, "")
                    .replace(PROFILE_NAMESPACE_VAR, "");
                match rest.contains("$(") {
                    // A typo such as `$(PROFILE)` would otherwise pin a literal nobody writes.
                    true => Err(format!(
                        "pin {pinned:?} names a variable other than {PROFILE_NAME_VAR} and \
                         {PROFILE_NAMESPACE_VAR}"
                    )),
                    false => Ok(Self::Equals(pinned)),
                }
            }
            serde_json::Value::Object(mut fields) if fields.len() == 1 => {
                match fields.remove("pattern") {
                    Some(serde_json::Value::String(p)) => {
                        AnchoredPattern::new(&p).map(Self::Matches)
                    }
                    _ => Err(pin_shape()),
                }
            }
            _ => Err(pin_shape()),
        }
    }
}

fn pin_shape() -> String {
    "a config pin is a string or {\"pattern\": \"^...$\"}".to_owned()
}

impl ConfigPin {
    fn accepts(&self, value: &str, profile: PinnedProfile<'_>) -> bool {
        match self {
            Self::Equals(pinned) => {
                let want = pinned
                    .replace(PROFILE_NAME_VAR, profile.name)
                    .replace(PROFILE_NAMESPACE_VAR, profile.namespace);
                value == want
            }
            Self::Matches(pattern) => pattern.matches(value),
        }
    }
}

impl ProfilePins {
    /// Whether `cluster`, offered by `profile` to the provider `provider`, keeps every pin.
    ///
    /// # Errors
    /// [`InvalidReason::EndpointForbidden`] for a server or proxy the patterns do not allow,
    /// [`InvalidReason::DefinitionInvalid`] for a plugin `config` the pins do not allow.
    pub(crate) fn check(
        &self,
        provider: &str,
        profile: PinnedProfile<'_>,
        cluster: &ProfileCluster,
    ) -> Result<(), InvalidReason> {
        self.check_config(provider, profile, cluster)?;
        self.check_server(provider, cluster)
    }

    fn check_server(&self, provider: &str, cluster: &ProfileCluster) -> Result<(), InvalidReason> {
        if self.server_patterns.is_empty() {
            return Ok(());
        }
        let forbidden = |why: String| InvalidReason::EndpointForbidden(Text::new(&why).into());
        if !self
            .server_patterns
            .iter()
            .any(|p| p.matches(&cluster.server))
        {
            return Err(forbidden(format!(
                "server {:?} matches none of provider {provider:?}'s serverPatterns {:?}",
                cluster.server, self.server_patterns
            )));
        }
        match cluster.proxy_url.as_deref().filter(|p| !p.is_empty()) {
            Some(proxy) if !self.proxy_patterns.iter().any(|p| p.matches(proxy)) => {
                Err(forbidden(format!(
                    "proxy-url {proxy:?} matches none of provider {provider:?}'s proxyPatterns {:?}",
                    self.proxy_patterns
                )))
            }
            _ => Ok(()),
        }
    }

    fn check_config(
        &self,
        provider: &str,
        profile: PinnedProfile<'_>,
        cluster: &ProfileCluster,
    ) -> Result<(), InvalidReason> {
        if self.config.is_empty() {
            return Ok(());
        }
        let invalid = |why: String| InvalidReason::DefinitionInvalid(Text::new(&why).into());
        let extension = cluster.extension(super::EXEC_EXTENSION);
        let Some(serde_json::Value::Object(config)) = extension else {
            return Err(invalid(format!(
                "provider {provider:?} pins the plugin config {:?}; the profile's {} extension \
                 is not an object",
                self.config.keys().collect::<Vec<_>>(),
                super::EXEC_EXTENSION
            )));
        };
        // Keys nobody pinned are refused: the plugin may read them, and the operator never
        // said what they may hold.
        if let Some(key) = config.keys().find(|k| !self.config.contains_key(*k)) {
            return Err(invalid(format!(
                "provider {provider:?} pins the plugin config to the keys {:?}; the profile sets \
                 {key:?}",
                self.config.keys().collect::<Vec<_>>()
            )));
        }
        for (key, pin) in &self.config {
            let kept = match config.get(key) {
                Some(serde_json::Value::String(value)) => pin.accepts(value, profile),
                _ => false,
            };
            if !kept {
                return Err(invalid(format!(
                    "provider {provider:?} pins the plugin config's {key:?} to {}; profile \
                     {}/{} sets {}",
                    pin.describe(profile),
                    profile.namespace,
                    profile.name,
                    config
                        .get(key)
                        .map_or_else(|| "nothing".to_owned(), ToString::to_string)
                )));
            }
        }
        Ok(())
    }
}

impl ConfigPin {
    fn describe(&self, profile: PinnedProfile<'_>) -> String {
        match self {
            Self::Equals(pinned) => format!(
                "{:?}",
                pinned
                    .replace(PROFILE_NAME_VAR, profile.name)
                    .replace(PROFILE_NAMESPACE_VAR, profile.namespace)
            ),
            Self::Matches(pattern) => format!("the pattern {:?}", pattern.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn another_members_cluster_name_is_refused() {
        let mut config = own_config();
        config["clusterName"] = json!("member1");
        let stolen = cluster("https://m2.example.com", config);
        let err = secretreader_pins()
            .check("secretreader", PROFILE, &stolen)
            .unwrap_err();
        assert_eq!(err.condition_reason(), "DefinitionInvalid");
        let text = err.to_string();
        assert!(
            text.contains("\"clusterName\" to \"member2\"") && text.contains("\"member1\""),
            "{text}"
        );
    }

    #[rstest]
    #[case::attacker("https://attacker.test")]
    #[case::suffix("https://m2.example.com.attacker.test")]
    #[case::userinfo("https://m2.example.com@attacker.test")]
    #[case::trailing_newline("https://m2.example.com\n")]
    #[case::other_port("https://m2.example.com:6443")]
    fn a_server_outside_the_patterns_is_forbidden(#[case] server: &str) {
        let err = secretreader_pins()
            .check("p", PROFILE, &cluster(server, own_config()))
            .unwrap_err();
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
        let err = secretreader_pins()
            .check("p", PROFILE, &cluster("https://m2.example.com", config))
            .unwrap_err();
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
}
