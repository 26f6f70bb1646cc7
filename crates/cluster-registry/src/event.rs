//! What the registry tells its consumer (the collector).

use std::fmt;

use bytes::Bytes;
use member_client::CredentialKey;

use crate::{InvalidReason, MemberSpec};

/// A change to the set of members, sent on the registry's channel in the order it happened.
///
/// Per member the sequence is: `Upserted`, then any number of `CredentialsRotated`, `Upserted`
/// and `Invalid`, then `Removed`. Nothing is sent for a member whose definition did not change
/// in a way its client cares about (a label, an unrelated Secret key).
///
/// `Debug` shows a CA bundle's size, not its text.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryEvent {
    /// A member is new, its definition changed, its CA bundle changed, or it became usable
    /// again after being [`Invalid`](Self::Invalid): (re)build its client with
    /// [`spec.client_config(ca_bundle)`](MemberSpec::client_config).
    ///
    /// The CA bundle travels with the member, as kube-runtime's `Event::Apply` carries the
    /// whole object: the consumer never reads it back from the Secret.
    Upserted {
        /// The member's definition.
        spec: MemberSpec,
        /// The PEM CA bundle from the member's Secret, already checked to be PEM certificates;
        /// `None` means the system roots.
        ca_bundle: Option<Bytes>,
    },
    /// The member's token changed. The [`CredentialCache`](member_client::CredentialCache) entry was
    /// invalidated before this was sent, so the next request already carries the new token;
    /// existing clients need nothing. Useful for metrics (rotation-to-use latency) and logs.
    CredentialsRotated {
        /// The member.
        name: String,
        /// The Secret that changed.
        secret: CredentialKey,
    },
    /// The member's definition is gone: stop its client.
    Removed(String),
    /// The member cannot be used (until its definition or Secret changes). Its token cache
    /// entry was invalidated, so requests through an existing client fail with
    /// `CredentialUnavailable` when the Secret is gone or unusable.
    Invalid {
        /// The member.
        name: String,
        /// Why; maps 1:1 to a condition reason.
        reason: InvalidReason,
    },
}

impl RegistryEvent {
    /// The member this event is about.
    pub fn member(&self) -> &str {
        match self {
            Self::Upserted { spec, .. } => &spec.name,
            Self::CredentialsRotated { name, .. }
            | Self::Removed(name)
            | Self::Invalid { name, .. } => name,
        }
    }
}

impl fmt::Debug for RegistryEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Upserted { spec, ca_bundle } => f
                .debug_struct("Upserted")
                .field("spec", spec)
                .field("ca_bundle_bytes", &ca_bundle.as_ref().map(Bytes::len))
                .finish(),
            Self::CredentialsRotated { name, secret } => f
                .debug_struct("CredentialsRotated")
                .field("name", name)
                .field("secret", secret)
                .finish(),
            Self::Removed(name) => f.debug_tuple("Removed").field(name).finish(),
            Self::Invalid { name, reason } => f
                .debug_struct("Invalid")
                .field("name", name)
                .field("reason", reason)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::validation::MemberEndpoint;

    #[test]
    fn debug_shows_the_size_of_a_ca_bundle_not_its_text() {
        let event = RegistryEvent::Upserted {
            spec: MemberSpec {
                name: "m1".into(),
                endpoint: MemberEndpoint::new("https://h"),
                secret_ref: CredentialKey::new("ns", "m1"),
                federation: None,
                #[cfg(feature = "minting")]
                mint_request: None,
            },
            ca_bundle: Some(Bytes::from_static(b"-----BEGIN CERTIFICATE-----")),
        };
        let printed = format!("{event:?}");
        assert!(printed.contains("ca_bundle_bytes: Some(27)"), "{printed}");
        assert!(!printed.contains("BEGIN"), "{printed}");
    }
}
