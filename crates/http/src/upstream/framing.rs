//! What a response head declares about its body and its connection: the `Content-Length` /
//! `Transfer-Encoding` checks (RFC 9110 §8.6, RFC 9112 §6) and persistence (RFC 9112 §9.3).
//! This is where a response that two hops could frame differently is refused.
//!
//! Owns the cross-field rules. Must not parse syntax (`parser.rs` has done it) or know the
//! request (`body.rs` combines the two).
//!
//! Order of checks, so every input maps to one error: `Content-Length` faults in the order the
//! fields arrived, then Transfer-Encoding in HTTP/1.0, then both fields present, then the
//! coding list.

use crate::request::{Header, Version};
use crate::token::{list_elements, trim_ows};

use super::error::UpstreamError;

/// The framing a head declares, before the request method and status are taken into account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declared {
    /// Neither field: the body, if the status has one, runs until the connection closes.
    Unframed,
    /// `Content-Length`, duplicates folded.
    Length(u64),
    /// `Transfer-Encoding` ending in a single `chunked`; `other_codings` when codings such as
    /// `gzip` come before it.
    Chunked { other_codings: bool },
}

/// Validates the framing fields of a head.
pub(crate) fn declared(version: Version, headers: &[Header]) -> Result<Declared, UpstreamError> {
    let mut content_length: Option<u64> = None;
    let mut codings = Codings::default();
    for header in headers {
        let name = &*header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let length = parse_content_length(&header.value)?;
            if content_length.is_some_and(|earlier| earlier != length) {
                return Err(UpstreamError::ConflictingContentLength);
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            codings.add(&header.value);
        }
    }
    if !codings.present {
        return Ok(content_length.map_or(Declared::Unframed, Declared::Length));
    }
    if version == Version::Http10 {
        return Err(UpstreamError::TransferEncodingInHttp10);
    }
    if content_length.is_some() {
        return Err(UpstreamError::ContentLengthWithTransferEncoding);
    }
    if !codings.last_is_chunked || codings.chunked != 1 {
        return Err(UpstreamError::TransferEncodingNotChunked);
    }
    Ok(Declared::Chunked {
        other_codings: codings.others,
    })
}

/// Whether the upstream keeps the connection (RFC 9112 §9.3): `close` ends it in any version;
/// HTTP/1.0 persists only with `keep-alive`.
pub(crate) fn keep_alive(version: Version, headers: &[Header]) -> bool {
    let mut close = false;
    let mut keep_alive = false;
    for header in headers {
        if header.name.eq_ignore_ascii_case("connection") {
            for option in list_elements(&header.value) {
                close |= option.eq_ignore_ascii_case(b"close");
                keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    !close
        && match version {
            // HTTP/1 heads never say 2.0 (the parser refuses it); an HTTP/2 connection persists.
            Version::Http11 | Version::Http2 => true,
            Version::Http10 => keep_alive,
        }
}

/// What the Transfer-Encoding field lines add up to, in order across lines (RFC 9110 §5.3: the
/// lines combine into one list).
#[derive(Debug, Default)]
struct Codings {
    present: bool,
    last_is_chunked: bool,
    chunked: usize,
    others: bool,
}

impl Codings {
    fn add(&mut self, value: &[u8]) {
        self.present = true;
        for coding in list_elements(value) {
            // Exactly `chunked`: it takes no parameters, and `xchunked` or `chunked;x=1` is
            // some other coding that a lenient hop might still read as chunked.
            let chunked = coding.eq_ignore_ascii_case(b"chunked");
            self.last_is_chunked = chunked;
            if chunked {
                self.chunked += 1;
            } else {
                self.others = true;
            }
        }
    }
}

/// `Content-Length = 1*DIGIT` fitting a `u64`, or a list of identical such values, which
/// RFC 9110 §8.6 lets a recipient fold into one (an intermediary that combined duplicate
/// lines makes them). An empty element is invalid: `5,` is not a length.
fn parse_content_length(value: &[u8]) -> Result<u64, UpstreamError> {
    let mut folded: Option<u64> = None;
    for element in value.split(|&b| b == b',') {
        let length = parse_decimal(trim_ows(element)).ok_or(UpstreamError::InvalidContentLength)?;
        if folded.is_some_and(|earlier| earlier != length) {
            return Err(UpstreamError::ConflictingContentLength);
        }
        folded = Some(length);
    }
    folded.ok_or(UpstreamError::InvalidContentLength)
}

/// `1*DIGIT` that fits a `u64`: no sign, no spaces, no hex.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |total, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        total.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Vec<Header> {
        pairs
            .iter()
            .map(|(name, value)| Header {
                name: (*name).into(),
                value: value.as_bytes().into(),
            })
            .collect()
    }

    fn declared11(pairs: &[(&str, &str)]) -> Result<Declared, UpstreamError> {
        declared(Version::Http11, &fields(pairs))
    }

    #[test]
    fn content_length_syntax() {
        assert_eq!(parse_content_length(b"0"), Ok(0));
        assert_eq!(parse_content_length(b"00042"), Ok(42));
        assert_eq!(parse_content_length(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_content_length(b"7, 7,7"), Ok(7));
        assert_eq!(
            parse_content_length(b"7, 8"),
            Err(UpstreamError::ConflictingContentLength)
        );
        for bad in [
            &b"18446744073709551616"[..],
            b"+5",
            b"-1",
            b"5 5",
            b"",
            b"0x10",
            b"1e3",
            b"5,",
            b",5",
            b"5,,5",
        ] {
            assert_eq!(
                parse_content_length(bad),
                Err(UpstreamError::InvalidContentLength),
                "{}",
                bad.escape_ascii()
            );
        }
    }

    #[test]
    fn duplicates_fold_only_when_equal() {
        assert_eq!(
            declared11(&[("Content-Length", "3"), ("content-length", "003")]),
            Ok(Declared::Length(3))
        );
        assert_eq!(
            declared11(&[("Content-Length", "3"), ("Content-Length", "4")]),
            Err(UpstreamError::ConflictingContentLength)
        );
    }

    #[test]
    fn transfer_codings() {
        assert_eq!(
            declared11(&[("Transfer-Encoding", "Chunked")]),
            Ok(Declared::Chunked {
                other_codings: false
            })
        );
        assert_eq!(
            declared11(&[
                ("Transfer-Encoding", "gzip"),
                ("Transfer-Encoding", "chunked")
            ]),
            Ok(Declared::Chunked {
                other_codings: true
            })
        );
        for bad in [
            "chunked, gzip",
            "identity",
            "chunked, chunked",
            "",
            "xchunked",
            "chunked;x=1",
            "\"chunked\"",
        ] {
            assert_eq!(
                declared11(&[("Transfer-Encoding", bad)]),
                Err(UpstreamError::TransferEncodingNotChunked),
                "{bad}"
            );
        }
        assert_eq!(
            declared(
                Version::Http10,
                &fields(&[("Transfer-Encoding", "chunked")])
            ),
            Err(UpstreamError::TransferEncodingInHttp10)
        );
    }

    #[test]
    fn persistence() {
        type Case<'a> = (Version, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case<'_>] = &[
            (Version::Http11, &[], true),
            (Version::Http11, &[("Connection", "Close")], false),
            (Version::Http11, &[("Connection", "upgrade, close")], false),
            (Version::Http10, &[], false),
            (Version::Http10, &[("Connection", "Keep-Alive")], true),
            (
                Version::Http10,
                &[("Connection", "keep-alive"), ("Connection", "close")],
                false,
            ),
        ];
        for (version, pairs, expected) in cases {
            assert_eq!(keep_alive(*version, &fields(pairs)), *expected, "{pairs:?}");
        }
    }
}
