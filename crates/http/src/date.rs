//! HTTP-date (RFC 9110 §5.6.7): IMF-fixdate output; IMF-fixdate, RFC 850 and asctime input.
//!
//! Owns the calendar arithmetic (days ↔ civil date, proleptic Gregorian, UTC). Must not read
//! a clock: callers pass unix seconds, so the server can format Date once per second and tests
//! are deterministic.

const DAY_NAMES: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
const LONG_DAY_NAMES: [&[u8]; 7] = [
    b"Sunday",
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
];
const MONTH_NAMES: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// 9999-12-31T23:59:59Z, the last instant an IMF-fixdate's four-digit year can express.
pub const MAX_HTTP_DATE: u64 = 253_402_300_799;
const SECONDS_PER_DAY: u64 = 86_400;

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31). Howard Hinnant's
/// `civil_from_days`: eras of 400 years make the leap rule a fixed cycle, no loops or tables.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month 1..=12, day 1..=31) → days since 1970-01-01; the inverse of `civil_from_days`.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

fn put_two_digits(out: &mut [u8], value: u32) {
    out[0] = b'0' + (value / 10) as u8;
    out[1] = b'0' + (value % 10) as u8;
}

/// Formats `unix_secs` as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
/// Instants after [`MAX_HTTP_DATE`] are written as that instant.
#[must_use]
pub fn format_http_date(unix_secs: u64) -> [u8; 29] {
    let secs = unix_secs.min(MAX_HTTP_DATE);
    let days = (secs / SECONDS_PER_DAY) as i64;
    let time = (secs % SECONDS_PER_DAY) as u32;
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday (index 4 with Sunday = 0).
    let weekday = ((days + 4) % 7) as usize;

    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAY_NAMES[weekday]);
    put_two_digits(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTH_NAMES[month as usize - 1]);
    let year = year as u32;
    put_two_digits(&mut out[12..14], year / 100);
    put_two_digits(&mut out[14..16], year % 100);
    put_two_digits(&mut out[17..19], time / 3600);
    put_two_digits(&mut out[20..22], time / 60 % 60);
    put_two_digits(&mut out[23..25], time % 60);
    out
}

/// Parses an HTTP-date in any of the three formats RFC 9110 §5.6.7 requires recipients to
/// accept, returning unix seconds. Day names are checked for spelling only; a date before 1970
/// or not in the calendar yields `None`.
///
/// RFC 850's two-digit years are read as 1970..=2069: the RFC's "more than 50 years in the
/// future" rule needs a clock, and dates past 2069 in that long-dead format do not occur.
#[must_use]
pub fn parse_http_date(value: &[u8]) -> Option<u64> {
    if value.len() == 29 && value[3] == b',' {
        return parse_imf_fixdate(value);
    }
    if value.len() == 24 && value[3] == b' ' {
        return parse_asctime(value);
    }
    parse_rfc850(value)
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn parse_imf_fixdate(value: &[u8]) -> Option<u64> {
    if !DAY_NAMES.iter().any(|name| value[..3] == name[..])
        || &value[3..5] != b", "
        || value[7] != b' '
        || value[11] != b' '
        || value[16] != b' '
        || &value[25..] != b" GMT"
    {
        return None;
    }
    let day = digits(&value[5..7])?;
    let month = month(&value[8..11])?;
    let year = digits(&value[12..16])?;
    let time = time_of_day(&value[17..25])?;
    to_unix(i64::from(year), month, day, time)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn parse_rfc850(value: &[u8]) -> Option<u64> {
    let comma = value.iter().position(|&b| b == b',')?;
    if !LONG_DAY_NAMES.contains(&&value[..comma]) {
        return None;
    }
    let rest = &value[comma + 1..];
    if rest.len() != 23
        || rest[0] != b' '
        || rest[3] != b'-'
        || rest[7] != b'-'
        || rest[10] != b' '
        || &rest[19..] != b" GMT"
    {
        return None;
    }
    let day = digits(&rest[1..3])?;
    let month = month(&rest[4..7])?;
    let short_year = digits(&rest[8..10])?;
    let year = if short_year >= 70 {
        1900 + short_year
    } else {
        2000 + short_year
    };
    let time = time_of_day(&rest[11..19])?;
    to_unix(i64::from(year), month, day, time)
}

/// `Sun Nov  6 08:49:37 1994`
fn parse_asctime(value: &[u8]) -> Option<u64> {
    if !DAY_NAMES.iter().any(|name| value[..3] == name[..])
        || value[7] != b' '
        || value[10] != b' '
        || value[19] != b' '
    {
        return None;
    }
    let month = month(&value[4..7])?;
    let day = match value[8] {
        b' ' => digits(&value[9..10])?,
        _ => digits(&value[8..10])?,
    };
    let time = time_of_day(&value[11..19])?;
    let year = digits(&value[20..24])?;
    to_unix(i64::from(year), month, day, time)
}

fn digits(bytes: &[u8]) -> Option<u32> {
    bytes.iter().try_fold(0u32, |total, &b| {
        b.is_ascii_digit().then(|| total * 10 + u32::from(b - b'0'))
    })
}

fn month(name: &[u8]) -> Option<u32> {
    MONTH_NAMES
        .iter()
        .position(|candidate| candidate[..] == *name)
        .map(|index| index as u32 + 1)
}

/// `hh:mm:ss` → seconds into the day; a leap second (`:60`) is accepted as RFC 9110 allows.
fn time_of_day(bytes: &[u8]) -> Option<u32> {
    if bytes[2] != b':' || bytes[5] != b':' {
        return None;
    }
    let (hours, minutes, seconds) = (
        digits(&bytes[0..2])?,
        digits(&bytes[3..5])?,
        digits(&bytes[6..8])?,
    );
    (hours < 24 && minutes < 60 && seconds <= 60).then_some(hours * 3600 + minutes * 60 + seconds)
}

fn to_unix(year: i64, month: u32, day: u32, time: u32) -> Option<u64> {
    if year < 1970 || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    Some(days * SECONDS_PER_DAY + u64::from(time))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// RFC 9110 §5.6.7's example instant in its three spellings.
    const EXAMPLE: u64 = 784_111_777;

    #[test]
    fn rfc_examples() {
        assert_eq!(&format_http_date(EXAMPLE), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(
            parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(EXAMPLE)
        );
        assert_eq!(
            parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(EXAMPLE)
        );
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), Some(EXAMPLE));
    }

    #[test]
    fn edges() {
        assert_eq!(&format_http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            &format_http_date(951_782_400),
            b"Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            &format_http_date(u64::MAX),
            b"Fri, 31 Dec 9999 23:59:59 GMT"
        );
        assert_eq!(parse_http_date(b"Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date(b"Wednesday, 01-Jan-31 00:00:00 GMT"),
            Some(1_924_992_000)
        );
        assert_eq!(
            parse_http_date(b"Thu, 31 Dec 2026 23:59:60 GMT"),
            parse_http_date(b"Fri, 01 Jan 2027 00:00:00 GMT")
        );
    }

    #[test]
    fn rejects_invalid_dates() {
        for bad in [
            &b""[..],
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 31 Nov 1994 08:49:37 GMT",
            b"Sun, 29 Feb 1900 08:49:37 GMT",
            b"Sun, 06 Nov 1969 08:49:37 GMT",
            b"Sun, 06 Nov 1994 24:00:00 GMT",
            b"Sun, 06 nov 1994 08:49:37 GMT",
            b"Xyz, 06 Nov 1994 08:49:37 GMT",
            b"Sun, 6 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08:49:37 GMT ",
            b"Sunday, 06-Nov-1994 08:49:37 GMT",
            b"Sun Nov 00 08:49:37 1994",
            b"Sun Nov  6 08-49-37 1994",
            b"1994-11-06T08:49:37Z",
            b"Sun, 06 Nov 1994 +8:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{}", bad.escape_ascii());
        }
    }

    proptest! {
        #[test]
        fn imf_fixdate_round_trips(secs in 0..=MAX_HTTP_DATE) {
            let formatted = format_http_date(secs);
            prop_assert_eq!(parse_http_date(&formatted), Some(secs));
        }

        #[test]
        fn civil_round_trips(days in -1_000_000i64..3_000_000) {
            let (year, month, day) = civil_from_days(days);
            prop_assert!((1..=12).contains(&month));
            prop_assert!(day >= 1 && day <= days_in_month(year, month));
            prop_assert_eq!(days_from_civil(year, month, day), days);
        }

        #[test]
        fn parsed_dates_stay_in_range(value in prop::collection::vec(any::<u8>(), 0..40)) {
            if let Some(secs) = parse_http_date(&value) {
                // A leap second on the last day of 9999 is the only way past the maximum.
                prop_assert!(secs <= MAX_HTTP_DATE + 1);
            }
        }
    }
}
