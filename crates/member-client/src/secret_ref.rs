//! The key a credential is cached under.

use std::fmt;

/// Names the Kubernetes Secret (or, for file-backed credentials, the file) that holds a member
/// cluster's bearer token. It is the [`CredentialCache`](crate::CredentialCache) key.
///
/// Two members that reference the same Secret share one cache entry, so one rotation of that
/// Secret is fetched once for both.
///
/// ```
/// use member_client::CredentialKey;
/// let key = CredentialKey::new("karmada-cluster", "member1");
/// assert_eq!(key.to_string(), "karmada-cluster/member1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CredentialKey {
    /// Namespace of the Secret. Empty for sources that have no namespaces (a token file).
    pub namespace: String,
    /// Name of the Secret, or the path of a token file.
    pub name: String,
}

impl CredentialKey {
    /// A reference to the Secret `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for CredentialKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}
