//! The resumable, I/O-free request-head parser (RFC 9112 §2-§5).
//!
//! Owns `HeadParser` and request-line syntax; field lines are read by the shared `head`
//! reader, the types are `message`'s (re-exported here). Must not touch sockets, clocks or
//! configuration; body framing and connection semantics are decided in `framing.rs` once the
//! head is complete.
//!
//! The parser is line-at-a-time like nginx's `ngx_http_parse.c`: every complete line is
//! validated and stored as soon as its LF arrives, and the parser remembers where it stopped,
//! so a head fed one byte per call costs O(n) in total rather than picohttpparser's re-scan.

use memchr::memchr;

use crate::authority::is_valid_authority;
use crate::error::ParseError;
use crate::framing;
use crate::head::{Fields, HeadReader, LineEnds};
use crate::message::is_target_byte;
pub use crate::message::{split_target, BodyFraming, Header, Method, RequestHead, Version};
use crate::token::is_tchar;

/// Size limits enforced while parsing, including on partial input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line in bytes, excluding its CRLF (414 beyond).
    pub max_request_line: usize,
    /// Longest head in bytes, leading empty lines and the final CRLF included (431 beyond).
    pub max_head_bytes: usize,
    /// Most field lines (431 beyond).
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_line: 8192,
            max_head_bytes: 32768,
            max_headers: 100,
        }
    }
}

/// The outcome of feeding the parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// The head is complete; it occupied the first `len` bytes of the buffer.
    Complete { head: RequestHead, len: usize },
    /// More bytes are needed.
    Partial,
}

/// The request line, kept while the field lines arrive.
#[derive(Debug)]
struct RequestLine {
    method: Method,
    target: Box<str>,
    version: Version,
}

/// Where the parser is within the head. Every position is an index into the caller's buffer.
#[derive(Debug)]
enum State {
    /// Skipping empty lines before the request line (RFC 9112 §2.2 SHOULD ignore at least one).
    Leading,
    /// Waiting for the LF that ends the request line starting at `start`; what has arrived of
    /// it so far passed `check`.
    RequestLine { start: usize, check: LineCheck },
    /// Collecting field lines (the reader knows where the current one starts).
    Fields {
        request: RequestLine,
        headers: Vec<Header>,
    },
}

/// What one step of the parser produced.
enum Step {
    Continue(State),
    NeedMore(State),
    Done(RequestHead, usize),
}

/// A resumable request-head parser.
///
/// Call [`HeadParser::parse`] with the whole input buffered so far, appending to the same
/// buffer between calls. After `Complete { len, .. }` drain `len` bytes; the parser is then
/// ready for the next pipelined request. After an error the connection must be closed; call
/// [`HeadParser::reset`] before reusing the parser for a new connection.
#[derive(Debug)]
pub struct HeadParser {
    limits: Limits,
    state: State,
    /// Lines, the head's size and its field lines.
    reader: HeadReader,
}

impl HeadParser {
    /// A parser enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: State::Leading,
            reader: HeadReader::new(
                limits.max_head_bytes,
                limits.max_headers,
                LineEnds::LfAccepted,
            ),
        }
    }

    /// Forgets any partial progress.
    pub fn reset(&mut self) {
        self.state = State::Leading;
        self.reader.reset();
    }

    /// Continues parsing `buf`, which must start with the bytes given to earlier calls.
    ///
    /// # Errors
    /// Returns a [`ParseError`] as soon as the input is known to be invalid or over a limit,
    /// even when the head is still incomplete; its `status()` is the answer to send.
    #[inline]
    pub fn parse(&mut self, buf: &[u8]) -> Result<Parse, ParseError> {
        if buf.len() < self.reader.scanned() {
            // The caller replaced the buffer instead of appending: start over rather than
            // index out of bounds.
            self.reset();
        }
        let mut state = std::mem::replace(&mut self.state, State::Leading);
        loop {
            match self.step(state, buf)? {
                Step::Continue(next) => state = next,
                Step::NeedMore(next) => {
                    self.state = next;
                    return Ok(Parse::Partial);
                }
                Step::Done(head, len) => {
                    self.reset();
                    return Ok(Parse::Complete { head, len });
                }
            }
        }
    }

    #[inline]
    fn step(&mut self, state: State, buf: &[u8]) -> Result<Step, ParseError> {
        match state {
            State::Leading => self.skip_empty_line(buf),
            State::RequestLine { start, check } => self.on_request_line(start, check, buf),
            State::Fields { request, headers } => self.on_fields(request, headers, buf),
        }
    }

    fn skip_empty_line(&mut self, buf: &[u8]) -> Result<Step, ParseError> {
        let at = self.reader.scanned();
        let skip = match (buf.get(at), buf.get(at + 1)) {
            (None, _) | (Some(b'\r'), None) => return Ok(Step::NeedMore(State::Leading)),
            (Some(b'\n'), _) => 1,
            (Some(b'\r'), Some(b'\n')) => 2,
            _ => {
                return Ok(Step::Continue(State::RequestLine {
                    start: at,
                    check: LineCheck::default(),
                }))
            }
        };
        self.reader.skip(skip);
        if self.reader.scanned() > self.limits.max_head_bytes {
            return Err(ParseError::HeaderSectionTooLarge);
        }
        Ok(Step::Continue(State::Leading))
    }

    fn on_request_line(
        &mut self,
        start: usize,
        mut check: LineCheck,
        buf: &[u8],
    ) -> Result<Step, ParseError> {
        // Only bytes within both limits are judged, so that a line over a limit gets the same
        // answer whether it arrives whole or byte by byte.
        let judged = self
            .limits
            .max_request_line
            .min(self.limits.max_head_bytes.saturating_sub(start));
        let Some(lf) = self.find_lf(buf) else {
            let pending = &buf[start..];
            check.advance(pending, judged, false)?;
            // A CR may still be waiting for its LF, so allow one byte over the limit for it.
            let over = pending.len() > self.limits.max_request_line
                && !(pending.len() == self.limits.max_request_line.saturating_add(1)
                    && pending.last() == Some(&b'\r'));
            if over {
                return Err(ParseError::RequestLineTooLong);
            }
            self.check_head_size(buf.len())?;
            return Ok(Step::NeedMore(State::RequestLine { start, check }));
        };
        let line = strip_cr(&buf[start..lf]);
        check.advance(line, judged, true)?;
        if line.len() > self.limits.max_request_line {
            return Err(ParseError::RequestLineTooLong);
        }
        self.check_head_size(lf + 1)?;
        let request = parse_request_line(line)?;
        self.reader.start_fields(lf + 1);
        Ok(Step::Continue(State::Fields {
            request,
            headers: Vec::with_capacity(16),
        }))
    }

    fn on_fields(
        &mut self,
        request: RequestLine,
        mut headers: Vec<Header>,
        buf: &[u8],
    ) -> Result<Step, ParseError> {
        let fields = self.reader.on_field_line(buf, |name, value| {
            headers.push(Header {
                name: name.into(),
                value: value.into(),
            });
            Ok::<(), ParseError>(())
        })?;
        match fields {
            Fields::Partial => Ok(Step::NeedMore(State::Fields { request, headers })),
            Fields::Complete { len } => {
                let head =
                    framing::finish(request.method, request.target, request.version, headers)?;
                Ok(Step::Done(head, len))
            }
        }
    }

    #[inline]
    fn find_lf(&mut self, buf: &[u8]) -> Option<usize> {
        self.reader.find_lf(buf)
    }

    #[inline]
    fn check_head_size(&self, len: usize) -> Result<(), ParseError> {
        Ok(self.reader.check_size(len)?)
    }
}

/// `line` without the CR of a CRLF terminator (a bare LF is accepted, RFC 9112 §2.2).
#[inline]
fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The part of the request line a byte belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum LinePart {
    #[default]
    Method,
    Target,
    Version,
}

/// The left-to-right check of a request line, run on each piece as it arrives so that bytes
/// which can never begin a valid request (binary garbage, a TLS ClientHello on the plain port)
/// are answered at once instead of after the header timeout, as nginx does.
///
/// Each byte's verdict depends only on the bytes before it (a CR also on the byte after it), so
/// the first fault is found at the same place however the line is split into reads.
#[derive(Debug, Clone, Copy, Default)]
struct LineCheck {
    /// Bytes from the line's start that have passed.
    checked: usize,
    part: LinePart,
    /// Bytes of `part` that have passed.
    part_len: usize,
}

impl LineCheck {
    /// The version a request line may end in, up to its major digit: anything else can never
    /// become `HTTP/DIGIT.DIGIT` (RFC 9112 §2.3).
    const VERSION_PREFIX: &'static [u8] = b"HTTP/";

    /// Checks `line[self.checked..limit]`. `complete`: `line` is the whole line without its
    /// CRLF; otherwise more may follow and a CR that is the last byte may be the line's end.
    fn advance(&mut self, line: &[u8], limit: usize, complete: bool) -> Result<(), ParseError> {
        let end = line.len().min(limit);
        while self.checked < end {
            if self.part == LinePart::Target {
                // The target is most of the line: its run of valid bytes in one tight loop,
                // then the byte that ends it goes through the checks below.
                let run = line[self.checked..end]
                    .iter()
                    .take_while(|&&byte| is_target_byte(byte))
                    .count();
                self.checked += run;
                self.part_len += run;
                if self.checked == end {
                    break;
                }
            }
            let byte = line[self.checked];
            if byte == b'\r' {
                if !complete && self.checked + 1 == line.len() {
                    return Ok(());
                }
                return Err(ParseError::BareCr);
            }
            if byte == b' ' && self.part != LinePart::Version {
                self.next_part()?;
            } else {
                match self.part {
                    LinePart::Method if !is_tchar(byte) => return Err(ParseError::BadMethod),
                    LinePart::Target if !is_target_byte(byte) => return Err(ParseError::BadTarget),
                    LinePart::Version => check_version_byte(self.part_len, byte)?,
                    LinePart::Method | LinePart::Target => {}
                }
                self.part_len += 1;
            }
            self.checked += 1;
        }
        Ok(())
    }

    /// The SP after the method or the target, which must not be empty.
    fn next_part(&mut self) -> Result<(), ParseError> {
        let (empty, next) = match self.part {
            LinePart::Method => (ParseError::BadMethod, LinePart::Target),
            LinePart::Target | LinePart::Version => (ParseError::BadTarget, LinePart::Version),
        };
        if self.part_len == 0 {
            return Err(empty);
        }
        self.part = next;
        self.part_len = 0;
        Ok(())
    }
}

/// The byte at `at` of `HTTP/DIGIT.DIGIT`. A major version other than 1 is `505` as soon as
/// its digit arrives (RFC 9110 §6.2); a byte past the minor digit, or out of place, is `400`.
fn check_version_byte(at: usize, byte: u8) -> Result<(), ParseError> {
    let fits = match at {
        0..=4 => byte == LineCheck::VERSION_PREFIX[at],
        5 if byte.is_ascii_digit() && byte != b'1' => return Err(ParseError::UnsupportedVersion),
        5 | 7 => byte.is_ascii_digit(),
        6 => byte == b'.',
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(ParseError::MalformedRequestLine)
    }
}

/// `method SP request-target SP HTTP-version`, single spaces only (RFC 9112 §3). The line has
/// passed `LineCheck`: what is left is its structure as a whole.
fn parse_request_line(line: &[u8]) -> Result<RequestLine, ParseError> {
    let first_space = memchr(b' ', line).ok_or(ParseError::MalformedRequestLine)?;
    let last_space = memchr::memrchr(b' ', line).ok_or(ParseError::MalformedRequestLine)?;
    if first_space == last_space {
        return Err(ParseError::MalformedRequestLine);
    }
    let version = parse_version(&line[last_space + 1..])?;
    let method = Method::from_token(&line[..first_space]).ok_or(ParseError::BadMethod)?;
    let target = parse_target(&line[first_space + 1..last_space], &method)?;
    Ok(RequestLine {
        method,
        target,
        version,
    })
}

/// `HTTP/DIGIT.DIGIT`, case-sensitive (RFC 9112 §2.3).
#[inline]
fn parse_version(version: &[u8]) -> Result<Version, ParseError> {
    match version {
        b"HTTP/1.1" => Ok(Version::Http11),
        b"HTTP/1.0" => Ok(Version::Http10),
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            if *major == b'1' {
                Ok(Version::Http11)
            } else {
                Err(ParseError::UnsupportedVersion)
            }
        }
        _ => Err(ParseError::MalformedRequestLine),
    }
}

/// Visible ASCII without `#` (a fragment is never sent, RFC 9112 §3.2), in one of the forms
/// `split_target` accepts; asterisk-form only with OPTIONS (RFC 9112 §3.2.4).
fn parse_target(target: &[u8], method: &Method) -> Result<Box<str>, ParseError> {
    if target.is_empty() || !target.iter().copied().all(is_target_byte) {
        return Err(ParseError::BadTarget);
    }
    let target = std::str::from_utf8(target).map_err(|_| ParseError::BadTarget)?;
    // authority-form (`host:port`) is CONNECT's, and only CONNECT's (RFC 9112 §3.2.3); it is
    // parsed so the method can be answered as such (a static origin answers `405`).
    // Its port is required (`uri-host ":" port`).
    if *method == Method::Connect {
        let has_port = target
            .rsplit_once(':')
            .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
        return if has_port && is_valid_authority(target.as_bytes(), false) {
            Ok(target.into())
        } else {
            Err(ParseError::BadTarget)
        };
    }
    split_target(target).ok_or(ParseError::BadTarget)?;
    if target == "*" && *method != Method::Options {
        return Err(ParseError::BadTarget);
    }
    Ok(target.into())
}

#[cfg(test)]
mod tests;
