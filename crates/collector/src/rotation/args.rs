//! The flags of token rotation: whether the collector mints at all and for whom (the
//! operator's decision, never a definition's), the caps on what a definition may ask, and
//! the pacing.

use std::time::Duration;

use clap::Args;
use cluster_registry::token_rotation::MIN_EXPIRATION_SECONDS;

/// The longest lifetime `--rotation-max-expiration` may allow: the TokenRequest API's own cap.
const MAX_CAP_SECONDS: u64 = 1 << 32;

/// How Tether mints member tokens ([`crate::rotation`]).
#[derive(Clone, Debug, Args)]
pub struct RotationArgs {
    /// Mint and rotate the token of every member whose definition names a ServiceAccount
    /// (`tether.io/rotation-service-account`, or `rotation.serviceAccount` in a member file),
    /// unless it says `tether.io/rotate-tokens: "false"`. Minting is the operator's decision:
    /// without this flag (or `--rotate-tokens-for`) nothing is minted, whatever a definition
    /// says. Only the leader mints (`--leader-elect`).
    #[arg(long, env = "TETHER_ROTATE_TOKENS")]
    pub rotate_tokens: bool,

    /// Mint and rotate the token of member MEMBER only (its Karmada `Cluster`, Argo CD
    /// cluster or member-file name), if its definition names a ServiceAccount and does not say
    /// `"false"`. Repeat it, or separate names with commas, for several members. Ignored
    /// with `--rotate-tokens`, which allows every member.
    #[arg(
        long = "rotate-tokens-for",
        value_name = "MEMBER",
        value_delimiter = ',',
        env = "TETHER_ROTATE_TOKENS_FOR"
    )]
    pub rotate_tokens_for: Vec<String>,

    /// The longest lifetime a definition may ask for a minted token
    /// (`tether.io/rotation-expiration-seconds`): a member asking more is refused
    /// (`RotationOverCap`), not clamped, so that it never gets other tokens than it asked for.
    /// Seconds, or a number with `s`, `m` or `h` (`90m`, `24h`); at least 600 s.
    #[arg(long, default_value = "24h", value_parser = expiration_cap)]
    pub rotation_max_expiration: Duration,

    /// An audience a definition may ask minted tokens for (`tether.io/rotation-audiences`).
    /// Repeatable. None (the default): only the member apiserver's own audience, so a
    /// definition naming any audience is refused (`RotationOverCap`).
    #[arg(long = "rotation-audience", value_name = "AUDIENCE")]
    pub rotation_audiences: Vec<String>,

    /// The share of a minted token's lifetime (from its `iat`/`nbf` to its `exp`, as the
    /// apiserver granted it) after which the next token is minted. At 0.8 a 1 h token is
    /// replaced after 48 min, and a 24 h EKS token after 19.2 h.
    #[arg(long, default_value_t = 0.8, value_parser = rotation_fraction)]
    pub rotation_fraction: f64,

    /// Seconds between attempts after a mint failed (a 403 from the member, say); the
    /// current token stays in use meanwhile. Also the shortest time between two mints that
    /// `tether.io/rotate-now` asks for: a later request waits until then.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub rotation_retry_seconds: u64,
}

impl RotationArgs {
    /// The wait after a failed mint, and the least time between two manual mints.
    pub fn retry(&self) -> Duration {
        Duration::from_secs(self.rotation_retry_seconds)
    }

    /// Whether this collector mints for any member at all.
    pub fn minting(&self) -> bool {
        self.rotate_tokens || !self.rotate_tokens_for.is_empty()
    }

    /// Whether the operator lets member `member` be minted for.
    pub fn allows(&self, member: &str) -> bool {
        self.rotate_tokens || self.rotate_tokens_for.iter().any(|name| name == member)
    }
}

/// A lifetime cap: seconds, or with an `s`, `m` or `h` suffix, within the TokenRequest API's
/// range (600 s to 2^32 s).
fn expiration_cap(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let (number, unit) = match raw.char_indices().last() {
        Some((at, 's')) => (&raw[..at], 1),
        Some((at, 'm')) => (&raw[..at], 60),
        Some((at, 'h')) => (&raw[..at], 3600),
        _ => (raw, 1),
    };
    let seconds = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{raw:?} is not a duration such as 3600, 90m or 24h"))?;
    let min = MIN_EXPIRATION_SECONDS.unsigned_abs();
    if !(min..=MAX_CAP_SECONDS).contains(&seconds) {
        return Err(format!(
            "{seconds} s is outside {min} s..{MAX_CAP_SECONDS} s, the lifetimes a TokenRequest \
             may ask for"
        ));
    }
    Ok(Duration::from_secs(seconds))
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
pub(super) mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        rotation: RotationArgs,
    }

    /// `args` parsed as the collector parses its command line.
    pub(in crate::rotation) fn parse(args: &[&str]) -> RotationArgs {
        Cli::try_parse_from(std::iter::once("collector").chain(args.iter().copied()))
            .unwrap()
            .rotation
    }

    #[test]
    fn the_fraction_is_strictly_between_zero_and_one() {
        assert_eq!(rotation_fraction("0.8"), Ok(0.8));
        for bad in ["0", "1", "1.5", "-0.1", "x", "NaN"] {
            assert!(rotation_fraction(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn by_default_nothing_is_minted_and_the_caps_are_a_day_and_no_audience() {
        let args = parse(&[]);
        assert!(!args.minting());
        assert!(!args.allows("m1"));
        assert_eq!(args.rotation_max_expiration, Duration::from_secs(86_400));
        assert!(args.rotation_audiences.is_empty());
    }

    #[test]
    fn the_operator_allows_every_member_or_the_named_ones() {
        let all = parse(&["--rotate-tokens"]);
        assert!(all.minting() && all.allows("m1") && all.allows("any"));
        let some = parse(&["--rotate-tokens-for", "m1,m2", "--rotate-tokens-for=m3"]);
        assert!(some.minting());
        for member in ["m1", "m2", "m3"] {
            assert!(some.allows(member), "{member}");
        }
        assert!(!some.allows("m4") && !some.allows("m"));
    }

    #[test]
    fn the_lifetime_cap_reads_seconds_minutes_and_hours_within_the_api_range() {
        assert_eq!(expiration_cap("3600"), Ok(Duration::from_secs(3600)));
        assert_eq!(expiration_cap("600s"), Ok(Duration::from_secs(600)));
        assert_eq!(expiration_cap("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(expiration_cap("24h"), Ok(Duration::from_secs(86_400)));
        for bad in [
            "",
            "h",
            "599",
            "9m",
            "-1h",
            "1d",
            "1.5h",
            "99999999999999999999h",
        ] {
            assert!(expiration_cap(bad).is_err(), "{bad}");
        }
    }
}
