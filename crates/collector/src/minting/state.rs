//! [`MintState`]: what a member's token chain last said, as its conditions show it.

use crate::reason::Reason;

/// The state of a member's token chain; anything but [`Fine`](Self::Fine) makes
/// `CredentialsValid` False with its reason, whatever the probe says, since the credential
/// works now but will not for long.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum MintState {
    /// Not minting, or the last mint (or the current token) is fine.
    #[default]
    Fine,
    /// The token in the home expired: the chain cannot go on until a fresh token is written.
    Expired(String),
    /// The last mint failed; the current token is used until it expires.
    Failed(String),
    /// The operator's bounds forbid what the definition asks, or what was minted: nothing is
    /// minted (or written) until the definition, the flags or the token change.
    Refused(Refusal),
}

impl MintState {
    /// The condition reason, when not fine.
    pub(crate) fn reason(&self) -> Option<&'static str> {
        match self {
            Self::Fine => None,
            Self::Expired(_) => Some(Reason::TokenExpired.name()),
            Self::Failed(_) => Some(Reason::RotationFailed.name()),
            Self::Refused(refusal) => Some(refusal.kind.reason()),
        }
    }

    /// A sentence for `kubectl describe`, when not fine.
    pub(crate) fn message(&self) -> Option<&str> {
        match self {
            Self::Fine => None,
            Self::Expired(message) | Self::Failed(message) => Some(message),
            Self::Refused(refusal) => Some(&refusal.message),
        }
    }
}

/// Why the operator's bounds stop a member's minting, and a sentence saying how to fix it.
/// The sentence never holds a token: only claims (`sub`, `iss`) and definition text, the
/// latter through [`member_client::text::Text`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// Which bound.
    pub(crate) kind: RefusalKind,
    /// For `kubectl describe`.
    pub(crate) message: String,
}

/// The bound a refused mint request broke; each is its own condition reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RefusalKind {
    /// The definition asks to be minted for (`"true"`), but the operator mints for no such member
    /// (`--mint-tokens`, `--mint-tokens-for`).
    NotAllowed,
    /// The definition asks for a longer lifetime than `--mint-max-expiration`, or an
    /// audience `--mint-audience` does not list.
    OverCap,
    /// The current token is not a ServiceAccount token that says who it is (a JWT with a
    /// `system:serviceaccount:` `sub` and an `iss`).
    NotMintable,
    /// The current token is another ServiceAccount's than the one the definition names.
    ServiceAccountMismatch,
    /// The minted token's `sub` or `iss` is not the current token's; it was not written.
    MintedTokenMismatch,
}

impl RefusalKind {
    /// The condition and Event reason.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::NotAllowed => Reason::RotationNotAllowed,
            Self::OverCap => Reason::RotationOverCap,
            Self::NotMintable => Reason::TokenNotRotatable,
            Self::ServiceAccountMismatch => Reason::RotationServiceAccountMismatch,
            Self::MintedTokenMismatch => Reason::MintedTokenMismatch,
        }
        .name()
    }
}
