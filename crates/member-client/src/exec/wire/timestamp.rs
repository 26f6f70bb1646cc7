//! RFC 3339 times as Kubernetes reads and writes them (`metav1.Time`): `2026-12-01T20:00:00Z`.
//!
//! jiff does the calendar; this module only holds jiff to the one shape Go's
//! `time.Parse(time.RFC3339, …)` accepts, because client-go reads `expirationTimestamp` that
//! way and jiff's RFC 3339 and ISO 8601 parsers accept more (`t`, a space, `+0100`, a leap
//! second, an annotation).

use std::time::SystemTime;

use k8s_openapi::jiff::{SignedDuration, Timestamp, civil::DateTime};

/// `YYYY-MM-DDTHH:MM:SS`: the part before any fraction.
const WHOLE_SECONDS: usize = "2006-01-02T15:04:05".len();
/// Go keeps nanoseconds and drops any further digit.
const MAX_FRACTION_DIGITS: usize = 9;

/// `YYYY-MM-DDTHH:MM:SS[(.|,)fraction](Z|±HH:MM)`, as Go's `time.Parse(time.RFC3339, …)`
/// accepts it: `T` and `Z` upper-case, digits past nanoseconds dropped, second 60 refused,
/// and an offset of up to 24 hours and 60 minutes. `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if b.len() < WHOLE_SECONDS
        || separators.iter().any(|&(at, want)| b[at] != want)
        // jiff would read it as 59: Go refuses it.
        || b[17..19] == *b"60"
    {
        return None;
    }
    // Checked: a multi-byte character may straddle the end of the seconds.
    let (whole, rest) = text.split_at_checked(WHOLE_SECONDS)?;
    let fraction_len = match rest.as_bytes() {
        [b'.' | b',', tail @ ..] => tail.iter().take_while(|c| c.is_ascii_digit()).count(),
        _ => 0,
    };
    let (fraction, zone) = match fraction_len {
        0 => ("", rest),
        n => (&rest[1..=n.min(MAX_FRACTION_DIGITS)], &rest[1 + n..]),
    };
    let offset = offset_seconds(zone)?;
    let civil: DateTime = match fraction {
        "" => whole.parse().ok()?,
        digits => format!("{whole}.{digits}").parse().ok()?,
    };
    let since_epoch = civil
        .duration_since(DateTime::constant(1970, 1, 1, 0, 0, 0, 0))
        .checked_sub(SignedDuration::from_secs(offset))?;
    let magnitude = since_epoch.unsigned_abs();
    match since_epoch.is_negative() {
        true => SystemTime::UNIX_EPOCH.checked_sub(magnitude),
        false => SystemTime::UNIX_EPOCH.checked_add(magnitude),
    }
}

/// `Z`, or `±HH:MM` with Go's ranges (it lets 24 hours and 60 minutes through).
fn offset_seconds(zone: &str) -> Option<i64> {
    let (sign, hours, minutes) = match zone.as_bytes() {
        b"Z" => return Some(0),
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            (*sign, two_digits(*h1, *h2)?, two_digits(*m1, *m2)?)
        }
        _ => return None,
    };
    if hours > 24 || minutes > 60 {
        return None;
    }
    let seconds = hours * 3600 + minutes * 60;
    Some(if sign == b'-' { -seconds } else { seconds })
}

fn two_digits(tens: u8, ones: u8) -> Option<i64> {
    (tens.is_ascii_digit() && ones.is_ascii_digit())
        .then(|| i64::from(tens - b'0') * 10 + i64::from(ones - b'0'))
}

/// `at` as `metav1.Time` writes it: UTC, whole seconds, `Z`. `None` past jiff's range (near
/// the years -9999 and 9999).
pub fn format_rfc3339(at: SystemTime) -> Option<String> {
    let at = Timestamp::try_from(at).ok()?;
    Some(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use std::time::Duration;

    fn at(seconds: i64, nanos: u64) -> SystemTime {
        let base = if seconds >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(seconds.unsigned_abs())
        } else {
            SystemTime::UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs())
        };
        base + Duration::from_nanos(nanos)
    }

    // Expected values are Go's: `time.Parse(time.RFC3339, text)` (go1.26), `.Unix()` and
    // `.Nanosecond()`.
    #[rstest]
    #[case::utc("2026-12-01T20:00:00Z", at(1_796_155_200, 0))]
    #[case::fraction("2026-12-01T20:00:00.5Z", at(1_796_155_200, 500_000_000))]
    #[case::comma_fraction("2026-12-01T20:00:00,5Z", at(1_796_155_200, 500_000_000))]
    #[case::nanoseconds("2026-12-01T20:00:00.123456789Z", at(1_796_155_200, 123_456_789))]
    #[case::beyond_nanoseconds("2026-12-01T20:00:00.1234567899Z", at(1_796_155_200, 123_456_789))]
    #[case::far_beyond_nanoseconds(
        "2026-12-01T20:00:00.123456789012Z",
        at(1_796_155_200, 123_456_789)
    )]
    #[case::positive_offset("2026-12-01T20:00:00+01:30", at(1_796_149_800, 0))]
    #[case::negative_offset("2026-12-01T18:30:00-01:30", at(1_796_155_200, 0))]
    #[case::fraction_and_offset("2026-12-01T20:00:00.5+01:00", at(1_796_151_600, 500_000_000))]
    #[case::negative_zero_offset("2026-12-01T20:00:00-00:00", at(1_796_155_200, 0))]
    #[case::offset_hour_24("2026-12-01T20:00:00+24:00", at(1_796_068_800, 0))]
    #[case::offset_minute_60("2026-12-01T20:00:00+23:60", at(1_796_068_800, 0))]
    #[case::leap_day("2024-02-29T23:59:59Z", at(1_709_251_199, 0))]
    #[case::epoch("1970-01-01T00:00:00Z", at(0, 0))]
    #[case::before_epoch("1969-12-31T23:59:59Z", at(-1, 0))]
    #[case::year_zero("0000-01-01T00:00:00Z", at(-62_167_219_200, 0))]
    #[case::last_second_of_9999("9999-12-31T23:59:59Z", at(253_402_300_799, 0))]
    fn rfc3339_times_parse(#[case] text: &str, #[case] want: SystemTime) {
        assert_eq!(parse_rfc3339(text), Some(want));
    }

    // Each is refused by Go's `time.Parse(time.RFC3339, text)` too.
    #[rstest]
    #[case::empty("")]
    #[case::date_only("2026-12-01")]
    #[case::no_offset("2026-12-01T20:00:00")]
    #[case::space_separator("2026-12-01 20:00:00Z")]
    #[case::lowercase("2026-12-01t20:00:00z")]
    #[case::lowercase_t("2026-12-01t20:00:00Z")]
    #[case::lowercase_z("2026-12-01T20:00:00z")]
    #[case::no_seconds("2026-12-01T20:00Z")]
    #[case::basic_format("20261201T200000Z")]
    #[case::one_digit_month("2026-1-01T20:00:00Z")]
    #[case::month_13("2026-13-01T20:00:00Z")]
    #[case::month_0("2026-00-01T20:00:00Z")]
    #[case::day_0("2026-12-00T20:00:00Z")]
    #[case::not_a_leap_year("2026-02-29T20:00:00Z")]
    #[case::century_not_leap("1900-02-29T20:00:00Z")]
    #[case::april_31("2026-04-31T20:00:00Z")]
    #[case::hour_24("2026-12-01T24:00:00Z")]
    #[case::minute_60("2026-12-01T20:60:00Z")]
    #[case::leap_second("2026-12-31T23:59:60Z")]
    #[case::empty_fraction("2026-12-01T20:00:00.Z")]
    #[case::offset_without_colon("2026-12-01T20:00:00+0100")]
    #[case::offset_hours_only("2026-12-01T20:00:00+01")]
    #[case::offset_with_seconds("2026-12-01T20:00:00+01:00:00")]
    #[case::offset_hour_25("2026-12-01T20:00:00+25:00")]
    #[case::offset_minute_61("2026-12-01T20:00:00+23:61")]
    #[case::annotation("2026-12-01T20:00:00Z[UTC]")]
    #[case::trailing_text("2026-12-01T20:00:00Zjunk")]
    #[case::trailing_space("2026-12-01T20:00:00Z ")]
    #[case::leading_space(" 2026-12-01T20:00:00Z")]
    #[case::unix_seconds("1796155200")]
    #[case::signed_year("+2026-12-01T20:00:00Z")]
    #[case::six_digit_year("+002026-12-01T20:00:00Z")]
    #[case::non_ascii("2026-12-01T20:00:00Z\u{00e9}")]
    #[case::non_ascii_where_a_separator_goes("2026-12-01\u{00e9}20:00:00Z")]
    #[case::non_ascii_across_the_seconds("2026-12-01T20:00:0\u{00e9}Z")]
    fn other_text_is_refused(#[case] text: &str) {
        assert_eq!(parse_rfc3339(text), None);
    }

    #[rstest]
    #[case::whole(at(1_796_155_200, 0), "2026-12-01T20:00:00Z", at(1_796_155_200, 0))]
    #[case::fraction_dropped(
        at(1_796_155_200, 999_999_999),
        "2026-12-01T20:00:00Z",
        at(1_796_155_200, 0)
    )]
    #[case::before_epoch(at(-1, 0), "1969-12-31T23:59:59Z", at(-1, 0))]
    fn times_are_written_as_metav1_time_writes_them(
        #[case] time: SystemTime,
        #[case] want: &str,
        #[case] read_back: SystemTime,
    ) {
        assert_eq!(format_rfc3339(time).as_deref(), Some(want));
        assert_eq!(parse_rfc3339(want), Some(read_back));
    }

    #[test]
    fn a_time_past_the_year_9999_cannot_be_written() {
        assert_eq!(format_rfc3339(at(253_402_300_800 + 86_400, 0)), None);
    }
}
