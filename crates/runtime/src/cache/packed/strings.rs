//! The strings the packed form stores compactly, both ways: decimal strings
//! (resourceVersions), lowercase UUIDs, and whole-second RFC 3339 timestamps (with the civil
//! calendar arithmetic behind them).

/// The value of a decimal string that formats back identically (no sign, no leading zero).
pub(super) fn parse_digits(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 19 || (b[0] == b'0' && b.len() > 1) {
        return None;
    }
    if !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

/// The 16 bytes of a lowercase, hyphenated UUID, if `s` is one.
pub(super) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = b
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(i, 8 | 13 | 18 | 23))
        .map(|(_, c)| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        });
    for byte in &mut out {
        let hi = nibbles.next()??;
        let lo = nibbles.next()??;
        *byte = (hi << 4) | lo;
    }
    Some(out)
}

pub(super) fn format_uuid(b: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[usize::from(byte >> 4)] as char);
        s.push(HEX[usize::from(byte & 15)] as char);
    }
    s
}

/// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SSZ` string that formats back identically
/// (a real date and time of day, no leap second).
pub(super) fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`; `None` outside the years 0 to 9999.
pub(super) fn format_time(secs: i64) -> Option<String> {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let mut out = String::with_capacity(20);
    push_digits(&mut out, year, 4);
    let rest = [
        ('-', month),
        ('-', day),
        ('T', rem / 3_600),
        (':', rem / 60 % 60),
        (':', rem % 60),
    ];
    for (separator, value) in rest {
        out.push(separator);
        push_digits(&mut out, value, 2);
    }
    out.push('Z');
    Some(out)
}

/// Appends the last `width` decimal digits of `n` (not negative), zero-padded.
pub(super) fn push_digits(out: &mut String, n: i64, width: u32) {
    for place in (0..width).rev() {
        let digit = u32::try_from(n / 10_i64.pow(place) % 10).unwrap_or(0);
        out.push(char::from_digit(digit, 10).unwrap_or('0'));
    }
}

pub(super) fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

pub(super) fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (counting in 400-year eras of
/// 146,097 days, with years starting in March so that the leap day comes last).
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of `days` since 1970-01-01: the inverse of [`days_from_civil`].
pub(super) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
