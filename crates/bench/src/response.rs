//! The load generator's strict HTTP/1.x response reader: bytes in, framing decisions out.
//!
//! Owns: finding where each response ends on a connection (status line, `Content-Length`,
//! chunked bodies, read-until-close) and refusing anything that is not well-formed, so a broken
//! server shows up as an error instead of as a fast server. Must not touch: sockets, clocks,
//! counting (the client loop feeds it and records results).
//!
//! Lines, field lines and their limits are read by `ampd_http::head`, and chunked bodies by
//! `ampd_http::ChunkedDecoder`: the one strict reader the server, its proxy and its ACME client
//! use, so a fault found in one is fixed in all. The reader hands field lines over borrowed,
//! so reading a response allocates nothing (this runs once per request measured).
//!
//! Sources: RFC 9112 §4 (status line), §5 (field lines), §6.3 (message body length: 1xx/204/304,
//! Transfer-Encoding then Content-Length then close), §7.1 (chunked transfer coding), §9.3
//! (persistence: HTTP/1.1 default, HTTP/1.0 keep-alive).

use std::fmt;

use ampd_http::head::{
    folded_content_length, ConnectionOptions, Fields, HeadError, HeadReader, LineEnds,
    TransferCodings,
};
use ampd_http::{ChunkedDecoder, ChunkedError, Version};

/// The longest response head (status line and fields) accepted before calling it broken.
pub const MAX_HEAD: usize = 64 * 1024;

/// Why a response could not be parsed; each maps to one error kind in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Not `HTTP/1.x NNN reason CRLF`.
    BadStatusLine,
    /// A malformed field line, a bad or conflicting `Content-Length`, an unsupported
    /// `Transfer-Encoding`, or a head longer than [`MAX_HEAD`].
    BadHeader(&'static str),
    /// Broken chunked framing (size line, chunk terminator, trailer section).
    BadChunked(&'static str),
    /// The connection closed before the response was complete.
    Truncated,
}

impl fmt::Display for ParseError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::BadStatusLine => formatter.write_str("malformed status line"),
            ParseError::BadHeader(why) => write!(formatter, "malformed header: {why}"),
            ParseError::BadChunked(why) => write!(formatter, "malformed chunked body: {why}"),
            ParseError::Truncated => formatter.write_str("connection closed mid-response"),
        }
    }
}

impl From<HeadError> for ParseError {
    fn from(error: HeadError) -> Self {
        use ampd_http::head::FieldLineError;
        ParseError::BadHeader(match error {
            HeadError::TooLarge => "head longer than 64 KiB",
            HeadError::TooManyFields => "too many field lines",
            HeadError::BareLf => "line not ended by CRLF",
            HeadError::Field(fault) => match fault {
                FieldLineError::ObsFold => "obsolete line folding",
                FieldLineError::BareCr => "bare CR in a field line",
                FieldLineError::MissingColon => "field line without a colon",
                FieldLineError::SpaceBeforeColon => "whitespace before the colon",
                FieldLineError::BadName => "invalid field name",
                FieldLineError::BadValue => "control character in a field value",
            },
        })
    }
}

impl From<ChunkedError> for ParseError {
    fn from(error: ChunkedError) -> Self {
        ParseError::BadChunked(error.reason())
    }
}

/// One complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Body bytes after removing any chunked framing.
    pub body_len: u64,
    /// Every byte this response took on the wire (interim 1xx responses included).
    pub wire_len: u64,
    /// Whether the server lets the connection carry another request (RFC 9112 §9.3).
    pub keep_alive: bool,
}

/// What the head said about the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    status: u16,
    keep_alive: bool,
}

#[derive(Debug, Clone)]
enum Phase {
    /// Waiting for (the rest of) a response head.
    Head,
    /// A body of known length.
    Body { head: Head, remaining: u64 },
    Chunked {
        head: Head,
        decoder: Box<ChunkedDecoder>,
    },
    /// No framing: the body runs until the server closes.
    UntilClose { head: Head },
}

/// The framing facts of the field lines read so far.
#[derive(Debug, Default, Clone, Copy)]
struct Framing {
    content_length: Option<u64>,
    codings: TransferCodings,
    connection: ConnectionOptions,
}

impl Framing {
    fn add(&mut self, name: &str, value: &[u8]) -> Result<(), ParseError> {
        if name.eq_ignore_ascii_case("content-length") {
            let length = folded_content_length(value)
                .map_err(|_| ParseError::BadHeader("invalid or conflicting Content-Length"))?;
            if self.content_length.is_some_and(|earlier| earlier != length) {
                return Err(ParseError::BadHeader("conflicting Content-Length"));
            }
            self.content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            self.codings.add(value);
        } else if name.eq_ignore_ascii_case("connection") {
            self.connection.add(value);
        }
        Ok(())
    }
}

/// An incremental parser for the responses on one connection, one after another.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    phase: Phase,
    /// Bytes of a head that arrived split across reads (the reader's positions index them).
    partial_head: Vec<u8>,
    reader: HeadReader,
    /// The status line once read: (version, status).
    status_line: Option<(Version, u16)>,
    framing: Framing,
    body_len: u64,
    wire_len: u64,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseParser {
    #[must_use]
    pub fn new() -> ResponseParser {
        ResponseParser {
            phase: Phase::Head,
            partial_head: Vec::new(),
            // No count limit beyond the size: every field line is at least `x:` and CRLF.
            reader: HeadReader::new(MAX_HEAD, MAX_HEAD, LineEnds::CrlfOnly),
            status_line: None,
            framing: Framing::default(),
            body_len: 0,
            wire_len: 0,
        }
    }

    /// True while no byte of the next response has arrived.
    #[cfg(test)]
    #[must_use]
    pub fn is_between_responses(&self) -> bool {
        matches!(self.phase, Phase::Head) && self.partial_head.is_empty() && self.wire_len == 0
    }

    /// True once a head said its body runs until the server closes (no length, not chunked).
    #[must_use]
    pub fn reads_until_close(&self) -> bool {
        matches!(self.phase, Phase::UntilClose { .. })
    }

    /// True while the head is still being read (the client's `ReadingHead` state).
    #[must_use]
    pub fn in_head(&self) -> bool {
        matches!(self.phase, Phase::Head)
    }

    /// Consumes bytes of `input` up to the end of at most one response.
    ///
    /// Returns how many bytes were used and the response if it completed; bytes after the end of
    /// a response are left for the next call (they belong to the next pipelined response).
    ///
    /// # Errors
    /// Any [`ParseError`] except `Truncated`; the connection cannot be used after one.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Response>), ParseError> {
        let mut used = 0;
        while used < input.len() {
            let rest = &input[used..];
            let (taken, done) = match &mut self.phase {
                Phase::Head => self.feed_head(rest)?,
                Phase::Body { remaining, .. } => {
                    let take = (*remaining).min(rest.len() as u64);
                    self.body_len += take;
                    *remaining -= take;
                    (take as usize, *remaining == 0)
                }
                Phase::Chunked { decoder, .. } => {
                    let mut body_len = 0;
                    let progress = decoder.feed(rest, &mut |data| body_len += data.len() as u64)?;
                    self.body_len += body_len;
                    (progress.consumed, progress.done)
                }
                Phase::UntilClose { .. } => {
                    self.body_len += rest.len() as u64;
                    (rest.len(), false)
                }
            };
            used += taken;
            self.wire_len += taken as u64;
            if done {
                return Ok((used, Some(self.complete())));
            }
        }
        Ok((used, None))
    }

    /// The server closed the connection: completes a read-until-close body.
    ///
    /// Returns `Ok(None)` when the close fell between responses.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] when a response was under way.
    pub fn finish(&mut self) -> Result<Option<Response>, ParseError> {
        match self.phase {
            Phase::UntilClose { .. } => Ok(Some(self.complete())),
            Phase::Head if self.partial_head.is_empty() && self.wire_len == 0 => Ok(None),
            _ => Err(ParseError::Truncated),
        }
    }

    fn complete(&mut self) -> Response {
        let head = match std::mem::replace(&mut self.phase, Phase::Head) {
            Phase::Body { head, .. } | Phase::Chunked { head, .. } => head,
            Phase::UntilClose { head } => Head {
                keep_alive: false,
                ..head
            },
            // `complete` is only called after a head was parsed; a zeroed head keeps this total.
            Phase::Head => Head {
                status: 0,
                keep_alive: false,
            },
        };
        let response = Response {
            status: head.status,
            body_len: self.body_len,
            wire_len: self.wire_len,
            keep_alive: head.keep_alive,
        };
        self.body_len = 0;
        self.wire_len = 0;
        response
    }

    /// Takes bytes of a head; returns (bytes used, whether a bodiless response completed).
    fn feed_head(&mut self, input: &[u8]) -> Result<(usize, bool), ParseError> {
        let already = self.partial_head.len();
        // Fast path: the whole head is in this read, read it in place without copying. A head
        // split across reads is kept, so the reader's positions stay valid in `partial_head`.
        let outcome = if already == 0 {
            self.read_head(input)
        } else {
            let mut partial = std::mem::take(&mut self.partial_head);
            partial.extend_from_slice(input);
            let outcome = self.read_head(&partial);
            self.partial_head = partial;
            outcome
        };
        match outcome? {
            None => {
                if already == 0 {
                    self.partial_head.extend_from_slice(input);
                }
                Ok((input.len(), false))
            }
            Some(len) => {
                self.partial_head.clear();
                self.reader.reset();
                let (version, status) = self.status_line.take().unwrap_or((Version::Http11, 0));
                let framing = std::mem::take(&mut self.framing);
                Ok((len - already, self.start_body(version, status, &framing)?))
            }
        }
    }

    /// Continues the head in `buf` (which starts with every head byte given before): its
    /// length once the empty line arrived.
    fn read_head(&mut self, buf: &[u8]) -> Result<Option<usize>, ParseError> {
        if self.status_line.is_none() {
            let Some(lf) = self.reader.find_lf(buf) else {
                check_status_prefix(buf)?;
                self.reader.check_size(buf.len())?;
                return Ok(None);
            };
            self.reader.check_size(lf + 1)?;
            let line = self
                .reader
                .strip_line_end(&buf[..lf])
                .map_err(|_| ParseError::BadStatusLine)?;
            self.status_line = Some(parse_status_line(line)?);
            self.reader.start_fields(lf + 1);
        }
        let framing = &mut self.framing;
        match self
            .reader
            .on_field_line(buf, |name, value| framing.add(name, value))?
        {
            Fields::Partial => Ok(None),
            Fields::Complete { len } => Ok(Some(len)),
        }
    }

    /// Chooses the body framing (RFC 9112 §6.3); returns true when there is no body.
    fn start_body(
        &mut self,
        version: Version,
        status: u16,
        framing: &Framing,
    ) -> Result<bool, ParseError> {
        if framing.codings.present && framing.content_length.is_some() {
            // RFC 9112 §6.3 item 3: a sender must not send both; a strict client treats it as
            // broken.
            return Err(ParseError::BadHeader(
                "both Transfer-Encoding and Content-Length",
            ));
        }
        let chunked = framing.codings.present;
        let codings = &framing.codings;
        let readable = !codings.others && codings.is_chunked_once_last();
        if chunked && (!readable || version == Version::Http10) {
            return Err(ParseError::BadHeader(
                "Transfer-Encoding other than chunked",
            ));
        }
        let head = Head {
            status,
            keep_alive: framing.connection.persist(version),
        };
        if (100..200).contains(&status) && status != 101 {
            // An interim response: the final one follows on the same connection.
            self.phase = Phase::Head;
            return Ok(false);
        }
        if status == 204 || status == 304 || (100..200).contains(&status) {
            self.phase = Phase::Body { head, remaining: 0 };
            return Ok(true);
        }
        Ok(match (chunked, framing.content_length) {
            (true, _) => {
                let decoder = ChunkedDecoder::with_limits(MAX_HEAD, MAX_HEAD);
                self.phase = Phase::Chunked {
                    head,
                    decoder: Box::new(decoder),
                };
                false
            }
            (false, Some(length)) => {
                self.phase = Phase::Body {
                    head,
                    remaining: length,
                };
                length == 0
            }
            (false, None) => {
                self.phase = Phase::UntilClose { head };
                false
            }
        })
    }
}

/// The first bytes of a head that has no line yet must be able to become `HTTP/`, so that a
/// server sending something else is reported at once rather than by a timeout.
fn check_status_prefix(bytes: &[u8]) -> Result<(), ParseError> {
    const PREFIX: &[u8] = b"HTTP/";
    let prefix_len = bytes.len().min(PREFIX.len());
    if bytes[..prefix_len] == PREFIX[..prefix_len] {
        Ok(())
    } else {
        Err(ParseError::BadStatusLine)
    }
}

/// `HTTP/1.x SP 3DIGIT SP reason` (RFC 9112 §4); returns the version and the status.
fn parse_status_line(line: &[u8]) -> Result<(Version, u16), ParseError> {
    let version = match line.get(..9) {
        Some(b"HTTP/1.1 ") => Version::Http11,
        Some(b"HTTP/1.0 ") => Version::Http10,
        _ => return Err(ParseError::BadStatusLine),
    };
    let code = line.get(9..12).ok_or(ParseError::BadStatusLine)?;
    if !code.iter().all(u8::is_ascii_digit) || code[0] == b'0' || code[0] > b'5' {
        return Err(ParseError::BadStatusLine);
    }
    if line.get(12) != Some(&b' ') {
        return Err(ParseError::BadStatusLine);
    }
    if !line[13..].iter().all(|&byte| is_field_byte(byte)) {
        return Err(ParseError::BadStatusLine);
    }
    let status = code
        .iter()
        .fold(0u16, |total, digit| total * 10 + u16::from(digit - b'0'));
    Ok((version, status))
}

/// VCHAR, SP, HTAB and obs-text: what a reason phrase may hold.
fn is_field_byte(byte: u8) -> bool {
    byte == b'\t' || byte == b' ' || (0x21..=0x7e).contains(&byte) || byte >= 0x80
}

#[cfg(test)]
#[path = "response_tests.rs"]
mod tests;
