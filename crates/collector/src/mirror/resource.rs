//! Which kinds are mirrored from every member, named `group/version/resource`.

use std::{fmt, str::FromStr};

use kube::discovery::ApiResource;

/// A resource to mirror, e.g. `apps/v1/deployments`; the core group is written `v1/nodes` or
/// `core/v1/nodes`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MirroredResource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
}

/// Why a `--mirror` value was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseResourceError {
    /// Not `group/version/resource` in lowercase.
    #[error("{0:?} is not group/version/resource (e.g. apps/v1/deployments or v1/configmaps)")]
    Syntax(String),
    /// A kind that holds credentials or answers access questions: mirroring it would publish
    /// members' secrets through the read API.
    #[error("{resource} may not be mirrored: {why}")]
    Denied {
        /// The refused `group/version/resource`.
        resource: String,
        /// Why this kind is on the deny list.
        why: &'static str,
    },
}

/// Kinds `--mirror` refuses, by (group, resource, why), whatever the version. A whole group is
/// refused when `resource` is `None`.
const DENIED: &[(&str, Option<&str>, &str)] = &[
    ("", Some("secrets"), "Secrets hold tokens and keys"),
    (
        "certificates.k8s.io",
        Some("certificatesigningrequests"),
        "CSRs carry issued client certificates",
    ),
    (
        "authentication.k8s.io",
        None,
        "token reviews and requests carry tokens",
    ),
    (
        "authorization.k8s.io",
        None,
        "access reviews are questions, not state",
    ),
];

impl FromStr for MirroredResource {
    type Err = ParseResourceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.split('/').collect();
        let (group, version, resource) = match parts.as_slice() {
            [version, resource] => ("", *version, *resource),
            ["core", version, resource] => ("", *version, *resource),
            [group, version, resource] => (*group, *version, *resource),
            _ => return Err(ParseResourceError::Syntax(text.to_owned())),
        };
        let valid = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        };
        if !(valid(version) && valid(resource) && (group.is_empty() || valid(group))) {
            return Err(ParseResourceError::Syntax(text.to_owned()));
        }
        if let Some((_, _, why)) = DENIED
            .iter()
            .find(|(g, r, _)| *g == group && r.is_none_or(|r| r == resource))
        {
            return Err(ParseResourceError::Denied {
                resource: text.to_owned(),
                why,
            });
        }
        Ok(Self {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        })
    }
}

impl fmt::Display for MirroredResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{group}/{}/{}", self.version, self.resource)
    }
}

impl MirroredResource {
    /// The URL pieces kube needs to list and watch it. The kind is left empty: watching only
    /// needs the plural, and the objects carry their own `kind`.
    pub(crate) fn api_resource(&self) -> ApiResource {
        let api_version = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version,
            kind: String::new(),
            plural: self.resource.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("apps/v1/deployments", "apps", "v1", "deployments")]
    #[case("v1/configmaps", "", "v1", "configmaps")]
    #[case("core/v1/pods", "", "v1", "pods")]
    #[case(
        "networking.k8s.io/v1/ingresses",
        "networking.k8s.io",
        "v1",
        "ingresses"
    )]
    fn parses(
        #[case] text: &str,
        #[case] group: &str,
        #[case] version: &str,
        #[case] resource: &str,
    ) {
        let want = MirroredResource {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        };
        assert_eq!(text.parse(), Ok(want));
    }

    #[rstest]
    #[case("deployments")]
    #[case("a/b/c/d")]
    #[case("apps//deployments")]
    #[case("Apps/v1/Deployments")]
    #[case("")]
    fn refuses(#[case] text: &str) {
        assert!(text.parse::<MirroredResource>().is_err());
    }

    #[rstest]
    #[case("v1/secrets")]
    #[case("core/v1/secrets")]
    #[case("core/v2/secrets")]
    #[case("certificates.k8s.io/v1/certificatesigningrequests")]
    #[case("authentication.k8s.io/v1/tokenreviews")]
    #[case("authorization.k8s.io/v1/subjectaccessreviews")]
    #[case("authorization.k8s.io/v1/selfsubjectrulesreviews")]
    fn refuses_credentials_and_reviews(#[case] text: &str) {
        let err = text.parse::<MirroredResource>().unwrap_err();
        let denied = matches!(err, ParseResourceError::Denied { .. });
        assert!(denied, "{text}: {err}");
        let message = err.to_string();
        assert!(message.starts_with(&format!("{text} may not be mirrored: ")));
    }

    #[test]
    fn a_secrets_lookalike_in_another_group_is_allowed() {
        assert!("example.com/v1/secrets".parse::<MirroredResource>().is_ok());
    }

    #[test]
    fn displays_core_explicitly() {
        let pods: MirroredResource = "v1/pods".parse().unwrap();
        assert_eq!(pods.to_string(), "core/v1/pods");
    }
}
