//! The resumable, I/O-free parser of an upstream's response head (RFC 9112 §2, §4, §5).
//!
//! Owns status-line and field-line syntax and the head's size limits. Must not decide body
//! framing beyond validating it (`framing.rs`, `body.rs`) and must not touch I/O.
//!
//! Lines and field lines are the shared `head` reader's, as for `request::HeadParser`. It is
//! stricter than the request parser, because here ampd is the hop in the middle: every line
//! must end in CRLF (`LineEnds::CrlfOnly`), and the first bytes must be able to become `HTTP/1.0 ` or `HTTP/1.1 `, so
//! an upstream that answers in another protocol is refused on its first read rather than after
//! the read timeout.

use memchr::memchr;

use crate::head::{Fields, HeadReader, LineEnds};
use crate::message::{Header, Version};
use crate::token::is_field_value;

use super::error::UpstreamError;
use super::framing;
use super::head::{Limits, ResponseHead, ResponseParse};

/// The start of every version ampd accepts; the minor digit and a SP follow it.
const VERSION_PREFIX: &[u8] = b"HTTP/1.";
/// `HTTP/1.x SP`: the part of a status line checked as it arrives, before its LF.
const VERSION_AND_SPACE: usize = 9;

/// The status line, kept while the field lines arrive.
#[derive(Debug)]
struct StatusLine {
    version: Version,
    status: u16,
    reason: Box<str>,
}

/// Where the parser is within the head. Positions are indices into the caller's buffer.
#[derive(Debug)]
enum State {
    /// Waiting for the LF that ends the status line, which starts the buffer.
    StatusLine,
    /// Collecting field lines (the reader knows where the current one starts).
    Fields {
        status_line: StatusLine,
        headers: Vec<Header>,
    },
}

/// What one step of the parser produced.
enum Step {
    Continue(State),
    NeedMore(State),
    Done(ResponseHead, usize),
}

/// A resumable parser of one response head.
///
/// Call [`ResponseParser::parse`] with everything received so far, appending to the same
/// buffer between calls. After `Complete { len, .. }` the head is the first `len` bytes and
/// the parser is ready for the next head (the final response after a `100 Continue`). After an
/// error the upstream connection must be closed.
#[derive(Debug)]
pub struct ResponseParser {
    limits: Limits,
    state: State,
    /// Lines, the head's size and its field lines.
    reader: HeadReader,
}

impl ResponseParser {
    /// A parser enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: State::StatusLine,
            reader: HeadReader::new(
                limits.max_head_bytes,
                limits.max_headers,
                LineEnds::CrlfOnly,
            ),
        }
    }

    /// Forgets any partial progress.
    pub fn reset(&mut self) {
        self.state = State::StatusLine;
        self.reader.reset();
    }

    /// Continues parsing `buf`, which must start with the bytes given to earlier calls.
    ///
    /// # Errors
    /// An [`UpstreamError`] as soon as the input is known to be invalid or over a limit, even
    /// while the head is incomplete. The same bytes give the same answer however they are
    /// split into calls.
    pub fn parse(&mut self, buf: &[u8]) -> Result<ResponseParse, UpstreamError> {
        if buf.len() < self.reader.scanned() {
            // The caller replaced the buffer instead of appending: start over rather than
            // index out of bounds.
            self.reset();
        }
        let mut state = std::mem::replace(&mut self.state, State::StatusLine);
        loop {
            let step = match state {
                State::StatusLine => self.on_status_line(buf),
                State::Fields {
                    status_line,
                    headers,
                } => self.on_fields(status_line, headers, buf),
            };
            match step {
                Ok(Step::Continue(next)) => state = next,
                Ok(Step::NeedMore(next)) => {
                    self.state = next;
                    return Ok(ResponseParse::Partial);
                }
                Ok(Step::Done(head, len)) => {
                    self.reset();
                    return Ok(ResponseParse::Complete { head, len });
                }
                Err(error) => {
                    self.reset();
                    return Err(error);
                }
            }
        }
    }

    fn on_status_line(&mut self, buf: &[u8]) -> Result<Step, UpstreamError> {
        // Only bytes within the head limit are judged, so that a line over the limit gets the
        // same answer whether it arrives whole or byte by byte.
        let Some(lf) = self.reader.find_lf(buf) else {
            check_version_prefix(&buf[..buf.len().min(self.limits.max_head_bytes)])?;
            self.reader.check_size(buf.len())?;
            return Ok(Step::NeedMore(State::StatusLine));
        };
        check_version_prefix(&buf[..lf.min(self.limits.max_head_bytes)])?;
        self.reader.check_size(lf + 1)?;
        let line = self.reader.strip_line_end(&buf[..lf])?;
        let status_line = parse_status_line(line)?;
        self.reader.start_fields(lf + 1);
        Ok(Step::Continue(State::Fields {
            status_line,
            headers: Vec::with_capacity(16),
        }))
    }

    fn on_fields(
        &mut self,
        status_line: StatusLine,
        mut headers: Vec<Header>,
        buf: &[u8],
    ) -> Result<Step, UpstreamError> {
        let fields = self.reader.on_field_line(buf, |name, value| {
            headers.push(Header {
                name: name.into(),
                value: value.into(),
            });
            Ok::<(), UpstreamError>(())
        })?;
        match fields {
            Fields::Partial => Ok(Step::NeedMore(State::Fields {
                status_line,
                headers,
            })),
            Fields::Complete { len } => Ok(Step::Done(finish(status_line, headers)?, len)),
        }
    }
}

/// Checks the first bytes of a status line against `HTTP/1.x SP`, left to right, so each
/// byte's verdict depends only on the bytes before it: the same fault is found however the
/// line is split into reads. A digit where `1` or the minor version belongs is a version ampd
/// does not speak; anything else there is not HTTP.
fn check_version_prefix(start: &[u8]) -> Result<(), UpstreamError> {
    for (at, &byte) in start.iter().take(VERSION_AND_SPACE).enumerate() {
        let fits = match at {
            0..=4 | 6 => byte == VERSION_PREFIX[at],
            5 | 7 if byte.is_ascii_digit() => {
                let supported = if at == 5 {
                    byte == b'1'
                } else {
                    matches!(byte, b'0' | b'1')
                };
                if !supported {
                    return Err(UpstreamError::UnsupportedVersion);
                }
                true
            }
            8 => byte == b' ',
            _ => false,
        };
        if !fits {
            return Err(UpstreamError::MalformedStatusLine);
        }
    }
    Ok(())
}

/// `HTTP-version SP status-code SP reason-phrase` (RFC 9112 §4). The SP before an empty reason
/// may be missing: servers that omit it are common, and without a reason there is nothing it
/// could separate, so accepting it is no ambiguity (nginx and curl accept it too).
fn parse_status_line(line: &[u8]) -> Result<StatusLine, UpstreamError> {
    check_version_prefix(line)?;
    if memchr(b'\r', line).is_some() {
        return Err(UpstreamError::BareCr);
    }
    if line.len() < VERSION_AND_SPACE {
        return Err(UpstreamError::MalformedStatusLine);
    }
    let version = if line[7] == b'1' {
        Version::Http11
    } else {
        Version::Http10
    };
    let rest = &line[VERSION_AND_SPACE..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits != 3 {
        return Err(UpstreamError::InvalidStatus);
    }
    let status = rest[..3]
        .iter()
        .fold(0u16, |total, &b| total * 10 + u16::from(b - b'0'));
    if !(100..=599).contains(&status) {
        return Err(UpstreamError::InvalidStatus);
    }
    let reason = match &rest[3..] {
        [] => &[][..],
        [b' ', reason @ ..] => reason,
        _ => return Err(UpstreamError::MalformedStatusLine),
    };
    if !is_field_value(reason) {
        return Err(UpstreamError::InvalidReasonPhrase);
    }
    Ok(StatusLine {
        version,
        status,
        reason: String::from_utf8_lossy(reason).into(),
    })
}

/// The head once its empty line arrived: framing validated, persistence decided.
fn finish(status_line: StatusLine, headers: Vec<Header>) -> Result<ResponseHead, UpstreamError> {
    let StatusLine {
        version,
        status,
        reason,
    } = status_line;
    framing::declared(version, &headers)?;
    let keep_alive = framing::keep_alive(version, &headers);
    Ok(ResponseHead {
        version,
        status,
        reason,
        headers,
        keep_alive,
    })
}

#[cfg(test)]
mod tests;
