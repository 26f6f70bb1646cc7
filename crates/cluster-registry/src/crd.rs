//! The CRDs Tether declares, as `deploy/crds/` holds them, and what they share.

use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Names a Secret in a namespace (Karmada's `LocalSecretReference`; a `ClusterProfile`'s
/// credential reference has the same shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalSecretReference {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

/// `K`'s CRD as YAML, under a header naming `K` (`source`) and the command that writes it to
/// `file` (`crd_gen` with `args`).
pub(crate) fn yaml<K: CustomResourceExt>(
    source: &str,
    args: &str,
    file: &str,
) -> crate::Result<String> {
    let yaml = serde_yaml::to_string(&K::crd()).map_err(crate::Error::CrdYaml)?;
    Ok(format!(
        "# Generated from {source}; do not edit.\n\
         # Regenerate: cargo run -p tether-cluster-registry --example crd_gen{args} > {file}\n\
         {yaml}"
    ))
}

/// Checks that `K`'s CRD is named `name`, is `scope`d, has a status subresource, and that
/// `committed`, the file under `deploy/crds/`, is `generated`.
#[cfg(test)]
pub(crate) fn assert_committed<K: CustomResourceExt>(
    scope: &str,
    name: &str,
    generated: &str,
    committed: &str,
) {
    let crd = K::crd();
    assert_eq!(crd.spec.scope, scope);
    assert_eq!(crd.metadata.name.as_deref(), Some(name));
    let version = &crd.spec.versions[0];
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let regenerate = generated.lines().nth(1).unwrap_or_default();
    assert!(
        committed == generated,
        "the committed CRD is out of date; {regenerate}"
    );
}
