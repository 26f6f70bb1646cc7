//! [`MemberSpec`]: one member cluster as a source defines it.

use std::sync::Arc;

use bytes::Bytes;
use member_client::{MemberClientConfig, SecretRef, SourceError, TokenCache};

use crate::InvalidReason;

/// One member cluster, as a source (Karmada `Cluster`, Argo CD cluster Secret, member file)
/// defines it. It holds no credential: the token and CA bundle are read through
/// [`secret_ref`](Self::secret_ref) from the registry's [`TokenCache`](member_client::TokenCache).
///
/// ```
/// use cluster_registry::MemberSpec;
/// use member_client::SecretRef;
///
/// let spec = MemberSpec {
///     name: "member1".into(),
///     api_endpoint: "https://10.0.0.1:6443".into(),
///     secret_ref: SecretRef::new("karmada-cluster", "member1"),
///     insecure_skip_tls_verify: false,
///     proxy_url: None,
/// };
/// let config = spec.client_config(None);
/// assert_eq!(config.member, "member1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSpec {
    /// The member's name, unique in the registry.
    pub name: String,
    /// The member apiserver's URL, `https://host[:port][/path]`.
    pub api_endpoint: String,
    /// Where its token and CA bundle live; the [`TokenCache`](member_client::TokenCache) key.
    pub secret_ref: SecretRef,
    /// Skip verifying the member's serving certificate.
    pub insecure_skip_tls_verify: bool,
    /// An `http://` or `https://` proxy to reach the member through.
    pub proxy_url: Option<String>,
}

impl MemberSpec {
    /// The [`MemberClientConfig`] for this member, verifying it with `ca_bundle` (PEM; the
    /// system roots when `None`). Take the bundle from the credential
    /// ([`Credential::ca_bundle`](member_client::Credential::ca_bundle)).
    pub fn client_config(&self, ca_bundle: Option<Bytes>) -> MemberClientConfig {
        let mut config = MemberClientConfig::new(
            self.name.clone(),
            self.api_endpoint.clone(),
            self.secret_ref.clone(),
        );
        config.ca_bundle = ca_bundle;
        config.insecure_skip_tls_verify = self.insecure_skip_tls_verify;
        config.proxy_url = self.proxy_url.clone();
        config
    }

    /// [`client_config`](Self::client_config) with the CA bundle of the member's current
    /// credential, read through `tokens` (a cache hit, or one fetch from the Secret store).
    ///
    /// # Errors
    /// The credential is unusable (no Secret, no token, a CA that is not PEM, …).
    pub async fn client_config_from(
        &self,
        tokens: &TokenCache,
    ) -> Result<MemberClientConfig, Arc<SourceError>> {
        let credential = tokens.get(&self.secret_ref).await?;
        Ok(self.client_config(credential.ca_bundle().cloned()))
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

/// Checks that `endpoint` is an `https://` URL with a host.
pub(crate) fn check_endpoint(endpoint: &str) -> Result<(), InvalidReason> {
    let invalid = |why: &str| {
        Err(InvalidReason::EndpointInvalid(format!(
            "{endpoint:?} {why}"
        )))
    };
    if endpoint.trim().is_empty() {
        return Err(InvalidReason::EndpointInvalid("no API endpoint".into()));
    }
    let Ok(uri) = endpoint.parse::<http::Uri>() else {
        return invalid("is not a URL");
    };
    match uri.scheme_str() {
        Some("https") => {}
        Some(_) => return invalid("is not an https URL"),
        None => return invalid("has no scheme; expected https://host[:port]"),
    }
    if uri.host().is_none_or(str::is_empty) {
        return invalid("has no host");
    }
    Ok(())
}

/// Checks that `proxy` is an `http://` or `https://` URL, as member-client requires.
pub(crate) fn check_proxy(proxy: &str) -> Result<(), InvalidReason> {
    let invalid = |why: &str| Err(InvalidReason::ProxyInvalid(format!("{proxy:?} {why}")));
    let Ok(uri) = proxy.parse::<http::Uri>() else {
        return invalid("is not a URL");
    };
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some_and(|h| !h.is_empty()) => Ok(()),
        Some("http" | "https") => invalid("has no host"),
        _ => invalid("is not an http:// or https:// URL"),
    }
}

/// Builds a [`MemberSpec`] after checking its endpoint and proxy. An empty proxy means none.
pub(crate) fn checked_spec(
    name: String,
    api_endpoint: String,
    secret_ref: SecretRef,
    insecure_skip_tls_verify: bool,
    proxy_url: Option<String>,
) -> Result<MemberSpec, InvalidReason> {
    check_endpoint(&api_endpoint)?;
    let proxy_url = proxy_url.filter(|p| !p.trim().is_empty());
    if let Some(proxy) = &proxy_url {
        check_proxy(proxy)?;
    }
    Ok(MemberSpec {
        name,
        api_endpoint,
        secret_ref,
        insecure_skip_tls_verify,
        proxy_url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::https("https://10.0.0.1:6443")]
    #[case::https_with_path("https://lb.example.com/k8s/clusters/c-1")]
    #[case::ipv6("https://[::1]:6443")]
    fn https_endpoints_pass(#[case] endpoint: &str) {
        assert_eq!(check_endpoint(endpoint), Ok(()));
    }

    #[rstest]
    #[case::empty("", "no API endpoint")]
    #[case::http("http://10.0.0.1:6443", "not an https URL")]
    #[case::no_scheme("10.0.0.1:6443", "no scheme")]
    #[case::not_a_url("https://exa mple", "not a URL")]
    #[case::ftp("ftp://example.com", "not an https URL")]
    fn other_endpoints_are_invalid(#[case] endpoint: &str, #[case] want: &str) {
        let Err(InvalidReason::EndpointInvalid(detail)) = check_endpoint(endpoint) else {
            panic!("{endpoint:?} must be refused");
        };
        assert!(detail.contains(want), "{detail}");
    }

    #[rstest]
    #[case::http("http://proxy:3128", true)]
    #[case::https("https://proxy:3128", true)]
    #[case::socks("socks5://proxy:1080", false)]
    #[case::no_scheme("proxy:3128", false)]
    fn proxies_must_be_http(#[case] proxy: &str, #[case] ok: bool) {
        assert_eq!(check_proxy(proxy).is_ok(), ok, "{proxy}");
    }

    #[test]
    fn client_config_carries_every_field() {
        let spec = checked_spec(
            "m".into(),
            "https://h:1".into(),
            SecretRef::new("ns", "s"),
            true,
            Some("http://p:3128".into()),
        )
        .unwrap();
        let config = spec.client_config(Some(Bytes::from_static(b"pem")));
        assert_eq!(config.api_endpoint, "https://h:1");
        assert!(config.insecure_skip_tls_verify);
        assert_eq!(config.proxy_url.as_deref(), Some("http://p:3128"));
        assert_eq!(config.secret_ref, SecretRef::new("ns", "s"));
        assert_eq!(config.ca_bundle.as_deref(), Some(&b"pem"[..]));
    }

    #[test]
    fn empty_proxy_means_none() {
        let spec = checked_spec(
            "m".into(),
            "https://h".into(),
            SecretRef::new("", "f"),
            false,
            Some(" ".into()),
        )
        .unwrap();
        assert_eq!(spec.proxy_url, None);
    }
}
