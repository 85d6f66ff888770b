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

use crate::head::{folded_content_length, ConnectionOptions, ContentLengthFault, TransferCodings};
use crate::message::{Header, Version};

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
    let mut codings = TransferCodings::default();
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
    if !codings.is_chunked_once_last() {
        return Err(UpstreamError::TransferEncodingNotChunked);
    }
    Ok(Declared::Chunked {
        other_codings: codings.others,
    })
}

/// Whether the upstream keeps the connection (RFC 9112 §9.3): `close` ends it in any version;
/// HTTP/1.0 persists only with `keep-alive`.
pub(crate) fn keep_alive(version: Version, headers: &[Header]) -> bool {
    let mut options = ConnectionOptions::default();
    for header in headers {
        if header.name.eq_ignore_ascii_case("connection") {
            options.add(&header.value);
        }
    }
    options.persist(version)
}

fn parse_content_length(value: &[u8]) -> Result<u64, UpstreamError> {
    folded_content_length(value).map_err(|fault| match fault {
        ContentLengthFault::Invalid => UpstreamError::InvalidContentLength,
        ContentLengthFault::Conflicting => UpstreamError::ConflictingContentLength,
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
