//! `Accept-Encoding` negotiation for precompressed siblings (RFC 9110 §12.5.3).
//!
//! Owns q-value parsing and the choice among the codings a file is available in. Must not
//! know file names or add `Vary` (the server does both).

use crate::token::{list_elements, trim_ows};

/// A content coding ampd can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Identity,
    Gzip,
    Brotli,
}

impl Coding {
    /// The token for `Content-Encoding`, or `None` for identity (which is never labelled).
    #[must_use]
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Coding::Identity => None,
            Coding::Gzip => Some("gzip"),
            Coding::Brotli => Some("br"),
        }
    }
}

/// What the header says about one coding: its q-value in thousandths, if mentioned.
#[derive(Debug, Default, Clone, Copy)]
struct Preferences {
    brotli: Option<u16>,
    gzip: Option<u16>,
    identity: Option<u16>,
    any: Option<u16>,
}

/// Picks the coding to send: the highest q-value among `available` (identity is always
/// available), ties broken Brotli > Gzip > Identity because smaller bodies win.
///
/// Absent header → Identity. `q=0` means "not acceptable". `*` covers codings not named.
/// Identity stays acceptable (with the lowest weight, so any listed coding beats it) unless
/// `identity;q=0`, or `*;q=0` without an identity entry, excludes it; when nothing is acceptable Identity is still returned, since a static server
/// answering 406 for a file it has would help nobody (RFC 9110 §12.5.3 allows either).
/// Names are case-insensitive and `x-gzip` is gzip (RFC 9110 §8.4.1.3). An element with an
/// unparsable q-value is ignored; the first mention of a coding counts.
#[must_use]
pub fn negotiate(accept_encoding: Option<&[u8]>, available: &[Coding]) -> Coding {
    let Some(value) = accept_encoding else {
        return Coding::Identity;
    };
    let preferences = parse_preferences(value);
    let named_or_any = |q: Option<u16>| q.or(preferences.any).unwrap_or(0);
    // `*` covers identity too when identity is not named. With neither, identity is
    // acceptable but not preferred: the lowest non-zero weight, so `br;q=0.5` still wins.
    let identity_q = preferences.identity.or(preferences.any).unwrap_or(1);

    let mut best = (Coding::Identity, identity_q);
    for (coding, q) in [
        (Coding::Gzip, named_or_any(preferences.gzip)),
        (Coding::Brotli, named_or_any(preferences.brotli)),
    ] {
        // `>=` so the later (more preferred) coding wins ties.
        if available.contains(&coding) && q > 0 && q >= best.1 {
            best = (coding, q);
        }
    }
    best.0
}

fn parse_preferences(value: &[u8]) -> Preferences {
    let mut preferences = Preferences::default();
    for element in list_elements(value) {
        let (name, parameters) = match element.iter().position(|&b| b == b';') {
            Some(semicolon) => (trim_ows(&element[..semicolon]), &element[semicolon + 1..]),
            None => (element, &b""[..]),
        };
        let Some(q) = q_value(parameters) else {
            continue;
        };
        let slot = if name.eq_ignore_ascii_case(b"br") {
            &mut preferences.brotli
        } else if name.eq_ignore_ascii_case(b"gzip") || name.eq_ignore_ascii_case(b"x-gzip") {
            &mut preferences.gzip
        } else if name.eq_ignore_ascii_case(b"identity") {
            &mut preferences.identity
        } else if name == b"*" {
            &mut preferences.any
        } else {
            continue;
        };
        slot.get_or_insert(q);
    }
    preferences
}

/// The weight in thousandths from `;q=...` parameters (RFC 9110 §12.4.2): 1000 when absent;
/// `None` when malformed.
fn q_value(parameters: &[u8]) -> Option<u16> {
    let parameters = trim_ows(parameters);
    if parameters.is_empty() {
        return Some(1000);
    }
    let (name, value) = parameters.split_at(parameters.iter().position(|&b| b == b'=')?);
    if !trim_ows(name).eq_ignore_ascii_case(b"q") {
        return None;
    }
    let value = trim_ows(&value[1..]);
    let (&leading, rest) = value.split_first()?;
    let fraction = match rest {
        [] => &[][..],
        [b'.', fraction @ ..] if fraction.len() <= 3 => fraction,
        _ => return None,
    };
    if !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for position in 0..3 {
        let digit = fraction.get(position).map_or(0, |&b| u16::from(b - b'0'));
        thousandths = thousandths * 10 + digit;
    }
    match leading {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[Coding] = &[Coding::Gzip, Coding::Brotli];

    #[test]
    fn q_values() {
        assert_eq!(q_value(b""), Some(1000));
        assert_eq!(q_value(b"q=1"), Some(1000));
        assert_eq!(q_value(b"q=1.000"), Some(1000));
        assert_eq!(q_value(b" Q = 0.5"), Some(500));
        assert_eq!(q_value(b"q=0.001"), Some(1));
        assert_eq!(q_value(b"q=0"), Some(0));
        assert_eq!(q_value(b"q=0."), Some(0));
        for bad in [
            &b"q=1.5"[..],
            b"q=2",
            b"q=0.0001",
            b"q=",
            b"q=-1",
            b"level=1",
            b"q=0.a",
        ] {
            assert_eq!(q_value(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn negotiation_table() {
        type Case<'a> = (Option<&'a [u8]>, &'a [Coding], Coding);
        let cases: &[Case] = &[
            (None, ALL, Coding::Identity),
            (Some(b""), ALL, Coding::Identity),
            (Some(b"gzip, deflate, br"), ALL, Coding::Brotli),
            (Some(b"gzip, deflate, br"), &[Coding::Gzip], Coding::Gzip),
            (Some(b"gzip, br"), &[], Coding::Identity),
            (Some(b"GZIP"), ALL, Coding::Gzip),
            (Some(b"x-gzip"), ALL, Coding::Gzip),
            (Some(b"br;q=0.5, gzip;q=0.8"), ALL, Coding::Gzip),
            (Some(b"br;q=0, gzip;q=0"), ALL, Coding::Identity),
            (Some(b"*"), ALL, Coding::Brotli),
            (Some(b"*;q=0.5, gzip"), ALL, Coding::Gzip),
            (
                Some(b"*;q=0.5, gzip;q=0.4"),
                &[Coding::Gzip],
                Coding::Identity,
            ),
            (Some(b"br;q=0.5, identity"), ALL, Coding::Identity),
            (Some(b"identity;q=0, gzip;q=0.1"), ALL, Coding::Gzip),
            (Some(b"*;q=0"), ALL, Coding::Identity),
            (Some(b"deflate"), ALL, Coding::Identity),
            (Some(b"gzip;q=bogus, br;q=0.1"), ALL, Coding::Brotli),
            (Some(b"gzip;q=0.4, gzip;q=1, br;q=0.3"), ALL, Coding::Gzip),
        ];
        for (header, available, expected) in cases {
            assert_eq!(
                negotiate(*header, available),
                *expected,
                "{:?} {available:?}",
                header.map(<[u8]>::escape_ascii).map(|e| e.to_string())
            );
        }
    }

    #[test]
    fn labels() {
        assert_eq!(Coding::Brotli.content_encoding(), Some("br"));
        assert_eq!(Coding::Gzip.content_encoding(), Some("gzip"));
        assert_eq!(Coding::Identity.content_encoding(), None);
    }
}
