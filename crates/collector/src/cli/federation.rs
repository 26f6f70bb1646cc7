//! The flags of federated members: whose tokens the control plane mints for them.

use std::time::Duration;

use clap::Args;
use member_client::federated::{DEFAULT_AUDIENCE_PREFIX, FederatedConfig};

/// Federated members ([`cluster_registry::federation`]): the member trusts the control
/// plane's ServiceAccount issuer, and no member credential is stored anywhere.
#[derive(Clone, Debug, Args)]
pub struct FederationArgs {
    /// Mint the credential of every federated member (a definition annotated
    /// `tether.io/credential: federated`) as this ServiceAccount of the control plane
    /// (`NAMESPACE/NAME`, usually the collector's own): one TokenRequest per member, with the
    /// audience `--federated-audience-prefix` followed by the member's name, so a token works
    /// on that member only. The collector's control-plane credential needs `create` on that
    /// ServiceAccount's `serviceaccounts/token` and nothing more. Without it, federated
    /// members are `DefinitionInvalid`.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = service_account)]
    pub federated_service_account: Option<(String, String)>,

    /// What a federated member's audience starts with; the member's name follows. Each
    /// member's `AuthenticationConfiguration` lists its own audience.
    #[arg(long, default_value = DEFAULT_AUDIENCE_PREFIX, value_parser = audience_prefix)]
    pub federated_audience_prefix: String,

    /// Seconds a federated token is asked to live (TokenRequest grants at least 600). It is
    /// replaced at `--credential-refresh-fraction` of its lifetime and after a 401; a stolen
    /// one works that long, on one member.
    #[arg(
        long,
        default_value_t = 600,
        value_parser = clap::value_parser!(u64).range(600..=86_400)
    )]
    pub federated_token_lifetime: u64,
}

impl FederationArgs {
    /// What the registry mints with, if federated members are served.
    pub fn config(&self) -> Option<FederatedConfig> {
        let (namespace, name) = self.federated_service_account.clone()?;
        Some(
            FederatedConfig::new(namespace, name)
                .audience_prefix(self.federated_audience_prefix.clone())
                .lifetime(Duration::from_secs(self.federated_token_lifetime)),
        )
    }
}

/// `NAMESPACE/NAME`, both DNS labels as Kubernetes names them.
fn service_account(raw: &str) -> Result<(String, String), String> {
    let (namespace, name) = raw
        .split_once('/')
        .ok_or("expected NAMESPACE/NAME, such as tether-system/tether-collector")?;
    let valid = |part: &str| {
        !part.is_empty()
            && part.len() <= 253
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    if !valid(namespace) || !valid(name) {
        return Err(format!(
            "{raw:?} is not NAMESPACE/NAME of lowercase letters, digits, '-' and '.'"
        ));
    }
    Ok((namespace.to_owned(), name.to_owned()))
}

/// Not empty, and printable without spaces: it goes into every token's `aud`.
fn audience_prefix(raw: &str) -> Result<String, String> {
    if raw.is_empty() || raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("an audience prefix is a non-empty string without spaces".to_owned());
    }
    Ok(raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("tether-system/tether-collector", true)]
    #[case("tether-system", false)]
    #[case("/collector", false)]
    #[case("ns/a/b", false)]
    #[case("NS/collector", false)]
    fn a_service_account_is_namespace_slash_name(#[case] raw: &str, #[case] ok: bool) {
        assert_eq!(service_account(raw).is_ok(), ok, "{raw}");
    }

    #[rstest]
    #[case("tether.io/member/", true)]
    #[case("", false)]
    #[case("a b", false)]
    fn an_audience_prefix_has_no_spaces(#[case] raw: &str, #[case] ok: bool) {
        assert_eq!(audience_prefix(raw).is_ok(), ok, "{raw:?}");
    }
}
