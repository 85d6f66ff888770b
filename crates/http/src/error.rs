//! Typed errors of the request-head parser and the status each one earns.
//!
//! Owns `ParseError` and its mapping to a status code. Must not touch I/O or know about
//! connections: whoever receives an error decides to answer and close (every parse error
//! leaves the byte stream unsynchronised, so the connection must close after the answer).

use std::fmt;

use crate::head::{FieldLineError, HeadError};

/// Why a request head was rejected.
///
/// Every variant maps to one status via [`ParseError::status`]:
/// 400 for syntax and framing faults, 414 / 431 for size limits, 501 for transfer codings ampd
/// does not implement and 505 for a major version other than 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// The request line is not `method SP request-target SP HTTP-version` (RFC 9112 §3).
    MalformedRequestLine,
    /// The method is empty or holds a byte that is not a `tchar` (RFC 9110 §9.1).
    BadMethod,
    /// The request-target is not origin-form, absolute-form (`http`/`https` with a valid
    /// authority, RFC 9112 §3.2.2), or asterisk-form with `OPTIONS` (RFC 9112 §3.2). Authority-form (`CONNECT`) is refused too: ampd does not
    /// tunnel, so a CONNECT target is a client error here.
    BadTarget,
    /// `HTTP/x.y` with a major version other than 1 (RFC 9110 §6.2 → 505).
    UnsupportedVersion,
    /// The request line exceeds `Limits::max_request_line` (RFC 9112 §3 → 414).
    RequestLineTooLong,
    /// The head exceeds `Limits::max_head_bytes` (RFC 6585 §5 → 431).
    HeaderSectionTooLarge,
    /// More field lines than `Limits::max_headers` (RFC 6585 §5 → 431).
    TooManyHeaders,
    /// A field name is empty or holds a byte that is not a `tchar` (RFC 9110 §5.1).
    BadHeaderName,
    /// Whitespace between a field name and the colon (RFC 9112 §5.1 MUST reject with 400).
    SpaceBeforeColon,
    /// A line starts with SP/HTAB: obsolete line folding (RFC 9112 §5.2), or whitespace
    /// before the first field line (RFC 9112 §2.2).
    ObsFold,
    /// A CR not immediately followed by LF (RFC 9112 §2.2).
    BareCr,
    /// A field value holds a control character such as NUL (RFC 9110 §5.5).
    InvalidHeaderValue,
    /// An HTTP/1.1 request without `Host` (RFC 9112 §3.2 MUST respond 400).
    MissingHost,
    /// More than one `Host` field line (RFC 9112 §3.2).
    MultipleHost,
    /// A `Host` value that is not `uri-host [ ":" port ]` (RFC 9112 §3.2, RFC 9110 §7.2): see
    /// `authority::is_valid_authority`.
    BadHost,
    /// Both `Content-Length` and `Transfer-Encoding`: the classic smuggling vector
    /// (RFC 9112 §6.1 permits rejecting; ampd always does).
    ContentLengthWithTransferEncoding,
    /// More than one `Content-Length` field line, or a list such as `5, 5`
    /// (RFC 9112 §6.3 item 5: ampd is strict and accepts exactly one value).
    DuplicateContentLength,
    /// `Content-Length` is not `1*DIGIT` or does not fit in a `u64` (RFC 9110 §8.6).
    InvalidContentLength,
    /// `Transfer-Encoding` in an HTTP/1.0 request: RFC 9112 §6.1 says the framing MUST be
    /// treated as faulty, so ampd answers 400 and closes.
    TransferEncodingInHttp10,
    /// `Transfer-Encoding` that names only `chunked` but applies it twice (RFC 9112 §7.1) or is
    /// empty: the body length cannot be determined (RFC 9112 §6.3 item 4 → 400).
    TransferEncodingNotChunked,
    /// `Transfer-Encoding` names a coding other than `chunked` (`gzip, chunked`, `xchunked`,
    /// `chunked, identity`); ampd implements only chunked (RFC 9112 §6.1 → 501).
    UnknownTransferCoding,
}

impl From<HeadError> for ParseError {
    fn from(error: HeadError) -> Self {
        match error {
            HeadError::TooLarge => Self::HeaderSectionTooLarge,
            HeadError::TooManyFields => Self::TooManyHeaders,
            // A request's reader accepts a bare LF (`LineEnds::LfAccepted`), so this is never
            // produced for one; were it, the line end is the fault.
            HeadError::BareLf => Self::BareCr,
            HeadError::Field(fault) => match fault {
                FieldLineError::ObsFold => Self::ObsFold,
                FieldLineError::BareCr => Self::BareCr,
                FieldLineError::MissingColon | FieldLineError::BadName => Self::BadHeaderName,
                FieldLineError::SpaceBeforeColon => Self::SpaceBeforeColon,
                FieldLineError::BadValue => Self::InvalidHeaderValue,
            },
        }
    }
}

impl ParseError {
    /// The status code to answer with before closing the connection.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::RequestLineTooLong => 414,
            Self::HeaderSectionTooLarge | Self::TooManyHeaders => 431,
            Self::UnknownTransferCoding => 501,
            Self::UnsupportedVersion => 505,
            Self::MalformedRequestLine
            | Self::BadMethod
            | Self::BadTarget
            | Self::BadHeaderName
            | Self::SpaceBeforeColon
            | Self::ObsFold
            | Self::BareCr
            | Self::InvalidHeaderValue
            | Self::MissingHost
            | Self::MultipleHost
            | Self::BadHost
            | Self::ContentLengthWithTransferEncoding
            | Self::DuplicateContentLength
            | Self::InvalidContentLength
            | Self::TransferEncodingInHttp10
            | Self::TransferEncodingNotChunked => 400,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::MalformedRequestLine => "malformed request line",
            Self::BadMethod => "invalid method token",
            Self::BadTarget => "invalid request-target",
            Self::UnsupportedVersion => "unsupported HTTP major version",
            Self::RequestLineTooLong => "request line too long",
            Self::HeaderSectionTooLarge => "header section too large",
            Self::TooManyHeaders => "too many header fields",
            Self::BadHeaderName => "invalid header field name",
            Self::SpaceBeforeColon => "whitespace between header field name and colon",
            Self::ObsFold => "obsolete line folding",
            Self::BareCr => "bare CR in request head",
            Self::InvalidHeaderValue => "invalid character in header field value",
            Self::MissingHost => "HTTP/1.1 request without Host",
            Self::MultipleHost => "more than one Host header field",
            Self::BadHost => "invalid Host header field value",
            Self::ContentLengthWithTransferEncoding => {
                "both Content-Length and Transfer-Encoding present"
            }
            Self::DuplicateContentLength => "duplicate Content-Length",
            Self::InvalidContentLength => "invalid Content-Length",
            Self::TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 request",
            Self::TransferEncodingNotChunked => "Transfer-Encoding does not end in chunked",
            Self::UnknownTransferCoding => "unsupported transfer coding",
        };
        f.write_str(text)
    }
}

impl std::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::ParseError;

    #[test]
    fn statuses_follow_the_rfcs() {
        assert_eq!(ParseError::RequestLineTooLong.status(), 414);
        assert_eq!(ParseError::TooManyHeaders.status(), 431);
        assert_eq!(ParseError::HeaderSectionTooLarge.status(), 431);
        assert_eq!(ParseError::UnknownTransferCoding.status(), 501);
        assert_eq!(ParseError::UnsupportedVersion.status(), 505);
        assert_eq!(ParseError::ContentLengthWithTransferEncoding.status(), 400);
        assert_eq!(ParseError::TransferEncodingInHttp10.status(), 400);
    }

    #[test]
    fn display_is_human_text() {
        assert_eq!(ParseError::BareCr.to_string(), "bare CR in request head");
        assert_eq!(
            ParseError::MissingHost.to_string(),
            "HTTP/1.1 request without Host"
        );
    }
}
