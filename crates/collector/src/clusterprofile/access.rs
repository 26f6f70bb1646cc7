//! [`ProfileAccess`]: what a member's definition says about reaching it, as a published profile
//! hands it on. It holds no credential, only where the credential is.

use base64::Engine as _;
use cluster_registry::{
    MemberSpec,
    karmada::LocalSecretReference,
    names::{is_dns1123_label, is_dns1123_subdomain},
};

/// Where a member's apiserver is, how to verify it, and which control-plane Secret holds its
/// credential: the `tether` access provider of its profile.
///
/// Built once per definition (an `Upserted` event), so the CA is encoded once, not per write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProfileAccess {
    /// The apiserver's URL.
    pub(crate) server: String,
    /// Base64 of the PEM CA bundle; `None` means the system roots.
    pub(crate) certificate_authority_data: Option<String>,
    /// The name the serving certificate is verified against, when not the URL's host.
    pub(crate) tls_server_name: Option<String>,
    /// The proxy the member is reached through.
    pub(crate) proxy_url: Option<String>,
    /// The Secret `tether-credential` reads the credential from, when it is a real
    /// control-plane Secret.
    pub(crate) secret_ref: Option<LocalSecretReference>,
}

impl ProfileAccess {
    /// The access `spec` and its CA bundle (PEM) describe.
    ///
    /// NOTE: `insecure_skip_tls_verify` is not handed on. `--allow-insecure-members` is this
    /// collector's decision; a consumer of the inventory verifies the member (and fails) unless
    /// it decides otherwise itself.
    pub(crate) fn of(spec: &MemberSpec, ca_bundle: Option<&[u8]>) -> Self {
        Self {
            server: spec.endpoint.url.clone(),
            certificate_authority_data: ca_bundle
                .filter(|pem| !pem.is_empty())
                .map(|pem| base64::engine::general_purpose::STANDARD.encode(pem)),
            tls_server_name: spec.endpoint.tls_server_name.clone(),
            proxy_url: spec.endpoint.proxy_url.clone(),
            secret_ref: secret_in_control_plane(&spec.secret_ref),
        }
    }
}

/// The Secret a [`CredentialKey`](member_client::CredentialKey) names, if it names one in the control
/// plane. Sources that keep a credential elsewhere key it under a namespace that is no
/// namespace name: `""` for member files (the name is a path), `clusterprofile:<ns>` for
/// profile members. Handing those on would send `tether-credential` after a Secret that does
/// not exist, or worse, one that happens to.
fn secret_in_control_plane(key: &member_client::CredentialKey) -> Option<LocalSecretReference> {
    (is_dns1123_label(&key.namespace) && is_dns1123_subdomain(&key.name)).then(|| {
        LocalSecretReference {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::{CredentialKey, validation::MemberEndpoint};
    use rstest::rstest;

    fn spec(secret_ref: CredentialKey) -> MemberSpec {
        MemberSpec {
            name: "member1".into(),
            endpoint: MemberEndpoint {
                url: "https://10.0.0.1:6443".into(),
                insecure_skip_tls_verify: true,
                proxy_url: Some("http://proxy:3128".into()),
                tls_server_name: Some("api.member1".into()),
            },
            secret_ref,
            federation: None,
            mint_request: None,
        }
    }

    #[test]
    fn carries_the_endpoint_the_ca_as_base64_and_the_tls_settings() {
        let karmada = spec(CredentialKey::new("karmada-cluster", "m1"));
        let access = ProfileAccess::of(&karmada, Some(b"PEM"));
        assert_eq!(access.server, "https://10.0.0.1:6443");
        assert_eq!(access.certificate_authority_data.as_deref(), Some("UEVN"));
        assert_eq!(access.tls_server_name.as_deref(), Some("api.member1"));
        assert_eq!(access.proxy_url.as_deref(), Some("http://proxy:3128"));
        let none = ProfileAccess::of(&spec(CredentialKey::new("ns", "m1")), None);
        assert_eq!(none.certificate_authority_data, None);
    }

    #[rstest]
    #[case::karmada_secret(CredentialKey::new("karmada-cluster", "member1"), true)]
    #[case::dotted_secret_name(CredentialKey::new("argocd", "cluster-10.0.0.1"), true)]
    #[case::member_file(CredentialKey::new("", "/etc/tether/members/m1.yaml"), false)]
    #[case::profile_member(CredentialKey::new("clusterprofile:fleet", "member1"), false)]
    #[case::upper_case(CredentialKey::new("Fleet", "member1"), false)]
    #[case::path_as_name(CredentialKey::new("ns", "a/b"), false)]
    #[case::long_namespace(CredentialKey::new("a".repeat(64), "m"), false)]
    fn only_a_real_control_plane_secret_is_handed_on(
        #[case] key: CredentialKey,
        #[case] handed_on: bool,
    ) {
        let access = ProfileAccess::of(&spec(key.clone()), None);
        assert_eq!(access.secret_ref.is_some(), handed_on, "{key:?}");
        if let Some(secret) = access.secret_ref {
            assert_eq!((secret.namespace, secret.name), (key.namespace, key.name));
        }
    }
}
