//! Durations on the command line: `300s`, `5m`, `1h`, or sums such as `1m30s`.
//!
//! jiff reads them; this module holds jiff's friendlier grammar (`500ms`, `1.5h`, `5 mins`,
//! `1 hour`, a sign) to whole seconds in the three units the flags need.

use std::{fmt, time::Duration};

use k8s_openapi::jiff::fmt::friendly::SpanParser;

static PARSER: SpanParser = SpanParser::new();

/// Parses `<digits><unit>`, repeated from the largest unit down, with the units `h`, `m` and
/// `s`. A bare number is refused: `--ttl=300` could be seconds or minutes, and a wrong guess is
/// a silent misconfiguration.
///
/// # Errors
/// A message saying what is accepted.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration such as 300s, 5m or 1h");
    // jiff would also take spaces, fractions, signs, `ms` and other unit names.
    let hms = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'h' | b'm' | b's'));
    if !hms || text.contains("ms") {
        return Err(bad());
    }
    PARSER.parse_unsigned_duration(text).map_err(|_| bad())
}

/// [`parse`], refusing zero: a zero `--ttl` or `--timeout` would make every run fail.
///
/// # Errors
/// As [`parse`], and for zero.
pub(crate) fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        Duration::ZERO => Err(format!("{text:?} must be more than zero")),
        duration => Ok(duration),
    }
}

/// A duration written back the way [`parse`] reads it, in whole seconds: `5m`, `90s`, `1h`.
pub(crate) struct Short(pub(crate) Duration);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        match secs {
            0 => write!(f, "{}ms", self.0.as_millis()),
            _ if secs.is_multiple_of(3600) => write!(f, "{}h", secs / 3600),
            _ if secs.is_multiple_of(60) => write!(f, "{}m", secs / 60),
            _ => write!(f, "{secs}s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::seconds("300s", 300)]
    #[case::minutes("5m", 300)]
    #[case::hours("1h", 3600)]
    #[case::sum("1m30s", 90)]
    #[case::every_unit("1h1m1s", 3661)]
    #[case::zero("0s", 0)]
    fn durations_parse(#[case] text: &str, #[case] secs: u64) {
        assert_eq!(parse(text), Ok(Duration::from_secs(secs)));
    }

    #[rstest]
    #[case::empty("")]
    #[case::bare_number("300")]
    #[case::no_number("s")]
    #[case::unknown_unit("5d")]
    #[case::milliseconds("500ms")]
    #[case::negative("-5m")]
    #[case::space("5 m")]
    #[case::fraction("1.5h")]
    #[case::overflow("99999999999999999999h")]
    #[case::units_out_of_order("30s1m")]
    #[case::whole_milliseconds("1000ms")]
    #[case::unit_name("5mins")]
    #[case::iso_8601("PT5M")]
    #[case::plus("+5m")]
    fn other_text_is_refused(#[case] text: &str) {
        let err = parse(text).unwrap_err();
        assert!(err.contains("300s, 5m or 1h"), "{err}");
    }

    #[test]
    fn zero_is_refused_where_it_makes_no_sense() {
        assert!(parse_positive("0m").unwrap_err().contains("more than zero"));
        assert_eq!(parse_positive("10s"), Ok(Duration::from_secs(10)));
    }

    #[rstest]
    #[case(300, "5m")]
    #[case(3600, "1h")]
    #[case(90, "90s")]
    fn durations_print_as_they_parse(#[case] secs: u64, #[case] text: &str) {
        assert_eq!(Short(Duration::from_secs(secs)).to_string(), text);
        assert_eq!(parse(text), Ok(Duration::from_secs(secs)));
    }
}
