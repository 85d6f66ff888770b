//! The HTTP/1 head reader every parser of this crate shares: lines found once each, the head's
//! size and field-count limits, field-line syntax (RFC 9112 §2.2, §5), the transfer-coding list
//! (RFC 9112 §6.1, §7) and `Content-Length` digits (RFC 9110 §8.6).
//!
//! Owns those rules, written once: the request parser (`request`), the upstream response parser
//! (`upstream::parser`), the CGI head parser (`cgi`) and through the upstream parser the ACME
//! client and `ampd-bench` read heads with it, so a field line one of them refuses, every one
//! refuses. Must not know what a start line is or what any field means beyond framing; each
//! caller maps [`HeadError`] to its own error type and status.
//!
//! Line at a time like nginx's `ngx_http_parse.c`: a line is judged when its LF arrives and the
//! reader remembers where it stopped, so a head fed one byte per call costs O(n) in total, and
//! the same bytes give the same verdict however they are split into calls. Nothing here
//! allocates: a field line is handed to the caller as borrowed name and value.

use memchr::memchr;

use crate::message::Version;
pub use crate::token::list_elements;
use crate::token::{is_field_value, is_ows, is_tchar, trim_ows};

/// Which line ends a head may use (RFC 9112 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnds {
    /// CRLF or LF alone: a server reading a request may accept a bare LF (RFC 9112 §2.2), and a
    /// CGI script's lines end in NL (RFC 3875 §6.3: the server MUST accept it).
    LfAccepted,
    /// CRLF only: where ampd is the hop in the middle (an upstream's response), accepting a
    /// bare LF the next hop may not accept would make the two disagree on where the head ends.
    CrlfOnly,
}

/// Why a head's lines were refused; each parser maps these to its own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeadError {
    /// The head is longer than its limit.
    TooLarge,
    /// More field lines than the limit.
    TooManyFields,
    /// A line ended by LF alone under [`LineEnds::CrlfOnly`].
    BareLf,
    /// A field line is malformed.
    Field(FieldLineError),
}

/// What is wrong with one field line, checked in this order so every line maps to one error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldLineError {
    /// The line starts with SP or HTAB: obsolete line folding (RFC 9112 §5.2), or whitespace
    /// before the first field line (§2.2). Refused, never unfolded.
    ObsFold,
    /// A CR not immediately followed by LF (RFC 9112 §2.2).
    BareCr,
    /// No colon.
    MissingColon,
    /// Whitespace between the name and the colon (RFC 9112 §5.1: MUST reject).
    SpaceBeforeColon,
    /// An empty name, or one with a byte that is not a `tchar` (RFC 9110 §5.1).
    BadName,
    /// A value with NUL or another control byte but HTAB (RFC 9110 §5.5).
    BadValue,
}

impl From<FieldLineError> for HeadError {
    fn from(error: FieldLineError) -> Self {
        Self::Field(error)
    }
}

/// `field-name ":" OWS field-value OWS` (RFC 9112 §5.1), `line` without its line end and not
/// empty: the name (a token, so ASCII) and the value without its surrounding OWS.
///
/// # Errors
/// The first fault in [`FieldLineError`]'s order.
#[inline]
pub fn field_line(line: &[u8]) -> Result<(&str, &[u8]), FieldLineError> {
    if line.first().copied().is_some_and(is_ows) {
        return Err(FieldLineError::ObsFold);
    }
    if memchr(b'\r', line).is_some() {
        return Err(FieldLineError::BareCr);
    }
    let colon = memchr(b':', line).ok_or(FieldLineError::MissingColon)?;
    let name = &line[..colon];
    if name.last().copied().is_some_and(is_ows) {
        return Err(FieldLineError::SpaceBeforeColon);
    }
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return Err(FieldLineError::BadName);
    }
    let value = trim_ows(&line[colon + 1..]);
    if !is_field_value(value) {
        return Err(FieldLineError::BadValue);
    }
    // A token is ASCII, so this cannot fail.
    let name = std::str::from_utf8(name).map_err(|_| FieldLineError::BadName)?;
    Ok((name, value))
}

/// Where reading the field lines stands after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    /// More bytes are needed.
    Partial,
    /// The empty line arrived: the head is the first `len` bytes.
    Complete { len: usize },
}

/// The resumable line reader of one head: its start line is the caller's; every field line
/// goes through [`HeadReader::on_field_line`].
#[derive(Debug, Clone)]
pub struct HeadReader {
    max_head_bytes: usize,
    max_fields: usize,
    ends: LineEnds,
    /// Bytes before this index have been searched for LF; searching resumes here.
    scanned: usize,
    /// Where the field line being read starts.
    line_start: usize,
    /// Field lines read so far.
    fields: usize,
}

impl HeadReader {
    /// A reader of heads of at most `max_head_bytes` bytes and `max_fields` field lines.
    #[must_use]
    pub fn new(max_head_bytes: usize, max_fields: usize, ends: LineEnds) -> Self {
        Self {
            max_head_bytes,
            max_fields,
            ends,
            scanned: 0,
            line_start: 0,
            fields: 0,
        }
    }

    /// Forgets any partial progress.
    #[inline]
    pub fn reset(&mut self) {
        self.scanned = 0;
        self.line_start = 0;
        self.fields = 0;
    }

    /// Bytes searched so far: a buffer shorter than this was replaced, not appended to.
    #[inline]
    #[must_use]
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    /// Skips `count` bytes already judged by the caller (empty lines before a request line).
    #[inline]
    pub fn skip(&mut self, count: usize) {
        self.scanned += count;
    }

    /// Finds the next LF at or after what was searched and moves past it, or to the end of
    /// `buf` when there is none, so no byte is searched twice.
    #[inline]
    pub fn find_lf(&mut self, buf: &[u8]) -> Option<usize> {
        match memchr(b'\n', &buf[self.scanned..]) {
            Some(offset) => {
                let lf = self.scanned + offset;
                self.scanned = lf + 1;
                Some(lf)
            }
            None => {
                self.scanned = buf.len();
                None
            }
        }
    }

    /// Whether a head of `len` bytes so far is within the limit.
    ///
    /// # Errors
    /// [`HeadError::TooLarge`] beyond it.
    #[inline]
    pub fn check_size(&self, len: usize) -> Result<(), HeadError> {
        if len > self.max_head_bytes {
            Err(HeadError::TooLarge)
        } else {
            Ok(())
        }
    }

    /// `line` (up to its LF) without its line end.
    ///
    /// # Errors
    /// [`HeadError::BareLf`] for a line without CR under [`LineEnds::CrlfOnly`].
    #[inline]
    pub fn strip_line_end<'a>(&self, line: &'a [u8]) -> Result<&'a [u8], HeadError> {
        match (line.strip_suffix(b"\r"), self.ends) {
            (Some(line), _) => Ok(line),
            (None, LineEnds::LfAccepted) => Ok(line),
            (None, LineEnds::CrlfOnly) => Err(HeadError::BareLf),
        }
    }

    /// The field lines start at `at` (after the start line).
    #[inline]
    pub fn start_fields(&mut self, at: usize) {
        self.line_start = at;
        self.fields = 0;
    }

    /// Reads every field line complete in `buf`, handing each to `accept` as (name, value),
    /// until the empty line that ends the head or the end of `buf`.
    ///
    /// # Errors
    /// The first fault, as a [`HeadError`] converted to the caller's `E`, or what `accept`
    /// returns.
    #[inline]
    pub fn on_field_line<E: From<HeadError>>(
        &mut self,
        buf: &[u8],
        mut accept: impl FnMut(&str, &[u8]) -> Result<(), E>,
    ) -> Result<Fields, E> {
        loop {
            let Some(lf) = self.find_lf(buf) else {
                self.check_size(buf.len())?;
                return Ok(Fields::Partial);
            };
            self.check_size(lf + 1)?;
            let line = self.strip_line_end(&buf[self.line_start..lf])?;
            self.line_start = lf + 1;
            if line.is_empty() {
                return Ok(Fields::Complete { len: lf + 1 });
            }
            if self.fields >= self.max_fields {
                return Err(HeadError::TooManyFields.into());
            }
            self.fields += 1;
            let (name, value) = field_line(line).map_err(HeadError::from)?;
            accept(name, value)?;
        }
    }
}

/// What the `Transfer-Encoding` field lines add up to, in order across lines (RFC 9110 §5.3:
/// the lines combine into one list).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TransferCodings {
    /// Whether any `Transfer-Encoding` line was seen.
    pub present: bool,
    /// Whether the last coding is `chunked`.
    pub last_is_chunked: bool,
    /// How many times `chunked` is applied.
    pub chunked: usize,
    /// Whether a coding other than `chunked` is named.
    pub others: bool,
}

impl TransferCodings {
    /// Adds one `Transfer-Encoding` line's list.
    pub fn add(&mut self, value: &[u8]) {
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

    /// Whether the list is `chunked` applied once and last (RFC 9112 §6.3 item 4, §7.1): the
    /// only one whose body end a recipient can find.
    #[must_use]
    pub fn is_chunked_once_last(&self) -> bool {
        self.last_is_chunked && self.chunked == 1
    }
}

/// `1*DIGIT` that fits a `u64` (a `Content-Length` element, RFC 9110 §8.6): no sign, no
/// spaces, no hex.
#[inline]
#[must_use]
pub fn decimal(digits: &[u8]) -> Option<u64> {
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

/// Why a `Content-Length` value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentLengthFault {
    /// An element that is not `1*DIGIT` fitting a `u64`, or an empty one (`5,` is no length).
    Invalid,
    /// Elements that differ.
    Conflicting,
}

/// `Content-Length = 1*DIGIT` fitting a `u64`, or a list of identical such values, which
/// RFC 9110 §8.6 lets a recipient fold into one (an intermediary that combined duplicate lines
/// makes them). A response's reader folds; the request parser refuses any list.
///
/// # Errors
/// The first fault, left to right.
pub fn folded_content_length(value: &[u8]) -> Result<u64, ContentLengthFault> {
    let mut folded: Option<u64> = None;
    for element in value.split(|&b| b == b',') {
        let length = decimal(trim_ows(element)).ok_or(ContentLengthFault::Invalid)?;
        if folded.is_some_and(|earlier| earlier != length) {
            return Err(ContentLengthFault::Conflicting);
        }
        folded = Some(length);
    }
    folded.ok_or(ContentLengthFault::Invalid)
}

/// The persistence options of the `Connection` lines (RFC 9112 §9.3), in any case.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionOptions {
    pub close: bool,
    pub keep_alive: bool,
}

impl ConnectionOptions {
    /// Adds one `Connection` line's list.
    pub fn add(&mut self, value: &[u8]) {
        for option in list_elements(value) {
            self.close |= option.eq_ignore_ascii_case(b"close");
            self.keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
        }
    }

    /// Whether the connection persists (RFC 9112 §9.3): `close` ends it in any version;
    /// HTTP/1.0 persists only with `keep-alive`.
    #[must_use]
    pub fn persist(&self, version: Version) -> bool {
        !self.close
            && match version {
                // HTTP/1 heads never say 2.0 or 3.0 (the parsers refuse them); HTTP/2 and
                // HTTP/3 persist.
                Version::Http11 | Version::Http2 | Version::Http3 => true,
                Version::Http10 => self.keep_alive,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_line_faults_in_order() {
        assert_eq!(field_line(b"Host: a \t"), Ok(("Host", &b"a"[..])));
        assert_eq!(field_line(b"X:"), Ok(("X", &b""[..])));
        assert_eq!(field_line(b"X: \x80\xff"), Ok(("X", &b"\x80\xff"[..])));
        for (line, error) in [
            (&b" Host: a"[..], FieldLineError::ObsFold),
            (b"\tHost: a\r", FieldLineError::ObsFold),
            (b"Host: a\rb", FieldLineError::BareCr),
            (b"Host a\r", FieldLineError::BareCr),
            (b"Host a", FieldLineError::MissingColon),
            (b"Host : a", FieldLineError::SpaceBeforeColon),
            (b"Host\t: a", FieldLineError::SpaceBeforeColon),
            (b": a", FieldLineError::BadName),
            (b"Ho st: a", FieldLineError::BadName),
            (b"H\xc3\xa9: a", FieldLineError::BadName),
            (b"Host: a\0b", FieldLineError::BadValue),
            (b"Host: a\x7f", FieldLineError::BadValue),
        ] {
            assert_eq!(field_line(line), Err(error), "{}", line.escape_ascii());
        }
    }

    fn read_all(reader: &mut HeadReader, buf: &[u8]) -> Result<(Fields, Vec<String>), HeadError> {
        let mut seen = Vec::new();
        let fields = reader.on_field_line(buf, |name, value| {
            seen.push(format!("{name}={}", value.escape_ascii()));
            Ok::<(), HeadError>(())
        })?;
        Ok((fields, seen))
    }

    #[test]
    fn line_ends_by_policy() {
        let head = b"A: 1\nB: 2\r\n\n";
        let mut lax = HeadReader::new(100, 10, LineEnds::LfAccepted);
        assert_eq!(
            read_all(&mut lax, head),
            Ok((
                Fields::Complete { len: head.len() },
                vec!["A=1".to_owned(), "B=2".to_owned()]
            ))
        );
        let mut strict = HeadReader::new(100, 10, LineEnds::CrlfOnly);
        assert_eq!(read_all(&mut strict, head), Err(HeadError::BareLf));
    }

    #[test]
    fn limits_hold_on_partial_input_and_byte_by_byte() {
        let head = b"A: 1\r\nB: 2\r\nC: 3\r\n\r\n";
        let mut few = HeadReader::new(100, 2, LineEnds::CrlfOnly);
        assert_eq!(read_all(&mut few, head), Err(HeadError::TooManyFields));
        let mut small = HeadReader::new(8, 10, LineEnds::CrlfOnly);
        assert_eq!(read_all(&mut small, b"A: 123456"), Err(HeadError::TooLarge));

        let mut reader = HeadReader::new(100, 10, LineEnds::CrlfOnly);
        let mut names = Vec::new();
        for end in 1..=head.len() {
            let fields = reader
                .on_field_line(&head[..end], |name, _| {
                    names.push(name.to_owned());
                    Ok::<(), HeadError>(())
                })
                .unwrap();
            let expected = if end == head.len() {
                Fields::Complete { len: head.len() }
            } else {
                Fields::Partial
            };
            assert_eq!(fields, expected, "at {end}");
        }
        assert_eq!(names, ["A", "B", "C"]);
    }

    #[test]
    fn codings_and_decimals() {
        let mut codings = TransferCodings::default();
        codings.add(b"gzip");
        codings.add(b" Chunked ,");
        assert!(codings.present && codings.others && codings.is_chunked_once_last());
        let mut twice = TransferCodings::default();
        twice.add(b"chunked, chunked");
        assert!(!twice.is_chunked_once_last() && !twice.others);
        let mut parameter = TransferCodings::default();
        parameter.add(b"chunked;x=1");
        assert!(!parameter.last_is_chunked && parameter.others);
        assert_eq!(decimal(b"00042"), Some(42));
        assert_eq!(decimal(b"18446744073709551615"), Some(u64::MAX));
        for bad in [&b""[..], b"18446744073709551616", b"+5", b"5 ", b"0x1"] {
            assert_eq!(decimal(bad), None, "{}", bad.escape_ascii());
        }
    }
}
