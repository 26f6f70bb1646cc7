//! [`RotationState`]: what a member's token chain last said, as its conditions show it.

/// The state of a member's token chain; anything but [`Fine`](Self::Fine) makes
/// `CredentialsValid` False with its reason, whatever the probe says, since the credential
/// works now but will not for long.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum RotationState {
    /// Not rotating, or the last mint (or the current token) is fine.
    #[default]
    Fine,
    /// The token in the home expired: the chain cannot go on until a fresh token is written.
    Expired(String),
    /// The last mint failed; the current token is used until it expires.
    Failed(String),
}

impl RotationState {
    /// The condition reason, when not fine.
    pub(crate) fn reason(&self) -> Option<&'static str> {
        match self {
            Self::Fine => None,
            Self::Expired(_) => Some("TokenExpired"),
            Self::Failed(_) => Some("RotationFailed"),
        }
    }

    /// A sentence for `kubectl describe`, when not fine.
    pub(crate) fn message(&self) -> Option<&str> {
        match self {
            Self::Fine => None,
            Self::Expired(message) | Self::Failed(message) => Some(message),
        }
    }
}
