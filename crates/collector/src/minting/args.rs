//! The flags of token minting: whether the collector mints at all and for whom (the
//! operator's decision, never a definition's), the caps on what a definition may ask, and
//! the pacing.

use std::time::Duration;

use clap::{Arg, Args};
use cluster_registry::minting::MIN_EXPIRATION_SECONDS;
use k8s_openapi::jiff::SignedDuration;

/// The longest lifetime `--mint-max-expiration` may allow: the TokenRequest API's own cap.
const MAX_CAP_SECONDS: u64 = 1 << 32;

/// How Tether mints member tokens.
#[derive(Clone, Debug, Args)]
#[command(mut_args(with_former_name))]
pub struct MintArgs {
    /// Mint the tokens of every member whose definition names a ServiceAccount
    /// (`tether.io/mint-service-account`, or `mint.serviceAccount` in a member file),
    /// unless it says `tether.io/mint-tokens: "false"`. Minting is the operator's decision:
    /// without this flag (or `--mint-tokens-for`) nothing is minted, whatever a definition
    /// says. Only the leader mints (`--leader-elect`).
    #[arg(long, env = "TETHER_MINT_TOKENS")]
    pub mint_tokens: bool,

    /// Mint the tokens of member MEMBER only (its Karmada `Cluster`, Argo CD
    /// cluster or member-file name), if its definition names a ServiceAccount and does not say
    /// `"false"`. Repeat it, or separate names with commas, for several members. Ignored
    /// with `--mint-tokens`, which allows every member.
    #[arg(
        long,
        value_name = "MEMBER",
        value_delimiter = ',',
        env = "TETHER_MINT_TOKENS_FOR"
    )]
    pub mint_tokens_for: Vec<String>,

    /// The longest lifetime a definition may ask for a minted token
    /// (`tether.io/mint-expiration-seconds`): a member asking more is refused
    /// (`RotationOverCap`), not clamped, so that it never gets other tokens than it asked for.
    /// Seconds, or a duration such as `90m`, `1h30m` or `PT2H`; at least 600 s.
    #[arg(long, default_value = "24h", value_parser = expiration_cap)]
    pub mint_max_expiration: Duration,

    /// An audience a definition may ask minted tokens for (`tether.io/mint-audiences`).
    /// Repeatable. None (the default): only the member apiserver's own audience, so a
    /// definition naming any audience is refused (`RotationOverCap`).
    #[arg(long = "mint-audience", value_name = "AUDIENCE")]
    pub mint_audiences: Vec<String>,

    /// When Tether mints the next token: the share of the minted token's lifetime (from its
    /// `iat`/`nbf` to its `exp`, as the apiserver granted it) after which it asks the member's
    /// TokenRequest API for a new one. At 0.8 a 1 h token is replaced after 48 min. Not when a
    /// credential is read again from where it lives (`--credential-refresh-fraction`).
    #[arg(long, default_value_t = 0.8, value_parser = mint_fraction)]
    pub mint_at_fraction: f64,

    /// Seconds between attempts after a mint failed (a 403 from the member, say); the
    /// current token stays in use meanwhile. Also the shortest time between two mints that
    /// `tether.io/mint-now` asks for: a later request waits until then.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub mint_retry_seconds: u64,
}

/// The flags by their names before they were named for minting; still accepted, for one
/// release.
const FORMER_FLAGS: [(&str, &str); 6] = [
    ("mint_tokens", "rotate-tokens"),
    ("mint_tokens_for", "rotate-tokens-for"),
    ("mint_max_expiration", "rotation-max-expiration"),
    ("mint_audiences", "rotation-audience"),
    ("mint_at_fraction", "rotation-fraction"),
    ("mint_retry_seconds", "rotation-retry-seconds"),
];

/// `arg`, also under its former name if it had one ([`FORMER_FLAGS`]).
fn with_former_name(arg: Arg) -> Arg {
    match FORMER_FLAGS.iter().find(|(id, _)| arg.get_id() == *id) {
        Some((_, former)) => arg.alias(former),
        None => arg,
    }
}

/// The variables `--mint-tokens` and `--mint-tokens-for` were read from before they were
/// named for minting; still read, for one release, where the new ones are not set.
pub const FORMER_VARIABLES: [(&str, &str); 2] = [
    ("TETHER_ROTATE_TOKENS", "TETHER_MINT_TOKENS"),
    ("TETHER_ROTATE_TOKENS_FOR", "TETHER_MINT_TOKENS_FOR"),
];

impl MintArgs {
    /// These flags with what the former variables (`FORMER_VARIABLES`) say, where neither
    /// a flag nor its new variable said anything: a deployment that set only the former ones
    /// must not silently stop minting. `var` reads a variable.
    pub fn with_former_variables(mut self, var: impl Fn(&str) -> Option<String>) -> Self {
        let [(all, all_now), (some, some_now)] = FORMER_VARIABLES;
        if !self.mint_tokens && var(all_now).is_none() && var(all).is_some() {
            tracing::warn!("{all} is read as {all_now}, its new name; rename it");
            // As clap reads a flag's variable: anything but a "no" is yes.
            self.mint_tokens = var(all).is_some_and(|value| {
                !matches!(
                    value.trim().to_ascii_lowercase().as_str(),
                    "" | "0" | "false" | "f" | "no" | "n" | "off"
                )
            });
        }
        if self.mint_tokens_for.is_empty() && var(some_now).is_none() && var(some).is_some() {
            tracing::warn!("{some} is read as {some_now}, its new name; rename it");
            self.mint_tokens_for = (var(some).unwrap_or_default().split(','))
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect();
        }
        self
    }

    /// The wait after a failed mint, and the least time between two manual mints.
    pub fn retry(&self) -> Duration {
        Duration::from_secs(self.mint_retry_seconds)
    }

    /// Whether this collector mints for any member at all.
    pub fn minting(&self) -> bool {
        self.mint_tokens || !self.mint_tokens_for.is_empty()
    }

    /// Whether the operator lets member `member` be minted for.
    pub fn allows(&self, member: &str) -> bool {
        self.mint_tokens || self.mint_tokens_for.iter().any(|name| name == member)
    }
}

/// A lifetime cap within the TokenRequest API's range (600 s to 2^32 s): bare seconds, as
/// before durations were read with jiff, or a duration in jiff's friendly or ISO 8601 format
/// (`90m`, `1h30m`, `24 hours`, `PT2H`) that is whole seconds. Days are refused: jiff leaves
/// their length to a calendar.
fn expiration_cap(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let bad = || format!("{raw:?} is not a duration such as 3600, 90m or 24h");
    let seconds = match raw.parse::<u64>() {
        Ok(seconds) => seconds,
        Err(_) => {
            let duration: SignedDuration = raw.parse().map_err(|_| bad())?;
            if duration.subsec_nanos() != 0 {
                return Err(bad());
            }
            u64::try_from(duration.as_secs()).map_err(|_| bad())?
        }
    };
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
fn mint_fraction(raw: &str) -> Result<f64, String> {
    let value: f64 = raw.parse().map_err(|err| format!("{err}"))?;
    (value > 0.0 && value < 1.0)
        .then_some(value)
        .ok_or_else(|| format!("{value} is not in (0, 1)"))
}

#[cfg(test)]
pub(super) mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mint: MintArgs,
    }

    /// `args` parsed as the collector parses its command line.
    pub(in crate::minting) fn parse(args: &[&str]) -> MintArgs {
        Cli::try_parse_from(std::iter::once("collector").chain(args.iter().copied()))
            .unwrap()
            .mint
    }

    #[test]
    fn the_fraction_is_strictly_between_zero_and_one() {
        assert_eq!(mint_fraction("0.8"), Ok(0.8));
        for bad in ["0", "1", "1.5", "-0.1", "x", "NaN"] {
            assert!(mint_fraction(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn by_default_nothing_is_minted_and_the_caps_are_a_day_and_no_audience() {
        let args = parse(&[]);
        assert!(!args.minting());
        assert!(!args.allows("m1"));
        assert_eq!(args.mint_max_expiration, Duration::from_secs(86_400));
        assert!(args.mint_audiences.is_empty());
    }

    #[test]
    fn the_operator_allows_every_member_or_the_named_ones() {
        let all = parse(&["--mint-tokens"]);
        assert!(all.minting() && all.allows("m1") && all.allows("any"));
        let some = parse(&["--mint-tokens-for", "m1,m2", "--mint-tokens-for=m3"]);
        assert!(some.minting());
        for member in ["m1", "m2", "m3"] {
            assert!(some.allows(member), "{member}");
        }
        assert!(!some.allows("m4") && !some.allows("m"));
    }

    #[test]
    fn the_lifetime_cap_reads_seconds_and_durations_within_the_api_range() {
        for (raw, seconds) in [
            ("3600", 3600),
            ("600s", 600),
            ("90m", 5400),
            ("24h", 86_400),
            ("1h30m", 5400),
            ("24 hours", 86_400),
            // Whole seconds, however written.
            ("1.5h", 5400),
            ("PT2H", 7200),
            ("4294967296s", 1 << 32),
        ] {
            assert_eq!(
                expiration_cap(raw),
                Ok(Duration::from_secs(seconds)),
                "{raw}"
            );
        }
        for bad in [
            "",
            "h",
            "599",
            "9m",
            "4294967297",
            "-1h",
            // A day's length depends on the calendar.
            "1d",
            "P1D",
            "600.5s",
            "99999999999999999999h",
            "30s10m",
        ] {
            assert!(expiration_cap(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod former_spellings {
    use std::collections::BTreeMap;

    use super::{tests::parse, *};

    #[test]
    fn every_former_flag_still_sets_its_flag() {
        let former = parse(&[
            "--rotate-tokens",
            "--rotate-tokens-for=m1",
            "--rotation-max-expiration=2h",
            "--rotation-audience=vault",
            "--rotation-fraction=0.5",
            "--rotation-retry-seconds=7",
        ]);
        assert!(former.mint_tokens);
        assert_eq!(former.mint_tokens_for, ["m1"]);
        assert_eq!(former.mint_max_expiration, Duration::from_secs(7200));
        assert_eq!(former.mint_audiences, ["vault"]);
        assert_eq!(former.mint_at_fraction, 0.5);
        assert_eq!(former.mint_retry_seconds, 7);
    }

    fn with(vars: &[(&str, &str)], args: &[&str]) -> MintArgs {
        let vars = BTreeMap::from_iter(vars.iter().copied());
        parse(args).with_former_variables(|name| vars.get(name).map(|v| (*v).to_owned()))
    }

    #[test]
    fn a_former_variable_is_read_where_nothing_newer_says() {
        let all = with(&[("TETHER_ROTATE_TOKENS", "true")], &[]);
        assert!(all.mint_tokens);
        let some = with(&[("TETHER_ROTATE_TOKENS_FOR", "m1, m2,")], &[]);
        assert_eq!(some.mint_tokens_for, ["m1", "m2"]);
        for no in ["false", "0", "off", ""] {
            let minting = with(&[("TETHER_ROTATE_TOKENS", no)], &[]).mint_tokens;
            assert!(!minting, "{no}");
        }
        // The new variable (clap read it already) or a flag wins.
        let both = [
            ("TETHER_ROTATE_TOKENS", "true"),
            ("TETHER_MINT_TOKENS", "false"),
        ];
        let newer = with(&both, &[]);
        assert!(!newer.mint_tokens);
        let m9 = [("TETHER_ROTATE_TOKENS_FOR", "m9")];
        let flag = with(&m9, &["--mint-tokens-for=m1"]);
        assert_eq!(flag.mint_tokens_for, ["m1"]);
    }
}
