//! Message semantics decided once the head is complete: Host rules, body framing and
//! persistence (RFC 9112 §3.2, §6, §9.3). This is where request smuggling is refused.
//!
//! Owns the checks that span several fields. Must not parse syntax (`request.rs` has done it)
//! or touch I/O.
//!
//! Order of checks, so every input maps to one error: per-field faults in the order the fields
//! were sent (bad Host, bad or repeated Content-Length), then Host count, then
//! Transfer-Encoding in HTTP/1.0, then Content-Length with Transfer-Encoding, then the coding
//! list: a coding ampd does not implement → 501 (RFC 9112 §6.1), wherever it stands, as nginx,
//! Apache and lighttpd answer; then a list of `chunked` alone that is empty or names it twice →
//! 400 (§6.3 item 4, §7.1). §6.3's 400 for "chunked is not the final encoding" presumes codings
//! the server can apply; a list with one it cannot apply is §6.1's case, and either answer
//! refuses the body and closes the connection, so neither lets a body through unframed.

use crate::authority::is_valid_authority;
use crate::error::ParseError;
use crate::head::{decimal, ConnectionOptions, TransferCodings};
use crate::message::{BodyFraming, Header, Method, RequestHead, Version};

/// The body framing of a request's coding list: `chunked` once and last, nothing else.
fn chunked_framing(codings: &TransferCodings) -> Result<BodyFraming, ParseError> {
    if codings.others {
        return Err(ParseError::UnknownTransferCoding);
    }
    if !codings.is_chunked_once_last() {
        return Err(ParseError::TransferEncodingNotChunked);
    }
    Ok(BodyFraming::Chunked)
}

/// Validates the cross-field rules and builds the head.
pub(crate) fn finish(
    method: Method,
    target: Box<str>,
    version: Version,
    headers: Vec<Header>,
) -> Result<RequestHead, ParseError> {
    let mut host_count = 0usize;
    let mut content_length: Option<u64> = None;
    let mut codings = TransferCodings::default();
    let mut connection = ConnectionOptions::default();
    let mut expect_continue = false;

    for header in &headers {
        let name = header.name.as_bytes();
        let value = &*header.value;
        // Dispatch on length first: most fields are none of these, and a length compare is
        // cheaper than five case-insensitive compares.
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                host_count += 1;
                if !is_valid_authority(value, true) {
                    return Err(ParseError::BadHost);
                }
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                expect_continue |= value.eq_ignore_ascii_case(b"100-continue");
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                connection.add(value);
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                if content_length.is_some() {
                    return Err(ParseError::DuplicateContentLength);
                }
                content_length = Some(parse_content_length(value)?);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => codings.add(value),
            _ => {}
        }
    }

    if host_count > 1 {
        return Err(ParseError::MultipleHost);
    }
    if host_count == 0 && version == Version::Http11 {
        return Err(ParseError::MissingHost);
    }
    let body = if codings.present {
        if version == Version::Http10 {
            return Err(ParseError::TransferEncodingInHttp10);
        }
        if content_length.is_some() {
            return Err(ParseError::ContentLengthWithTransferEncoding);
        }
        chunked_framing(&codings)?
    } else {
        content_length.map_or(BodyFraming::None, BodyFraming::Length)
    };
    let keep_alive = connection.persist(version);

    Ok(RequestHead {
        method,
        target,
        version,
        headers,
        body,
        keep_alive,
        expect_continue: expect_continue && version == Version::Http11,
    })
}

/// `Content-Length = 1*DIGIT` that fits a `u64`. A comma means a list, which ampd refuses as a
/// duplicate rather than collapsing equal members (RFC 9112 §6.3 item 5 allows either).
fn parse_content_length(value: &[u8]) -> Result<u64, ParseError> {
    if value.contains(&b',') {
        return Err(ParseError::DuplicateContentLength);
    }
    decimal(value).ok_or(ParseError::InvalidContentLength)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_syntax() {
        assert_eq!(parse_content_length(b"0"), Ok(0));
        assert_eq!(parse_content_length(b"00042"), Ok(42));
        assert_eq!(parse_content_length(b"18446744073709551615"), Ok(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b"+5",
            b"-1",
            b"5 ",
            b"",
            b"0x10",
            b"1e3",
        ] {
            assert_eq!(
                parse_content_length(bad),
                Err(ParseError::InvalidContentLength),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_content_length(b"5, 5"),
            Err(ParseError::DuplicateContentLength)
        );
    }

    #[test]
    fn transfer_codings() {
        let mut codings = TransferCodings::default();
        codings.add(b"gzip");
        codings.add(b"Chunked");
        assert_eq!(
            chunked_framing(&codings),
            Err(ParseError::UnknownTransferCoding)
        );

        // RFC 9112 §6.1 → 501 for a coding ampd does not implement, also where chunked is not
        // final (`xchunked` alone, `identity` after chunked).
        for unknown in [
            &b"xchunked"[..],
            b"chunked, identity",
            b"gzip",
            b"chunked, gzip",
        ] {
            let mut codings = TransferCodings::default();
            codings.add(unknown);
            assert_eq!(
                chunked_framing(&codings),
                Err(ParseError::UnknownTransferCoding),
                "{}",
                String::from_utf8_lossy(unknown)
            );
        }

        let mut codings = TransferCodings::default();
        codings.add(b"chunked, chunked");
        assert_eq!(
            chunked_framing(&codings),
            Err(ParseError::TransferEncodingNotChunked)
        );

        let mut codings = TransferCodings::default();
        codings.add(b"");
        assert_eq!(
            chunked_framing(&codings),
            Err(ParseError::TransferEncodingNotChunked)
        );

        let mut codings = TransferCodings::default();
        codings.add(b" chunked ,");
        assert_eq!(chunked_framing(&codings), Ok(BodyFraming::Chunked));
    }
}
