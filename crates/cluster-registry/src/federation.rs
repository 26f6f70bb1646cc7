//! Federated members: their credential is minted by the control plane for the member's own
//! audience ([`member_client::federated`]), so no Secret holds one.
//!
//! A definition asks with the annotation [`CREDENTIAL_ANNOTATION`]` = "federated"`; the
//! member's CA bundle, which no Secret carries then, is the PEM in [`CA_BUNDLE_ANNOTATION`].
//! Which audience the token carries is not the definition's to say: it is derived from the
//! member's name, so a definition cannot obtain a token another member accepts.

use std::collections::BTreeMap;

use bytes::Bytes;
use member_client::{text::Text, validation};

use crate::InvalidReason;

/// Says how the member authenticates; `federated` is the one value known.
pub const CREDENTIAL_ANNOTATION: &str = "tether.io/credential";

/// The value of [`CREDENTIAL_ANNOTATION`] that asks for a federated credential.
pub const FEDERATED: &str = "federated";

/// The PEM CA bundle that verifies a federated member's serving certificate (default: the
/// system roots).
pub const CA_BUNDLE_ANNOTATION: &str = "tether.io/ca-bundle";

/// What a federated member's definition says besides its endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Federation {
    /// The PEM CA bundle of the member's apiserver; `None`: the system roots.
    pub ca_bundle: Option<Bytes>,
}

impl Federation {
    /// A federated member verified with `ca_bundle` (PEM), or with the system roots.
    pub fn new(ca_bundle: Option<Bytes>) -> Self {
        Self { ca_bundle }
    }
}

/// The federation a definition's `annotations` ask for: `None` when they do not.
///
/// # Errors
/// [`InvalidReason::DefinitionInvalid`] for another credential value, or a CA bundle that is
/// not PEM certificates.
pub(crate) fn from_annotations(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<Federation>, InvalidReason> {
    let Some(value) = annotations.get(CREDENTIAL_ANNOTATION) else {
        return Ok(None);
    };
    if value.trim() != FEDERATED {
        return Err(InvalidReason::DefinitionInvalid(format!(
            "{CREDENTIAL_ANNOTATION} is {:?}; the only value known is {FEDERATED:?}",
            Text::new(value).as_str()
        )));
    }
    let ca_bundle = match annotations.get(CA_BUNDLE_ANNOTATION) {
        None => None,
        Some(pem) => {
            validation::ca_bundle(pem.as_bytes()).map_err(|err| {
                InvalidReason::DefinitionInvalid(format!(
                    "{CA_BUNDLE_ANNOTATION}: {}",
                    err.detail()
                ))
            })?;
            Some(Bytes::from(pem.clone()))
        }
    };
    Ok(Some(Federation { ca_bundle }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_ca::ca_pem;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn no_annotation_asks_for_nothing() {
        assert_eq!(from_annotations(&annotations(&[])), Ok(None));
    }

    #[test]
    fn federated_with_a_ca_bundle_keeps_the_bundle() {
        let pem = ca_pem();
        let asked = from_annotations(&annotations(&[
            (CREDENTIAL_ANNOTATION, "federated"),
            (CA_BUNDLE_ANNOTATION, &pem),
        ]));
        assert_eq!(asked, Ok(Some(Federation::new(Some(Bytes::from(pem))))));
    }

    #[test]
    fn an_unknown_credential_value_is_refused() {
        let err = from_annotations(&annotations(&[(CREDENTIAL_ANNOTATION, "token\nforged")]))
            .unwrap_err();
        assert_eq!(err.condition_reason(), "DefinitionInvalid");
        assert!(!err.to_string().contains('\n'), "{err}");
    }

    #[test]
    fn a_ca_bundle_that_is_not_pem_is_refused() {
        let err = from_annotations(&annotations(&[
            (CREDENTIAL_ANNOTATION, "federated"),
            (CA_BUNDLE_ANNOTATION, "not a certificate"),
        ]))
        .unwrap_err();
        assert_eq!(err.condition_reason(), "DefinitionInvalid");
    }
}
