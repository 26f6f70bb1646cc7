//! RFC 3339 times as Kubernetes writes them (`metav1.Time`): `2026-12-01T20:00:00Z`.
//!
//! Parsed here rather than with a date crate: one fixed format is all an ExecCredential holds.

use std::time::{Duration, SystemTime};

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, as Go's `time.Parse(time.RFC3339, …)` accepts
/// it (fractional seconds included, second 60 refused). `None` for anything else.
pub(crate) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?;
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if separators
        .iter()
        .any(|&(at, want)| b.get(at) != Some(&want))
        || !matches!(b.get(10), Some(b'T' | b't'))
        || !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }

    let mut at = 19;
    let mut nanos = 0;
    if b.get(at) == Some(&b'.') {
        let start = at + 1;
        let end = start
            + b.get(start..)?
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
        if end == start {
            return None;
        }
        let fraction = b.get(start..end)?;
        // Digits past nanoseconds are dropped, as Go does.
        for place in 0..9 {
            let digit = fraction.get(place).map_or(0, |c| c - b'0');
            nanos = nanos * 10 + u32::from(digit);
        }
        at = end;
    }

    let offset = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (digits(b, at + 1, 2)?, digits(b, at + 4, 2)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };

    let seconds = days_from_civil(i64::from(year), i64::from(month), i64::from(day)) * 86_400
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset;
    let whole = Duration::from_secs(seconds.unsigned_abs());
    let time = if seconds >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(whole)?
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(whole)?
    };
    time.checked_add(Duration::from_nanos(u64::from(nanos)))
}

/// `n` ASCII digits at `at`, as a number.
fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    b.get(at..at + n)?.iter().try_fold(0, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`,
/// <https://howardhinnant.github.io/date_algorithms.html#days_from_civil>).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn at(seconds: i64, nanos: u64) -> SystemTime {
        let base = if seconds >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(seconds.unsigned_abs())
        } else {
            SystemTime::UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs())
        };
        base + Duration::from_nanos(nanos)
    }

    // Expected values are from `date -u -d <text> +%s`.
    #[rstest]
    #[case::utc("2026-12-01T20:00:00Z", at(1_796_155_200, 0))]
    #[case::lowercase("2026-12-01t20:00:00z", at(1_796_155_200, 0))]
    #[case::fraction("2026-12-01T20:00:00.5Z", at(1_796_155_200, 500_000_000))]
    #[case::nanoseconds("2026-12-01T20:00:00.123456789Z", at(1_796_155_200, 123_456_789))]
    #[case::beyond_nanoseconds("2026-12-01T20:00:00.1234567899Z", at(1_796_155_200, 123_456_789))]
    #[case::positive_offset("2026-12-01T20:00:00+01:30", at(1_796_149_800, 0))]
    #[case::negative_offset("2026-12-01T18:30:00-01:30", at(1_796_155_200, 0))]
    #[case::leap_day("2024-02-29T23:59:59Z", at(1_709_251_199, 0))]
    #[case::epoch("1970-01-01T00:00:00Z", at(0, 0))]
    #[case::before_epoch("1969-12-31T23:59:59Z", at(-1, 0))]
    fn rfc3339_times_parse(#[case] text: &str, #[case] want: SystemTime) {
        assert_eq!(parse_rfc3339(text), Some(want));
    }

    #[rstest]
    #[case::empty("")]
    #[case::date_only("2026-12-01")]
    #[case::no_offset("2026-12-01T20:00:00")]
    #[case::space_separator("2026-12-01 20:00:00Z")]
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
    #[case::offset_hour_24("2026-12-01T20:00:00+24:00")]
    #[case::trailing_text("2026-12-01T20:00:00Zjunk")]
    #[case::unix_seconds("1796155200")]
    #[case::signed_year("+2026-12-01T20:00:00Z")]
    #[case::non_ascii("2026-12-01T20:00:00Z\u{00e9}")]
    fn other_text_is_refused(#[case] text: &str) {
        assert_eq!(parse_rfc3339(text), None);
    }
}
