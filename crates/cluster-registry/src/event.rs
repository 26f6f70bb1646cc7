//! What the registry tells its consumer (the collector).

use member_client::SecretRef;

use crate::{InvalidReason, MemberSpec};

/// A change to the set of members, sent on the registry's channel in the order it happened.
///
/// Per member the sequence is: `Upserted`, then any number of `CredentialsRotated`, `Upserted`
/// and `Invalid`, then `Removed`. Nothing is sent for a member whose definition did not change
/// in a way its client cares about (a label, an unrelated Secret key).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryEvent {
    /// A member is new, its definition changed, its CA bundle changed, or it became usable
    /// again after being [`Invalid`](Self::Invalid): (re)build its client from this spec and
    /// the CA in its current credential.
    Upserted(MemberSpec),
    /// The member's token changed. The [`TokenCache`](member_client::TokenCache) entry was
    /// invalidated before this was sent, so the next request already carries the new token;
    /// existing clients need nothing. Useful for metrics (rotation-to-use latency) and logs.
    CredentialsRotated {
        /// The member.
        name: String,
        /// The Secret that changed.
        secret: SecretRef,
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
            Self::Upserted(spec) => &spec.name,
            Self::CredentialsRotated { name, .. }
            | Self::Removed(name)
            | Self::Invalid { name, .. } => name,
        }
    }
}
