//! The load generator's own strict HTTP/1.x response parser: bytes in, framing decisions out.
//!
//! Owns: finding where each response ends on a connection (status line, header fields,
//! `Content-Length`, chunked bodies, read-until-close) and refusing anything that is not
//! well-formed, so a broken server shows up as an error instead of as a fast server.
//! Must not touch: sockets, clocks, counting (the client loop feeds it and records results).
//! It shares no code with the server it measures (the server's parser is `ampd-http`), so a bug
//! in one cannot hide the same bug in the other.
//!
//! Sources: RFC 9112 §4 (status line), §5 (field lines, no obs-fold, no space before the colon),
//! §6.3 (message body length: 1xx/204/304, Transfer-Encoding then Content-Length then close),
//! §7.1 (chunked transfer coding), §9.3 (persistence: HTTP/1.1 default, HTTP/1.0 keep-alive).

use std::fmt;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkStep {
    /// Reading hex digits of a chunk size; `digits` counts them.
    Size { value: u64, digits: u32 },
    /// After the digits: whitespace or a `;extension` up to CR.
    Extension { value: u64 },
    /// Saw the CR ending a size line; LF must follow.
    SizeLf { value: u64 },
    /// Inside chunk data.
    Data { remaining: u64 },
    /// Chunk data done; CR must follow.
    DataCr,
    /// CR after data; LF must follow.
    DataLf,
    /// In the trailer section; `line_len` bytes into the current line.
    Trailer { line_len: usize },
    /// Saw CR in the trailer section; LF must follow.
    TrailerLf { line_len: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for (the rest of) a response head.
    Head,
    /// A body of known length.
    Body {
        head: Head,
        remaining: u64,
    },
    Chunked {
        head: Head,
        step: ChunkStep,
    },
    /// No framing: the body runs until the server closes.
    UntilClose {
        head: Head,
    },
}

/// An incremental parser for the responses on one connection, one after another.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    phase: Phase,
    /// Bytes of a head that arrived split across reads.
    partial_head: Vec<u8>,
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
            body_len: 0,
            wire_len: 0,
        }
    }

    /// True while no byte of the next response has arrived.
    #[cfg(test)]
    #[must_use]
    pub fn is_between_responses(&self) -> bool {
        self.phase == Phase::Head && self.partial_head.is_empty() && self.wire_len == 0
    }

    /// True while the head is still being read (the client's `ReadingHead` state).
    #[must_use]
    pub fn in_head(&self) -> bool {
        self.phase == Phase::Head
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
            let (taken, done) = match self.phase {
                Phase::Head => self.feed_head(rest)?,
                Phase::Body { head, remaining } => {
                    let take = remaining.min(rest.len() as u64);
                    self.body_len += take;
                    let remaining = remaining - take;
                    self.phase = Phase::Body { head, remaining };
                    (take as usize, remaining == 0)
                }
                Phase::Chunked { head, step } => self.feed_chunked(head, step, rest)?,
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
        let head = match self.phase {
            Phase::Body { head, .. } | Phase::Chunked { head, .. } => head,
            Phase::UntilClose { head } => Head {
                keep_alive: false,
                ..head
            },
            Phase::Head => unreachable_head(),
        };
        let response = Response {
            status: head.status,
            body_len: self.body_len,
            wire_len: self.wire_len,
            keep_alive: head.keep_alive,
        };
        self.phase = Phase::Head;
        self.body_len = 0;
        self.wire_len = 0;
        response
    }

    /// Takes bytes of a head; returns (bytes used, whether a bodiless response completed).
    fn feed_head(&mut self, input: &[u8]) -> Result<(usize, bool), ParseError> {
        let already = self.partial_head.len();
        // Fast path: the whole head is in this read, parse it in place without copying.
        let end = if already == 0 {
            scan_head(input)?
        } else {
            self.partial_head.extend_from_slice(input);
            let found = scan_head(&self.partial_head);
            self.partial_head.truncate(already);
            found?
        };
        let Some(end) = end else {
            if already + input.len() > MAX_HEAD {
                return Err(ParseError::BadHeader("head longer than 64 KiB"));
            }
            self.partial_head.extend_from_slice(input);
            return Ok((input.len(), false));
        };
        // `end` counts from the start of the head, including bytes kept from earlier reads.
        let taken = end - already;
        let head = if already == 0 {
            parse_head(&input[..end])?
        } else {
            self.partial_head.extend_from_slice(&input[..taken]);
            let parsed = parse_head(&self.partial_head);
            self.partial_head.clear();
            parsed?
        };
        self.partial_head.clear();
        Ok((taken, self.start_body(head)))
    }

    /// Chooses the body framing (RFC 9112 §6.3); returns true when there is no body.
    fn start_body(&mut self, parsed: ParsedHead) -> bool {
        let head = Head {
            status: parsed.status,
            keep_alive: parsed.keep_alive,
        };
        if (100..200).contains(&parsed.status) && parsed.status != 101 {
            // An interim response: the final one follows on the same connection.
            self.phase = Phase::Head;
            return false;
        }
        if parsed.status == 204 || parsed.status == 304 || (100..200).contains(&parsed.status) {
            self.phase = Phase::Body { head, remaining: 0 };
            return true;
        }
        match parsed.framing {
            Framing::Chunked => {
                self.phase = Phase::Chunked {
                    head,
                    step: ChunkStep::Size {
                        value: 0,
                        digits: 0,
                    },
                };
                false
            }
            Framing::Length(length) => {
                self.phase = Phase::Body {
                    head,
                    remaining: length,
                };
                length == 0
            }
            Framing::UntilClose => {
                self.phase = Phase::UntilClose { head };
                false
            }
        }
    }

    fn feed_chunked(
        &mut self,
        head: Head,
        mut step: ChunkStep,
        input: &[u8],
    ) -> Result<(usize, bool), ParseError> {
        let mut used = 0;
        let mut done = false;
        while used < input.len() && !done {
            if let ChunkStep::Data { remaining } = step {
                let take = remaining.min((input.len() - used) as u64);
                self.body_len += take;
                used += take as usize;
                step = if remaining == take {
                    ChunkStep::DataCr
                } else {
                    ChunkStep::Data {
                        remaining: remaining - take,
                    }
                };
                continue;
            }
            let byte = input[used];
            used += 1;
            step = match step {
                ChunkStep::Size { value, digits } => match hex_value(byte) {
                    Some(digit) if digits < 16 => ChunkStep::Size {
                        value: value << 4 | u64::from(digit),
                        digits: digits + 1,
                    },
                    Some(_) => return Err(ParseError::BadChunked("chunk size too large")),
                    None if digits == 0 => {
                        return Err(ParseError::BadChunked("chunk size is not hex"))
                    }
                    None => after_size(value, byte)?,
                },
                ChunkStep::Extension { value } => after_size(value, byte)?,
                ChunkStep::SizeLf { value } => {
                    if byte != b'\n' {
                        return Err(ParseError::BadChunked("chunk size line without CRLF"));
                    }
                    if value == 0 {
                        ChunkStep::Trailer { line_len: 0 }
                    } else {
                        ChunkStep::Data { remaining: value }
                    }
                }
                ChunkStep::DataCr if byte == b'\r' => ChunkStep::DataLf,
                ChunkStep::DataLf if byte == b'\n' => ChunkStep::Size {
                    value: 0,
                    digits: 0,
                },
                ChunkStep::DataCr | ChunkStep::DataLf => {
                    return Err(ParseError::BadChunked("chunk data longer than its size"))
                }
                ChunkStep::Trailer { line_len } => match byte {
                    b'\r' => ChunkStep::TrailerLf { line_len },
                    b'\n' => return Err(ParseError::BadChunked("bare LF in trailer")),
                    _ if line_len >= MAX_HEAD => {
                        return Err(ParseError::BadChunked("trailer section too long"))
                    }
                    _ => ChunkStep::Trailer {
                        line_len: line_len + 1,
                    },
                },
                ChunkStep::TrailerLf { line_len } => {
                    if byte != b'\n' {
                        return Err(ParseError::BadChunked("bare CR in trailer"));
                    }
                    done = line_len == 0;
                    ChunkStep::Trailer { line_len: 0 }
                }
                ChunkStep::Data { .. } => step,
            };
        }
        self.phase = Phase::Chunked { head, step };
        Ok((used, done))
    }
}

fn unreachable_head() -> Head {
    // `complete` is only called after a head was parsed; a zeroed head keeps this total.
    Head {
        status: 0,
        keep_alive: false,
    }
}

fn after_size(value: u64, byte: u8) -> Result<ChunkStep, ParseError> {
    match byte {
        b'\r' => Ok(ChunkStep::SizeLf { value }),
        b'\n' => Err(ParseError::BadChunked("bare LF after chunk size")),
        // BWS and chunk extensions (RFC 9112 §7.1.1) are skipped, not interpreted.
        b' ' | b'\t' | b';' | b'=' | b'"' => Ok(ChunkStep::Extension { value }),
        byte if is_token(byte) => Ok(ChunkStep::Extension { value }),
        _ => Err(ParseError::BadChunked("bad byte after chunk size")),
    }
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Finds the end of a head (just past the empty line), checking line endings on the way so
/// that a bare LF or a garbage first line is reported at once rather than by a timeout.
fn scan_head(bytes: &[u8]) -> Result<Option<usize>, ParseError> {
    const PREFIX: &[u8] = b"HTTP/";
    let prefix_len = bytes.len().min(PREFIX.len());
    if bytes[..prefix_len] != PREFIX[..prefix_len] {
        return Err(ParseError::BadStatusLine);
    }
    let mut line_start = 0;
    let mut position = 0;
    while let Some(offset) = bytes[position..].iter().position(|&byte| byte == b'\n') {
        let newline = position + offset;
        if newline == 0 || bytes[newline - 1] != b'\r' {
            return Err(if line_start == 0 {
                ParseError::BadStatusLine
            } else {
                ParseError::BadHeader("line not ended by CRLF")
            });
        }
        if newline == line_start + 1 {
            return Ok(Some(newline + 1));
        }
        line_start = newline + 1;
        position = newline + 1;
    }
    Ok(None)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

struct ParsedHead {
    status: u16,
    keep_alive: bool,
    framing: Framing,
}

/// Parses a complete head (ending with the empty line).
fn parse_head(head: &[u8]) -> Result<ParsedHead, ParseError> {
    let mut lines = head[..head.len() - 2].split(|&byte| byte == b'\n');
    let status_line = lines.next().ok_or(ParseError::BadStatusLine)?;
    let (minor, status) = parse_status_line(strip_cr(status_line))?;
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut close = false;
    let mut keep_alive_token = false;
    for line in lines {
        let line = strip_cr(line);
        if line.is_empty() {
            continue;
        }
        let (name, value) = parse_field(line)?;
        if name.eq_ignore_ascii_case(b"content-length") {
            for item in value.split(|&byte| byte == b',') {
                let length = parse_length(trim(item))?;
                match content_length {
                    Some(previous) if previous != length => {
                        return Err(ParseError::BadHeader("conflicting Content-Length"))
                    }
                    _ => content_length = Some(length),
                }
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            let last = value.rsplit(|&byte| byte == b',').next().map(trim);
            chunked = last.is_some_and(|coding| coding.eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&byte| byte == b',').map(trim) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    if transfer_encoding && content_length.is_some() {
        // RFC 9112 §6.3 item 3: a sender must not send both; a strict client treats it as broken.
        return Err(ParseError::BadHeader(
            "both Transfer-Encoding and Content-Length",
        ));
    }
    if transfer_encoding && (!chunked || minor == 0) {
        return Err(ParseError::BadHeader(
            "Transfer-Encoding other than chunked",
        ));
    }
    let keep_alive = !close && (minor == 1 || keep_alive_token);
    let framing = match (chunked, content_length) {
        (true, _) => Framing::Chunked,
        (false, Some(length)) => Framing::Length(length),
        (false, None) => Framing::UntilClose,
    };
    Ok(ParsedHead {
        status,
        keep_alive,
        framing,
    })
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `HTTP/1.x SP 3DIGIT SP reason` (RFC 9112 §4); returns the minor version and the status.
fn parse_status_line(line: &[u8]) -> Result<(u8, u16), ParseError> {
    let minor = match line.get(..9) {
        Some(b"HTTP/1.1 ") => 1,
        Some(b"HTTP/1.0 ") => 0,
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
    Ok((minor, status))
}

/// `name ":" OWS value OWS` with a token name and no obs-fold (RFC 9112 §5).
fn parse_field(line: &[u8]) -> Result<(&[u8], &[u8]), ParseError> {
    if line[0] == b' ' || line[0] == b'\t' {
        return Err(ParseError::BadHeader("obsolete line folding"));
    }
    let colon = line
        .iter()
        .position(|&byte| byte == b':')
        .ok_or(ParseError::BadHeader("field line without a colon"))?;
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|&byte| is_token(byte)) {
        return Err(ParseError::BadHeader("invalid field name"));
    }
    let value = &line[colon + 1..];
    if !value.iter().all(|&byte| is_field_byte(byte)) {
        return Err(ParseError::BadHeader("control character in a field value"));
    }
    Ok((name, trim(value)))
}

fn parse_length(digits: &[u8]) -> Result<u64, ParseError> {
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadHeader("Content-Length is not a number"));
    }
    Ok(digits
        .iter()
        .fold(0u64, |total, digit| total * 10 + u64::from(digit - b'0')))
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&byte| byte != b' ' && byte != b'\t')
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|&byte| byte != b' ' && byte != b'\t')
        .map_or(start, |last| last + 1);
    &bytes[start..end]
}

/// tchar (RFC 9110 §5.6.2).
fn is_token(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// VCHAR, SP, HTAB and obs-text: what a field value or reason phrase may hold.
fn is_field_byte(byte: u8) -> bool {
    byte == b'\t' || byte == b' ' || (0x21..=0x7e).contains(&byte) || byte >= 0x80
}

#[cfg(test)]
#[path = "response_tests.rs"]
mod tests;
