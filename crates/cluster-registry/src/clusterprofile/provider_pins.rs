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

use member_client::{exec::Pattern, text::Text};
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
mod tests;
