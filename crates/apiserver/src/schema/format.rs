//! The string formats Kubernetes checks in custom objects (`format: date-time`, ...).
//!
//! A string with a known format that does not parse fails with
//! `spec.ts in body must be of type date-time: "abc"` (cause `FieldValueTypeInvalid`).
//! Unknown formats are ignored, as are the number formats (`int32`, `int64`, `float`,
//! `double`): Kubernetes only uses those in type mismatch messages, never as range checks.
//! Each check follows what the Go library behind Kubernetes accepts; none allocates.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A string format with a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Byte,
    Date,
    DateTime,
    Duration,
    Uuid,
    Uuid3,
    Uuid4,
    Uuid5,
    Email,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Mac,
    Uri,
    Password,
}

impl Format {
    /// The checked format called `name`; `None` for unknown and number formats.
    pub(crate) fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "byte" => Format::Byte,
            "date" => Format::Date,
            "date-time" | "datetime" => Format::DateTime,
            "duration" => Format::Duration,
            "uuid" => Format::Uuid,
            "uuid3" => Format::Uuid3,
            "uuid4" => Format::Uuid4,
            "uuid5" => Format::Uuid5,
            "email" => Format::Email,
            "hostname" => Format::Hostname,
            "ipv4" => Format::Ipv4,
            "ipv6" => Format::Ipv6,
            "cidr" => Format::Cidr,
            "mac" => Format::Mac,
            "uri" => Format::Uri,
            "password" => Format::Password,
            _ => return None,
        })
    }

    /// Whether `s` is valid in this format.
    pub(crate) fn is_valid(self, s: &str) -> bool {
        match self {
            Format::Byte => is_base64(s),
            Format::Date => is_date(s),
            Format::DateTime => is_date_time(s),
            Format::Duration => is_duration(s),
            Format::Uuid => is_uuid(s, None),
            Format::Uuid3 => is_uuid(s, Some(b'3')),
            Format::Uuid4 => is_uuid(s, Some(b'4')),
            Format::Uuid5 => is_uuid(s, Some(b'5')),
            Format::Email => is_email(s),
            Format::Hostname => is_hostname(s),
            Format::Ipv4 => is_ipv4(s),
            Format::Ipv6 => s.contains(':') && s.parse::<IpAddr>().is_ok(),
            Format::Cidr => is_cidr(s),
            Format::Mac => is_mac(s),
            Format::Uri => is_uri(s),
            Format::Password => true,
        }
    }
}

/// Standard base64 with padding; line breaks are ignored, as Go's decoder does.
fn is_base64(s: &str) -> bool {
    let mut len = 0usize;
    let mut pad = 0usize;
    for b in s.bytes() {
        match b {
            b'\r' | b'\n' => continue,
            b'=' => pad += 1,
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' if pad == 0 => {}
            _ => return false,
        }
        len += 1;
    }
    len.is_multiple_of(4) && pad <= 2
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')))
}

/// `YYYY-MM-DD`, a real calendar day.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(&b[0..4]), digits(&b[5..7]), digits(&b[8..10]))
    else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339 date-time: a date, `T` (any case), `hh:mm:ss`, an optional fraction, and `Z`
/// or a `±hh:mm` offset.
fn is_date_time(s: &str) -> bool {
    let Some(t) = s.find(['t', 'T']) else {
        return false;
    };
    if !is_date(&s[..t]) {
        return false;
    }
    let rest = &s.as_bytes()[t + 1..];
    // The time part ends at the next `t`, as a split on `t` would.
    let end = rest
        .iter()
        .position(|c| c.eq_ignore_ascii_case(&b't'))
        .unwrap_or(rest.len());
    let time = &rest[..end];
    if time.len() < 9 || time[2] != b':' || time[5] != b':' {
        return false;
    }
    let (Some(h), Some(m), Some(sec)) = (
        digits(&time[0..2]),
        digits(&time[3..5]),
        digits(&time[6..8]),
    ) else {
        return false;
    };
    if h > 23 || m > 59 || sec > 59 {
        return false;
    }
    let zone_ok = |zone: &[u8]| match zone {
        [z] => z.eq_ignore_ascii_case(&b'z'),
        [sign, h1, h2, b':', m1, m2] => {
            (*sign == b'+' || *sign == b'-') && [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
        }
        _ => false,
    };
    if zone_ok(&time[8..]) {
        return true;
    }
    // An optional fraction: any one character, then digits.
    let mut i = 9;
    while i < time.len() && time[i].is_ascii_digit() {
        i += 1;
    }
    i > 9 && zone_ok(&time[i..])
}

/// A Go duration (`1h30m`, `1.5s`, `-2m`) or the long form (`3 days`, `1 week`).
fn is_duration(s: &str) -> bool {
    is_go_duration(s) || has_long_duration(s)
}

fn is_go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_end];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return false;
        }
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        match &rest[..unit_end] {
            "ns" | "us" | "\u{b5}s" | "\u{3bc}s" | "ms" | "s" | "m" | "h" => {}
            _ => return false,
        }
        rest = &rest[unit_end..];
    }
    true
}

/// Whether `s` contains a `<digits> <unit>` pair with a unit such as `d`, `days`, `wk`.
fn has_long_duration(s: &str) -> bool {
    const UNITS: [&[&str]; 8] = [
        &["ns", "nano"],
        &["us", "\u{b5}s", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        let unit_len = s[start..]
            .find(|c: char| !(c.is_ascii_alphabetic() || c == '\u{b5}'))
            .unwrap_or(s.len() - start);
        if unit_len > 0 {
            let unit = s[start..start + unit_len].to_ascii_lowercase();
            let known = UNITS.iter().any(|variants| {
                variants
                    .iter()
                    .enumerate()
                    .any(|(n, v)| *v == unit || (n == variants.len() - 1 && unit.starts_with(v)))
            });
            if known {
                return true;
            }
        }
        i = start + unit_len.max(1);
    }
    false
}

/// `xxxxxxxx-xxxx-Vxxx-xxxx-xxxxxxxxxxxx` in hex, any case; `version` pins `V`.
fn is_uuid(s: &str, version: Option<u8>) -> bool {
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    for (i, c) in b.iter().enumerate() {
        let ok = match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        };
        if !ok {
            return false;
        }
    }
    match version {
        None => true,
        Some(v) => {
            b[14] == v
                && (v == b'3' || matches!(b[19].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b'))
        }
    }
}

/// An address `local@domain`, optionally as `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let addr = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => s.trim(),
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    let atext = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c);
    let quoted = local.len() >= 2 && local.starts_with('"') && local.ends_with('"');
    !local.is_empty()
        && (quoted
            || (local.chars().all(atext)
                && !local.starts_with('.')
                && !local.ends_with('.')
                && !local.contains("..")))
        && !domain.is_empty()
        && domain
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_alphanumeric() || c == '-'))
}

/// An RFC 1123 host name: one label, or labels ending in an alphabetic top-level label.
fn is_hostname(s: &str) -> bool {
    if s.is_empty() || s.len() > 255 {
        return false;
    }
    let label_ok = |l: &str| {
        let n = l.chars().count();
        (1..=63).contains(&n)
            && l.chars().all(|c| c.is_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    match s.rsplit_once('.') {
        None => label_ok(s),
        Some((head, tld)) => {
            let n = tld.chars().count();
            head.split('.').all(label_ok)
                && (2..=63).contains(&n)
                && tld.chars().all(char::is_alphabetic)
        }
    }
}

fn is_ipv4(s: &str) -> bool {
    s.parse::<Ipv4Addr>().is_ok() || (s.contains('.') && s.parse::<Ipv6Addr>().is_ok())
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let max = match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => 32,
        Ok(IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    bits.len() <= 3 && digits(bits.as_bytes()).is_some_and(|b| b <= max)
}

/// A MAC (EUI-48, EUI-64 or 20-octet InfiniBand) address, with `:` or `-` between octets
/// or `.` between groups of four hex digits.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    if b[2] == b':' || b[2] == b'-' {
        let sep = b[2];
        if !(b.len() + 1).is_multiple_of(3) {
            return false;
        }
        let octets = (b.len() + 1) / 3;
        if !matches!(octets, 6 | 8 | 20) {
            return false;
        }
        b.chunks(3).all(|c| {
            c[0].is_ascii_hexdigit() && c[1].is_ascii_hexdigit() && (c.len() == 2 || c[2] == sep)
        })
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) {
            return false;
        }
        let octets = 2 * (b.len() + 1) / 5;
        if !matches!(octets, 6 | 8 | 20) {
            return false;
        }
        b.chunks(5)
            .all(|c| c[..4].iter().all(u8::is_ascii_hexdigit) && (c.len() == 4 || c[4] == b'.'))
    } else {
        false
    }
}

/// What Go's URL parser accepts: no control characters, valid `%` escapes, and no colon
/// before a scheme.
fn is_uri(s: &str) -> bool {
    let b = s.as_bytes();
    if b.iter().any(|c| *c < 0x20 || *c == 0x7f) || s.starts_with(':') {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() {
                return false;
            }
            if !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_accepts_good_values_and_rejects_bad_ones() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "byte",
                &["", "aGVsbG8=", "aGk=", "YWJj"],
                &["aGVsbG8", "a=bc", "!!!!"],
            ),
            (
                "date",
                &["2024-02-29", "1999-12-31"],
                &["2023-02-29", "2024-13-01", "24-01-01", "2024-1-01"],
            ),
            (
                "date-time",
                &[
                    "2024-05-01T12:00:00Z",
                    "2024-05-01t12:00:00.123+02:00",
                    "2024-05-01T23:59:59-07:00",
                ],
                &[
                    "2024-05-01",
                    "2024-05-01T24:00:00Z",
                    "2024-05-01T12:00:00",
                    "abc",
                    "2024-05-01T12:00Z",
                ],
            ),
            (
                "duration",
                &["1h30m", "1.5s", "-2m", "0", "3 days", "1 week", "10ms"],
                &["", "abc", "1x", "h"],
            ),
            (
                "uuid",
                &[
                    "123e4567-e89b-12d3-a456-426614174000",
                    "123E4567-E89B-12D3-A456-426614174000",
                ],
                &[
                    "123e4567e89b12d3a456426614174000",
                    "x23e4567-e89b-12d3-a456-426614174000",
                ],
            ),
            (
                "uuid4",
                &["123e4567-e89b-42d3-a456-426614174000"],
                &["123e4567-e89b-12d3-a456-426614174000"],
            ),
            (
                "email",
                &["a@example.com", "Ann <ann@example.com>"],
                &["example.com", "a@", "@b.com", "a b@c.d"],
            ),
            (
                "hostname",
                &["localhost", "example.com", "a-b.c-d.io"],
                &["-a.com", "a..com", "example.c0m", "a_b.com", ""],
            ),
            (
                "ipv4",
                &["10.0.0.1", "255.255.255.255"],
                &["10.0.0", "256.0.0.1", "::1", "01.2.3.4"],
            ),
            (
                "ipv6",
                &["::1", "fe80::1", "2001:db8::8a2e:370:7334"],
                &["10.0.0.1", "fe80:::1", "x::1"],
            ),
            (
                "cidr",
                &["10.0.0.0/8", "fd00::/64"],
                &["10.0.0.0", "10.0.0.0/33", "fd00::/129", "x/8"],
            ),
            (
                "mac",
                &[
                    "00:1a:2b:3c:4d:5e",
                    "00-1A-2B-3C-4D-5E",
                    "001a.2b3c.4d5e",
                    "00:1a:2b:3c:4d:5e:6f:70",
                ],
                &[
                    "00:1a:2b:3c:4d",
                    "001a2b3c4d5e",
                    "00:1a-2b:3c:4d:5e",
                    "zz:1a:2b:3c:4d:5e",
                ],
            ),
            (
                "uri",
                &["https://example.com/a?b=c", "/relative", "mailto:a@b.c", ""],
                &["http://a.com/%zz", ":nope", "a\u{1}b"],
            ),
            ("password", &["anything at all"], &[]),
        ];
        for (name, good, bad) in cases {
            let f = Format::parse(name).expect("a known format");
            for s in *good {
                assert!(f.is_valid(s), "{name} should accept {s:?}");
            }
            for s in *bad {
                assert!(!f.is_valid(s), "{name} should reject {s:?}");
            }
        }
    }

    #[test]
    fn number_and_unknown_formats_are_not_string_checks() {
        for name in ["int32", "int64", "float", "double", "quantity-ish", ""] {
            assert_eq!(Format::parse(name), None, "{name}");
        }
    }
}
