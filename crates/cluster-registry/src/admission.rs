//! [`Admission`]: what a definition may make Tether do, decided once for every source.
//!
//! A source reads a definition as its author wrote it; whether the author may point a token
//! at that endpoint, skip TLS, name that Secret or use that name is decided here, so that a
//! `Cluster`, an Argo CD Secret and a member file get the same answer.

use std::collections::BTreeSet;

use member_client::{text::Text, validation, validation::EndpointPolicy};

use crate::{InvalidReason, MemberDefinition, MemberSpec, names::is_dns1123_subdomain};

/// The Secret namespace a Karmada `secretRef` may name by default: where `karmadactl join`
/// puts member Secrets.
pub const DEFAULT_SECRET_NAMESPACE: &str = "karmada-cluster";

/// The rules a definition must pass beyond its shape.
#[derive(Clone, Debug)]
pub(crate) struct Admission {
    pub(crate) policy: EndpointPolicy,
    /// The namespaces a Karmada `secretRef` may name.
    pub(crate) secret_namespaces: BTreeSet<String>,
}

impl Default for Admission {
    fn default() -> Self {
        Self {
            policy: EndpointPolicy::default(),
            secret_namespaces: BTreeSet::from([DEFAULT_SECRET_NAMESPACE.to_owned()]),
        }
    }
}

impl Admission {
    /// `definition`, with a name safe to use as a label and its spec refused if it breaks a
    /// rule. `karmada` says whether its `secretRef` was chosen by the definition's author
    /// (Argo CD and file definitions hold their credential themselves).
    pub(crate) fn admit(&self, karmada: bool, definition: MemberDefinition) -> MemberDefinition {
        if !is_dns1123_subdomain(&definition.name) {
            return MemberDefinition {
                spec: Err(InvalidReason::DefinitionInvalid(format!(
                    "the name {:?} is not a DNS-1123 subdomain (lower-case letters, digits, \
                     '-' and '.', at most 253 characters)",
                    Text::new(&definition.name).as_str()
                ))),
                name: stand_in_name(&definition.name),
            };
        }
        let spec = definition.spec.and_then(|spec| self.check(karmada, spec));
        MemberDefinition {
            name: definition.name,
            spec,
        }
    }

    fn check(&self, karmada: bool, spec: MemberSpec) -> Result<MemberSpec, InvalidReason> {
        let namespace = &spec.secret_ref.namespace;
        // A federated member reads no Secret; the member table judges its key.
        let reads_secret = spec.federation.is_none();
        if karmada && reads_secret && !self.secret_namespaces.contains(namespace) {
            return Err(InvalidReason::SecretForbidden(format!(
                "secretRef names namespace {:?}, which is not one of the Secret namespaces \
                 (--secret-namespace: {}): the collector reads no Secret there",
                Text::new(namespace).as_str(),
                self.secret_namespaces
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        validation::route(&self.policy, &spec.endpoint)?;
        if spec.endpoint.insecure_skip_tls_verify {
            tracing::warn!(
                member = %spec.name,
                "the member skips TLS verification (allowed by --allow-insecure-members): \
                 anyone on the path can read its token"
            );
        }
        Ok(spec)
    }
}

/// The name an invalid-named definition is reported under: stable for the same input, safe,
/// and in a `invalid-name-` space that a real member is unlikely to hold.
fn stand_in_name(raw: &str) -> String {
    // FNV-1a: stable across runs and Rust versions, unlike `DefaultHasher`.
    let hash = raw.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("invalid-name-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::{CredentialKey, validation::MemberEndpoint};
    use rstest::rstest;

    fn definition(name: &str, endpoint: &str, namespace: &str, insecure: bool) -> MemberDefinition {
        MemberDefinition {
            name: name.into(),
            spec: Ok(MemberSpec {
                name: name.into(),
                endpoint: MemberEndpoint {
                    url: endpoint.into(),
                    insecure_skip_tls_verify: insecure,
                    proxy_url: None,
                    tls_server_name: None,
                },
                secret_ref: CredentialKey::new(namespace, name),
                federation: None,
                #[cfg(feature = "minting")]
                mint_request: None,
            }),
        }
    }

    fn reason(karmada: bool, def: MemberDefinition) -> Option<&'static str> {
        Admission::default()
            .admit(karmada, def)
            .spec
            .err()
            .map(|r| r.condition_reason())
    }

    /// `name` at `endpoint`, its Secret in Karmada's namespace, TLS verified.
    fn at(name: &str, endpoint: &str) -> MemberDefinition {
        definition(name, endpoint, "karmada-cluster", false)
    }

    #[rstest]
    #[case::ok(at("m1", "https://10.0.0.1"), None)]
    #[case::metadata(at("m1", "https://169.254.169.254"), Some("EndpointForbidden"))]
    #[case::loopback(at("m1", "https://127.0.0.1:6443"), Some("EndpointForbidden"))]
    #[case::insecure(
        definition("m1", "https://10.0.0.1", "karmada-cluster", true),
        Some("EndpointForbidden")
    )]
    #[case::http(at("m1", "http://10.0.0.1"), Some("EndpointForbidden"))]
    #[case::other_namespace(
        definition("m1", "https://10.0.0.1", "kube-system", false),
        Some("SecretForbidden")
    )]
    #[case::quote(at("m\"1", "https://10.0.0.1"), Some("DefinitionInvalid"))]
    #[case::newline(at("m1\nup 1", "https://10.0.0.1"), Some("DefinitionInvalid"))]
    #[case::upper(at("Member1", "https://10.0.0.1"), Some("DefinitionInvalid"))]
    fn definitions_are_admitted_or_refused(
        #[case] def: MemberDefinition,
        #[case] want: Option<&str>,
    ) {
        assert_eq!(reason(true, def.clone()), want);
        // Only Karmada's secret refs are limited to the Secret namespaces.
        let elsewhere = want.filter(|&w| w != "SecretForbidden");
        assert_eq!(reason(false, def), elsewhere);
    }

    #[test]
    fn a_bad_name_is_reported_under_a_safe_stable_stand_in() {
        let admit = |name| Admission::default().admit(true, at(name, "https://h"));
        let a = admit("evil\"} 1\nx");
        assert!(is_dns1123_subdomain(&a.name), "{}", a.name);
        assert_eq!(a.name, admit("evil\"} 1\nx").name);
        assert_ne!(a.name, admit("evil2").name);
        let detail = a.spec.unwrap_err().to_string();
        assert!(!detail.contains('\n'), "{detail}");
    }
}
