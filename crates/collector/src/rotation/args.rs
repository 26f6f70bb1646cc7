//! The flags of token rotation.

use std::time::Duration;

use clap::Args;

/// How Tether mints member tokens ([`crate::rotation`]).
#[derive(Clone, Debug, Args)]
pub struct RotationArgs {
    /// Mint and rotate the token of every member whose definition names a ServiceAccount
    /// (`tether.io/rotation-service-account`, or `rotation.serviceAccount` in a member file),
    /// unless it says `tether.io/rotate-tokens: "false"`. Without this flag only members that
    /// say `"true"` are rotated. Only the leader mints (`--leader-elect`).
    #[arg(long, env = "TETHER_ROTATE_TOKENS")]
    pub rotate_tokens: bool,

    /// The share of a minted token's lifetime (from its `iat`/`nbf` to its `exp`, as the
    /// apiserver granted it) after which the next token is minted. At 0.8 a 1 h token is
    /// replaced after 48 min, and a 24 h EKS token after 19.2 h.
    #[arg(long, default_value_t = 0.8, value_parser = rotation_fraction)]
    pub rotation_fraction: f64,

    /// Seconds between attempts after a mint failed (a 403 from the member, say); the
    /// current token stays in use meanwhile.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub rotation_retry_seconds: u64,
}

impl RotationArgs {
    /// The wait after a failed mint.
    pub fn retry(&self) -> Duration {
        Duration::from_secs(self.rotation_retry_seconds)
    }
}

/// A fraction in `(0, 1)`: 1 would mint only once the token is dead.
fn rotation_fraction(raw: &str) -> Result<f64, String> {
    let value: f64 = raw.parse().map_err(|err| format!("{err}"))?;
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err(format!("{value} is not in (0, 1)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fraction_is_strictly_between_zero_and_one() {
        assert_eq!(rotation_fraction("0.8"), Ok(0.8));
        for bad in ["0", "1", "1.5", "-0.1", "x", "NaN"] {
            assert!(rotation_fraction(bad).is_err(), "{bad}");
        }
    }
}
