//! The response head of a CGI script or a FastCGI application's stdout (RFC 3875 §6): CGI
//! header fields, `Status`, `Location`, then a blank line.
//!
//! Owns the CGI head's syntax, its limits and the response kind it makes (document, local
//! redirect, client redirect). Must not touch I/O or decide what the server does with a local
//! redirect (the server's exchange re-dispatches it). Lines and field-line syntax are the
//! shared `head` reader's; the `Content-Length` rules are the reverse proxy's
//! (`upstream::framing`), so a script's head is judged as strictly as an upstream's.
//!
//! Differences from an HTTP response head, all from RFC 3875: there is no status line (the
//! `Status` field carries it), lines may end in LF alone (§6.3: "the server MUST accept" a
//! script's NL), and the body's end is the end of the output, so `Transfer-Encoding` has no
//! place here (a script that sends it would have ampd frame a body it framed itself).

use memchr::memchr;

use crate::head::{FieldLineError, Fields, HeadError, HeadReader, LineEnds};
use crate::message::{Header, Version};
use crate::token::trim_ows;
use crate::upstream::framing;
use crate::upstream::{Limits, ResponseHead, UpstreamError};

/// What kind of response the head makes (RFC 3875 §6.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgiKind {
    /// A document: the status (default 200) and the body that follows the head.
    Document,
    /// `Location` with a local path and no `Status` (§6.2.2, Apache's rule): the server serves
    /// that path instead, as if the client had asked for it.
    LocalRedirect(String),
    /// `Location` with an absolute URI (§6.2.3, §6.2.4): passed on to the client, 302 unless
    /// `Status` says otherwise.
    ClientRedirect,
}

/// A parsed and validated CGI response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgiHead {
    pub status: u16,
    /// `Status`'s reason phrase, or the standard one for the code.
    pub reason: Box<str>,
    /// Every field but `Status`, in order, names as sent, values without surrounding OWS.
    pub headers: Vec<Header>,
    pub kind: CgiKind,
}

impl CgiHead {
    /// The head as the reverse proxy's code takes it: HTTP/1.1, the connection kept (the end
    /// of the script's output, not the head, ends the body), without `Status`.
    #[must_use]
    pub fn into_response_head(self) -> ResponseHead {
        ResponseHead {
            version: Version::Http11,
            status: self.status,
            reason: self.reason,
            headers: self.headers,
            keep_alive: true,
        }
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        crate::message::first_named(&self.headers, name)
    }
}

/// The outcome of feeding a [`CgiParser`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgiParse {
    /// More bytes are needed.
    Partial,
    /// The head is complete; it occupied the first `len` bytes (the blank line included).
    Complete { head: CgiHead, len: usize },
}

/// Why a script's head was refused. Every variant is a `502 Bad Gateway` for the client and a
/// line in the error log with the script's name; nothing of the response is passed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CgiError {
    /// A CR not followed by LF.
    BareCr,
    /// A line without a colon (`HTTP/1.1 200 OK` from a script that thinks it is NPH lands
    /// here too).
    MissingColon,
    /// A field name that is empty or not a token (a control byte, a space before the colon).
    BadHeaderName,
    /// A field value holding NUL or a control byte other than HTAB.
    InvalidHeaderValue,
    /// A line starting with SP or HTAB: obsolete line folding, never passed on.
    ObsFold,
    /// The head is longer than `Limits::max_head_bytes`.
    HeadTooLarge,
    /// More field lines than `Limits::max_headers`.
    TooManyHeaders,
    /// A second `Status` field.
    DuplicateStatus,
    /// A second `Location` field: which one redirects would be a guess.
    DuplicateLocation,
    /// `Status` that is not `3DIGIT [SP reason-phrase]` with a code in 100..=599.
    InvalidStatus,
    /// `Transfer-Encoding`: the end of the output delimits a script's body.
    TransferEncoding,
    /// A `Content-Length` that is not a plain decimal.
    InvalidContentLength,
    /// `Content-Length` values that differ.
    ConflictingContentLength,
    /// A local `Location` (starting with `/`) holding a byte that cannot be in a path and
    /// query (a space, a control or non-ASCII byte), so it cannot be served.
    InvalidLocalRedirect,
    /// The output ended before the blank line that ends the head.
    Incomplete,
}

impl CgiError {
    /// The status to answer the client with: always `502 Bad Gateway` (RFC 3875 §6.3, RFC
    /// 9110 §15.6.3: an invalid response from the gateway's script).
    #[must_use]
    pub fn status(&self) -> u16 {
        502
    }
}

impl std::fmt::Display for CgiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::BareCr => "bare CR in CGI response head",
            Self::MissingColon => "CGI header line without a colon",
            Self::BadHeaderName => "invalid CGI header field name",
            Self::InvalidHeaderValue => "control character in CGI header field value",
            Self::ObsFold => "obsolete line folding in CGI response head",
            Self::HeadTooLarge => "CGI response head too large",
            Self::TooManyHeaders => "too many CGI header fields",
            Self::DuplicateStatus => "more than one Status field",
            Self::DuplicateLocation => "more than one Location field",
            Self::InvalidStatus => "Status is not a code in 100..=599 and a reason",
            Self::TransferEncoding => "Transfer-Encoding in a CGI response",
            Self::InvalidContentLength => "invalid Content-Length",
            Self::ConflictingContentLength => "conflicting Content-Length values",
            Self::InvalidLocalRedirect => "local Location is not a path",
            Self::Incomplete => "CGI output ended before the end of its header",
        })
    }
}

impl std::error::Error for CgiError {}

/// A resumable parser of one CGI response head.
///
/// Call [`CgiParser::parse`] with everything received so far, appending to the same buffer
/// between calls; each line is judged when its LF arrives, so feeding byte by byte costs
/// O(n), and the same bytes give the same answer however they are split. When the output
/// ends, [`CgiParser::end_of_output`] turns a head still partial into [`CgiError::Incomplete`].
#[derive(Debug)]
pub struct CgiParser {
    limits: Limits,
    headers: Vec<Header>,
    status: Option<(u16, Box<str>)>,
    /// Lines, the head's size and its field lines.
    reader: HeadReader,
}

impl CgiParser {
    /// A parser enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            headers: Vec::new(),
            status: None,
            // §6.3: a script's lines end in NL; CRLF is accepted as well.
            reader: HeadReader::new(
                limits.max_head_bytes,
                limits.max_headers,
                LineEnds::LfAccepted,
            ),
        }
    }

    fn reset(&mut self) {
        *self = Self::new(self.limits);
    }

    /// Continues parsing `input`, which must start with the bytes given to earlier calls.
    ///
    /// # Errors
    /// A [`CgiError`] as soon as the input is known to be invalid or over a limit.
    pub fn parse(&mut self, input: &[u8]) -> Result<CgiParse, CgiError> {
        if input.len() < self.reader.scanned() {
            // The caller replaced the buffer instead of appending: start over.
            self.reset();
        }
        let outcome = self.parse_lines(input);
        if !matches!(outcome, Ok(CgiParse::Partial)) {
            self.reset();
        }
        outcome
    }

    /// [`parse`](Self::parse) once the script's output has ended: `input` is all of it.
    ///
    /// # Errors
    /// As `parse`, and [`CgiError::Incomplete`] when the blank line never came.
    pub fn end_of_output(&mut self, input: &[u8]) -> Result<CgiParse, CgiError> {
        match self.parse(input)? {
            CgiParse::Partial => {
                self.reset();
                Err(CgiError::Incomplete)
            }
            complete @ CgiParse::Complete { .. } => Ok(complete),
        }
    }

    fn parse_lines(&mut self, input: &[u8]) -> Result<CgiParse, CgiError> {
        let (status, headers) = (&mut self.status, &mut self.headers);
        let fields = self
            .reader
            .on_field_line(input, |name, value| accept(status, headers, name, value))?;
        match fields {
            Fields::Partial => Ok(CgiParse::Partial),
            Fields::Complete { len } => Ok(CgiParse::Complete {
                head: self.finish()?,
                len,
            }),
        }
    }

    /// The head once its blank line arrived: `Content-Length` checked, the kind decided.
    fn finish(&mut self) -> Result<CgiHead, CgiError> {
        framing::declared(Version::Http11, &self.headers).map_err(|error| match error {
            UpstreamError::ConflictingContentLength => CgiError::ConflictingContentLength,
            _ => CgiError::InvalidContentLength,
        })?;
        let headers = std::mem::take(&mut self.headers);
        let location = headers
            .iter()
            .find(|header| header.name.eq_ignore_ascii_case("location"))
            .map(|header| &*header.value);
        let status = self.status.take();
        let (kind, default_status) = match location {
            Some(location) if is_absolute_uri(location) => (CgiKind::ClientRedirect, 302),
            Some(location) if location.starts_with(b"/") && status.is_none() => {
                (CgiKind::LocalRedirect(local_path(location)?), 200)
            }
            _ => (CgiKind::Document, 200),
        };
        let (status, reason) = status.unwrap_or_else(|| {
            (
                default_status,
                crate::response::reason(default_status).into(),
            )
        });
        Ok(CgiHead {
            status,
            reason,
            headers,
            kind,
        })
    }
}

/// One field line of a script's head: `Status` kept apart, `Transfer-Encoding` and a second
/// `Location` refused, every other field kept in order.
fn accept(
    status: &mut Option<(u16, Box<str>)>,
    headers: &mut Vec<Header>,
    name: &str,
    value: &[u8],
) -> Result<(), CgiError> {
    if name.eq_ignore_ascii_case("status") {
        if status.is_some() {
            return Err(CgiError::DuplicateStatus);
        }
        *status = Some(parse_status(value)?);
        return Ok(());
    }
    if name.eq_ignore_ascii_case("transfer-encoding") {
        return Err(CgiError::TransferEncoding);
    }
    if name.eq_ignore_ascii_case("location")
        && headers
            .iter()
            .any(|header| header.name.eq_ignore_ascii_case("location"))
    {
        return Err(CgiError::DuplicateLocation);
    }
    headers.push(Header {
        name: name.into(),
        value: value.into(),
    });
    Ok(())
}

impl From<HeadError> for CgiError {
    fn from(error: HeadError) -> Self {
        match error {
            HeadError::TooLarge => Self::HeadTooLarge,
            HeadError::TooManyFields => Self::TooManyHeaders,
            // A script's reader accepts a bare LF (RFC 3875 §6.3), so this is never produced.
            HeadError::BareLf => Self::BareCr,
            HeadError::Field(fault) => match fault {
                FieldLineError::ObsFold => Self::ObsFold,
                FieldLineError::BareCr => Self::BareCr,
                FieldLineError::MissingColon => Self::MissingColon,
                FieldLineError::SpaceBeforeColon | FieldLineError::BadName => Self::BadHeaderName,
                FieldLineError::BadValue => Self::InvalidHeaderValue,
            },
        }
    }
}

/// `Status: 3DIGIT [SP reason-phrase]` (RFC 3875 §6.3.3), already OWS-trimmed. Without a
/// reason the standard one for the code is used.
fn parse_status(value: &[u8]) -> Result<(u16, Box<str>), CgiError> {
    let (digits, rest) = value.split_at(value.len().min(3));
    if digits.len() != 3 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(CgiError::InvalidStatus);
    }
    let status = digits
        .iter()
        .fold(0u16, |total, &b| total * 10 + u16::from(b - b'0'));
    if !(100..=599).contains(&status) {
        return Err(CgiError::InvalidStatus);
    }
    let reason = match rest {
        [] => crate::response::reason(status).into(),
        [b' ', reason @ ..] => String::from_utf8_lossy(trim_ows(reason)).into(),
        _ => return Err(CgiError::InvalidStatus),
    };
    Ok((status, reason))
}

/// `scheme ":" ...` (RFC 3986 §3.1: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`): an
/// absolute URI, which §6.2.3 makes a client redirect.
fn is_absolute_uri(location: &[u8]) -> bool {
    let Some(colon) = memchr(b':', location) else {
        return false;
    };
    let scheme = &location[..colon];
    scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// A local redirect's path and query: visible ASCII only (RFC 3875 §6.2.2 `local-pathquery`
/// is URI characters), since the server routes it like a request target.
fn local_path(location: &[u8]) -> Result<String, CgiError> {
    if location.iter().all(|&b| b.is_ascii_graphic()) {
        // All ASCII, so valid UTF-8.
        String::from_utf8(location.to_vec()).map_err(|_| CgiError::InvalidLocalRedirect)
    } else {
        Err(CgiError::InvalidLocalRedirect)
    }
}

#[cfg(test)]
mod tests;
