//! [`MemberSpec`]: one member cluster as a source defines it.

use bytes::Bytes;
use member_client::{CredentialKey, MemberClientConfig, validation, validation::MemberEndpoint};

#[cfg(feature = "minting")]
use crate::minting::MintRequest;
use crate::{InvalidReason, federation::Federation};

/// One member cluster, as a source (Karmada `Cluster`, Argo CD cluster Secret, member file)
/// defines it. It holds no credential: the token is read through
/// [`secret_ref`](Self::secret_ref) from the registry's [`CredentialCache`](member_client::CredentialCache),
/// and the CA bundle arrives beside the spec in [`Upserted`](crate::RegistryEvent::Upserted).
///
/// ```
/// use cluster_registry::MemberSpec;
/// use member_client::{CredentialKey, validation::MemberEndpoint};
///
/// let spec = MemberSpec {
///     name: "member1".into(),
///     endpoint: MemberEndpoint::new("https://10.0.0.1:6443"),
///     secret_ref: CredentialKey::new("karmada-cluster", "member1"),
///     federation: None,
///     mint_request: None,
/// };
/// let config = spec.client_config(None);
/// assert_eq!(config.member, "member1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSpec {
    /// The member's name, unique in the registry.
    pub name: String,
    /// How to reach it.
    pub endpoint: MemberEndpoint,
    /// Where its token and CA bundle live; the [`CredentialCache`](member_client::CredentialCache) key.
    pub secret_ref: CredentialKey,
    /// `Some` when the control plane mints the member's credential
    /// ([`federation`](crate::federation)): then `secret_ref` is
    /// [`CredentialKey::federated`] of the member's name, and no Secret is read.
    pub federation: Option<Federation>,
    /// Whether Tether mints this member's tokens, and where it writes them
    /// ([`mint_request`](crate::minting)); `None` when the definition does not ask. Only with
    /// the `minting` feature.
    #[cfg(feature = "minting")]
    pub mint_request: Option<Box<MintRequest>>,
}

impl MemberSpec {
    /// The [`MemberClientConfig`] for this member, verifying it with `ca_bundle` (PEM; the
    /// system roots when `None`): the one an [`Upserted`](crate::RegistryEvent::Upserted)
    /// event carries.
    pub fn client_config(&self, ca_bundle: Option<Bytes>) -> MemberClientConfig {
        MemberClientConfig {
            ca_bundle,
            ..MemberClientConfig::new(
                self.name.clone(),
                self.endpoint.clone(),
                self.secret_ref.clone(),
            )
        }
    }
}

/// One definition as a source read it: the member's name and its spec, or why it is unusable.
///
/// The name is known even for an unusable definition, so that its
/// [`Invalid`](crate::RegistryEvent::Invalid) event and state can say which member it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDefinition {
    /// The member's name.
    pub name: String,
    /// The spec, or why there is none.
    pub spec: Result<MemberSpec, InvalidReason>,
}

/// Builds a [`MemberSpec`] after checking the shape of its endpoint and proxy with
/// member-client's [`validation`] rules. An empty proxy means none. Where they may point is
/// the [`Admission`](crate::admission::Admission)'s call, made for every source at once.
pub(crate) fn checked_spec(
    name: String,
    api_endpoint: String,
    secret_ref: CredentialKey,
    insecure_skip_tls_verify: bool,
    proxy_url: Option<String>,
) -> Result<MemberSpec, InvalidReason> {
    validation::endpoint(&api_endpoint)?;
    let proxy_url = proxy_url.filter(|p| !p.trim().is_empty());
    if let Some(proxy) = &proxy_url {
        validation::proxy_url(proxy)?;
    }
    Ok(MemberSpec {
        name,
        endpoint: MemberEndpoint {
            insecure_skip_tls_verify,
            proxy_url,
            ..MemberEndpoint::new(api_endpoint)
        },
        secret_ref,
        federation: None,
        #[cfg(feature = "minting")]
        mint_request: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn spec_with(endpoint: &str, proxy: Option<&str>) -> Result<MemberSpec, InvalidReason> {
        checked_spec(
            "m".into(),
            endpoint.into(),
            CredentialKey::new("ns", "s"),
            true,
            proxy.map(str::to_owned),
        )
    }

    #[rstest]
    #[case::ftp_endpoint("ftp://10.0.0.1:6443", None, "EndpointInvalid")]
    #[case::no_endpoint("", None, "EndpointInvalid")]
    #[case::socks_proxy("https://h", Some("socks5://p:1080"), "ProxyInvalid")]
    fn definitions_are_checked_by_member_clients_rules(
        #[case] endpoint: &str,
        #[case] proxy: Option<&str>,
        #[case] want: &str,
    ) {
        assert_eq!(
            spec_with(endpoint, proxy).unwrap_err().condition_reason(),
            want
        );
    }

    #[test]
    fn client_config_carries_every_field() {
        let spec = spec_with("https://h:1", Some("http://p:3128")).unwrap();
        let config = spec.client_config(Some(Bytes::from_static(b"pem")));
        assert_eq!(config.endpoint.url, "https://h:1");
        assert!(config.endpoint.insecure_skip_tls_verify);
        assert_eq!(config.endpoint.proxy_url.as_deref(), Some("http://p:3128"));
        assert_eq!(config.endpoint, spec.endpoint);
        assert_eq!(config.secret_ref, CredentialKey::new("ns", "s"));
        assert_eq!(config.ca_bundle.as_deref(), Some(&b"pem"[..]));
    }

    #[test]
    fn empty_proxy_means_none() {
        assert_eq!(
            spec_with("https://h", Some(" "))
                .unwrap()
                .endpoint
                .proxy_url,
            None
        );
    }
}
