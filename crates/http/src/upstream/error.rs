//! Why an upstream's response was refused.
//!
//! Owns `UpstreamError`. Must not touch I/O or decide what the client sees: every variant means
//! the upstream broke HTTP/1.1 (or spoke something else), so the caller answers `502 Bad
//! Gateway` ([`UpstreamError::status`]), logs [`Display`](std::fmt::Display) with the upstream's
//! name, and closes the upstream connection (its byte stream can no longer be trusted).

use std::fmt;

use crate::head::{FieldLineError, HeadError};

/// A fault in an upstream's response head or its framing. Nothing of such a response is passed
/// to the client: a proxy that forwards a head it does not understand the same way as the
/// client does is a response-splitting and desync vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpstreamError {
    /// The status line is not `HTTP-version SP status-code SP reason-phrase` (RFC 9112 §4), or
    /// something other than HTTP answered.
    MalformedStatusLine,
    /// A well-formed `HTTP/x.y` other than `HTTP/1.0` and `HTTP/1.1`: ampd speaks HTTP/1.1 to
    /// upstreams, so any other version is one it cannot frame.
    UnsupportedVersion,
    /// The status code is not three digits in `100..=599` (RFC 9110 §15).
    InvalidStatus,
    /// The reason phrase holds a control character other than HTAB (RFC 9112 §4).
    InvalidReasonPhrase,
    /// A CR not immediately followed by LF (RFC 9112 §2.2).
    BareCr,
    /// A line ended by LF alone. RFC 9112 §2.2 lets a recipient accept it, but a proxy that
    /// does while the next hop does not disagrees on where the head ends: refused.
    BareLf,
    /// A field line without a colon.
    MissingColon,
    /// A field name that is empty or holds a byte that is not a `tchar` (RFC 9110 §5.1).
    BadHeaderName,
    /// Whitespace between a field name and its colon (RFC 9112 §5.1: MUST reject).
    SpaceBeforeColon,
    /// A line starting with SP or HTAB: obsolete line folding (RFC 9112 §5.2 lets a proxy
    /// reject it or unfold it; ampd rejects), or whitespace before the first field line.
    ObsFold,
    /// A field value holding NUL or another control character other than HTAB (RFC 9110 §5.5).
    InvalidHeaderValue,
    /// The head is longer than `Limits::max_head_bytes`.
    HeadTooLarge,
    /// More field lines than `Limits::max_headers`.
    TooManyHeaders,
    /// `Content-Length` values that differ, across lines or within one list (RFC 9110 §8.6;
    /// identical values are folded into one).
    ConflictingContentLength,
    /// A `Content-Length` that is not a plain decimal fitting a `u64` (RFC 9110 §8.6).
    InvalidContentLength,
    /// `Transfer-Encoding` whose final coding is not `chunked`, that applies `chunked` twice,
    /// or that is empty (RFC 9112 §6.3 item 4 would read such a body until close; a proxy
    /// cannot re-frame that safely, so it is refused).
    TransferEncodingNotChunked,
    /// Both `Transfer-Encoding` and `Content-Length` (RFC 9112 §6.3 item 3: a proxy ought to
    /// treat it as an error, since one of the two hops may frame by the other field).
    ContentLengthWithTransferEncoding,
    /// `Transfer-Encoding` in an HTTP/1.0 response (RFC 9112 §6.1: MUST treat the framing as
    /// faulty).
    TransferEncodingInHttp10,
    /// A body under a transfer coding besides `chunked` (`gzip, chunked`). Well-formed, but
    /// ampd never offers `TE` upstream and cannot pass such a coding on to a client that did
    /// not ask for it either (nginx refuses it the same way).
    UnsupportedTransferCoding,
}

impl From<HeadError> for UpstreamError {
    fn from(error: HeadError) -> Self {
        match error {
            HeadError::TooLarge => Self::HeadTooLarge,
            HeadError::TooManyFields => Self::TooManyHeaders,
            HeadError::BareLf => Self::BareLf,
            HeadError::Field(fault) => match fault {
                FieldLineError::ObsFold => Self::ObsFold,
                FieldLineError::BareCr => Self::BareCr,
                FieldLineError::MissingColon => Self::MissingColon,
                FieldLineError::SpaceBeforeColon => Self::SpaceBeforeColon,
                FieldLineError::BadName => Self::BadHeaderName,
                FieldLineError::BadValue => Self::InvalidHeaderValue,
            },
        }
    }
}

impl UpstreamError {
    /// The status to answer the client with: always `502 Bad Gateway` (RFC 9110 §15.6.3: the
    /// gateway received an invalid response from the server it accessed).
    #[must_use]
    pub fn status(&self) -> u16 {
        502
    }
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MalformedStatusLine => "malformed status line",
            Self::UnsupportedVersion => "HTTP version other than 1.0 or 1.1",
            Self::InvalidStatus => "status code not in 100..=599",
            Self::InvalidReasonPhrase => "control character in reason phrase",
            Self::BareCr => "bare CR in response head",
            Self::BareLf => "line ended by bare LF in response head",
            Self::MissingColon => "header line without a colon",
            Self::BadHeaderName => "invalid header field name",
            Self::SpaceBeforeColon => "whitespace between header field name and colon",
            Self::ObsFold => "obsolete line folding",
            Self::InvalidHeaderValue => "control character in header field value",
            Self::HeadTooLarge => "response head too large",
            Self::TooManyHeaders => "too many header fields",
            Self::ConflictingContentLength => "conflicting Content-Length values",
            Self::InvalidContentLength => "invalid Content-Length",
            Self::TransferEncodingNotChunked => "Transfer-Encoding does not end in chunked",
            Self::ContentLengthWithTransferEncoding => {
                "both Content-Length and Transfer-Encoding present"
            }
            Self::TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 response",
            Self::UnsupportedTransferCoding => "transfer coding other than chunked",
        })
    }
}

impl std::error::Error for UpstreamError {}

#[cfg(test)]
mod tests {
    use super::UpstreamError;

    #[test]
    fn every_fault_is_a_bad_gateway_with_human_text() {
        assert_eq!(UpstreamError::BareLf.status(), 502);
        assert_eq!(UpstreamError::HeadTooLarge.status(), 502);
        assert_eq!(
            UpstreamError::ContentLengthWithTransferEncoding.to_string(),
            "both Content-Length and Transfer-Encoding present"
        );
    }
}
