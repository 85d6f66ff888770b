//! Resumable decoder for chunked request bodies (RFC 9112 §7.1), used to relay a body to
//! CGI/FastCGI/upstreams or to discard it before reusing a connection.
//!
//! Owns chunk syntax, its limits (line, trailer, and the caller's body limit: a chunk size past
//! what the limit leaves is refused as soon as its digits end, rather than after the client
//! has sent, or failed to send, that much) and the error type. Must not buffer data (it hands
//! slices of the input to a sink).
//!
//! Strictness, chosen because a body parser that disagrees with a front proxy is a smuggling
//! vector: every line must end in CRLF (a bare LF is an error, although RFC 9112 §2.2 lets a
//! head use one), a chunk size is hex digits only with no sign or `0x`, whitespace is allowed
//! only as BWS before a `;` extension (RFC 9112 §7.1.1), extensions and trailer lines may not
//! hold control characters, and a trailer line starting with whitespace (obs-fold) is refused.
//! Extensions and trailer fields are validated and then dropped.

use std::fmt;

use crate::token::is_ows;

/// Why a chunked body was rejected. Every variant is a client fault: answer `status()` and close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChunkedError {
    /// A chunk-size line that does not start with a hex digit, or has junk after it.
    BadChunkSize,
    /// A chunk size that does not fit in a u64.
    ChunkSizeOverflow,
    /// A chunk-size line (size plus extensions) longer than the limit.
    ChunkLineTooLong,
    /// A control character inside a chunk extension.
    InvalidExtension,
    /// A line or chunk's data not followed by CRLF.
    MissingCrlf,
    /// An LF without a CR before it.
    BareLf,
    /// A trailer line with obs-fold or a control character.
    InvalidTrailer,
    /// The trailer fields exceed the limit (line ends are not counted).
    TrailerTooLarge,
    /// A chunk would take the body past the limit set by `ChunkedDecoder::with_max_body`.
    BodyTooLarge,
}

impl ChunkedError {
    /// The status to answer with before closing.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::BodyTooLarge => 413,
            _ => 400,
        }
    }
}

impl ChunkedError {
    /// What is wrong, in words (a load generator counts by it).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::BadChunkSize => "invalid chunk size",
            Self::ChunkSizeOverflow => "chunk size overflows",
            Self::ChunkLineTooLong => "chunk-size line too long",
            Self::InvalidExtension => "invalid chunk extension",
            Self::MissingCrlf => "missing CRLF in chunked body",
            Self::BareLf => "bare LF in chunked body",
            Self::InvalidTrailer => "invalid trailer field",
            Self::TrailerTooLarge => "trailer section too large",
            Self::BodyTooLarge => "chunked body larger than the limit",
        }
    }
}

impl fmt::Display for ChunkedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for ChunkedError {}

/// How far one `feed` got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Input bytes used; bytes after the body (a pipelined request) are never consumed.
    pub consumed: usize,
    /// The terminating empty line has been read.
    pub done: bool,
}

/// Where the decoder is, with what it needs to remember there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hex digits of a chunk size.
    Size { size: u64, digits: usize },
    /// After the size, before CR: BWS, then `;` extensions once `in_extension`.
    Extension { size: u64, in_extension: bool },
    /// The size line's CR was read; its LF must follow.
    SizeLf { size: u64 },
    /// Passing `remaining` bytes of chunk data to the sink.
    Data { remaining: u64 },
    /// Chunk data ended; CR must follow.
    DataCr,
    /// Chunk data's CR was read; LF must follow.
    DataLf,
    /// At the start of a trailer line or of the final empty line.
    TrailerLineStart,
    /// Inside a trailer field line.
    TrailerLine,
    /// A CR was read; LF must follow. `ends_body` when it closes the final empty line.
    TrailerLf { ends_body: bool },
    /// The body is complete.
    Done,
}

/// A resumable chunked-body decoder.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    max_line: usize,
    max_trailer: usize,
    line_len: usize,
    trailer_len: usize,
    body_bytes: u64,
    /// Most data bytes the body may hold (`None`: no limit).
    max_body: Option<u64>,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    /// A decoder allowing 4 KiB chunk-size lines and an 8 KiB trailer section.
    #[must_use]
    pub fn new() -> Self {
        Self::with_limits(4096, 8192)
    }

    /// A decoder with the given limits on one chunk-size line (size and extensions, without
    /// CRLF) and on the trailer section (field bytes, without line ends).
    #[must_use]
    pub fn with_limits(max_line: usize, max_trailer: usize) -> Self {
        Self {
            state: State::Size { size: 0, digits: 0 },
            max_line,
            max_trailer,
            line_len: 0,
            trailer_len: 0,
            body_bytes: 0,
            max_body: None,
        }
    }

    /// The same decoder refusing (`BodyTooLarge`, `413`) a chunk size that would take the body
    /// past `max_body` data bytes, as soon as the size is read.
    #[must_use]
    pub fn with_max_body(self, max_body: u64) -> Self {
        Self {
            max_body: Some(max_body),
            ..self
        }
    }

    /// Decoded data bytes passed to the sink so far.
    #[must_use]
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// Whether the whole body has been read.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes as much of `input` as possible, passing chunk data to `sink` in slices of
    /// `input`. Call again with the bytes after `consumed` plus newly read ones.
    ///
    /// # Errors
    /// A [`ChunkedError`] when the body violates the syntax or a limit; the decoder must not
    /// be fed again after that.
    pub fn feed(
        &mut self,
        input: &[u8],
        sink: &mut dyn FnMut(&[u8]),
    ) -> Result<Progress, ChunkedError> {
        let mut at = 0;
        while at < input.len() {
            if let State::Data { remaining } = self.state {
                let available = input.len() - at;
                let take = usize::try_from(remaining).map_or(available, |r| r.min(available));
                sink(&input[at..at + take]);
                at += take;
                self.body_bytes += take as u64;
                let remaining = remaining - take as u64;
                self.state = if remaining == 0 {
                    State::DataCr
                } else {
                    State::Data { remaining }
                };
                continue;
            }
            if self.state == State::Done {
                break;
            }
            self.state = self.on_byte(input[at])?;
            at += 1;
        }
        Ok(Progress {
            consumed: at,
            done: self.state == State::Done,
        })
    }

    fn on_byte(&mut self, byte: u8) -> Result<State, ChunkedError> {
        match self.state {
            State::Size { size, digits } => {
                self.count_line_byte(byte)?;
                if let Some(value) = hex_value(byte) {
                    if size >> 60 != 0 {
                        return Err(ChunkedError::ChunkSizeOverflow);
                    }
                    return Ok(State::Size {
                        size: size << 4 | u64::from(value),
                        digits: digits + 1,
                    });
                }
                if digits == 0 {
                    return Err(ChunkedError::BadChunkSize);
                }
                self.check_body_limit(size)?;
                match byte {
                    b'\r' => Ok(State::SizeLf { size }),
                    b';' => Ok(State::Extension {
                        size,
                        in_extension: true,
                    }),
                    b' ' | b'\t' => Ok(State::Extension {
                        size,
                        in_extension: false,
                    }),
                    b'\n' => Err(ChunkedError::BareLf),
                    _ => Err(ChunkedError::BadChunkSize),
                }
            }
            State::Extension { size, in_extension } => {
                self.count_line_byte(byte)?;
                match byte {
                    b'\r' => Ok(State::SizeLf { size }),
                    b'\n' => Err(ChunkedError::BareLf),
                    b';' => Ok(State::Extension {
                        size,
                        in_extension: true,
                    }),
                    _ if !in_extension && !is_ows(byte) => Err(ChunkedError::BadChunkSize),
                    _ if is_control(byte) => Err(ChunkedError::InvalidExtension),
                    _ => Ok(self.state),
                }
            }
            State::SizeLf { size } => {
                if byte != b'\n' {
                    return Err(ChunkedError::MissingCrlf);
                }
                self.line_len = 0;
                Ok(if size == 0 {
                    State::TrailerLineStart
                } else {
                    State::Data { remaining: size }
                })
            }
            State::DataCr => match byte {
                b'\r' => Ok(State::DataLf),
                _ => Err(ChunkedError::MissingCrlf),
            },
            State::DataLf => match byte {
                b'\n' => Ok(State::Size { size: 0, digits: 0 }),
                _ => Err(ChunkedError::MissingCrlf),
            },
            State::TrailerLineStart => match byte {
                b'\r' => Ok(State::TrailerLf { ends_body: true }),
                b'\n' => Err(ChunkedError::BareLf),
                b' ' | b'\t' => Err(ChunkedError::InvalidTrailer),
                _ => self.on_trailer_byte(byte),
            },
            State::TrailerLine => match byte {
                b'\r' => Ok(State::TrailerLf { ends_body: false }),
                b'\n' => Err(ChunkedError::BareLf),
                _ => self.on_trailer_byte(byte),
            },
            State::TrailerLf { ends_body } => match (byte, ends_body) {
                (b'\n', true) => Ok(State::Done),
                (b'\n', false) => Ok(State::TrailerLineStart),
                _ => Err(ChunkedError::MissingCrlf),
            },
            State::Data { .. } | State::Done => Ok(self.state),
        }
    }

    /// A chunk of `size` must fit in what `max_body` leaves.
    fn check_body_limit(&self, size: u64) -> Result<(), ChunkedError> {
        match self.max_body {
            Some(max) if size > max.saturating_sub(self.body_bytes) => {
                Err(ChunkedError::BodyTooLarge)
            }
            _ => Ok(()),
        }
    }

    /// Counts a chunk-size line byte against `max_line`; the CR of the CRLF is not counted.
    fn count_line_byte(&mut self, byte: u8) -> Result<(), ChunkedError> {
        if byte == b'\r' {
            return Ok(());
        }
        self.line_len += 1;
        if self.line_len > self.max_line {
            return Err(ChunkedError::ChunkLineTooLong);
        }
        Ok(())
    }

    fn on_trailer_byte(&mut self, byte: u8) -> Result<State, ChunkedError> {
        self.trailer_len += 1;
        if self.trailer_len > self.max_trailer {
            return Err(ChunkedError::TrailerTooLarge);
        }
        if is_control(byte) {
            return Err(ChunkedError::InvalidTrailer);
        }
        Ok(State::TrailerLine)
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

/// CTLs other than HTAB, and DEL.
fn is_control(byte: u8) -> bool {
    (byte < 0x20 && byte != b'\t') || byte == 0x7f
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, Progress), ChunkedError> {
        let mut out = Vec::new();
        let progress =
            ChunkedDecoder::new().feed(input, &mut |data| out.extend_from_slice(data))?;
        Ok((out, progress))
    }

    #[test]
    fn rfc_shaped_body_with_extension_and_trailer() {
        let input = b"4\r\nWiki\r\n5;name=\"va;l\"\r\npedia\r\nE \t;x\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nGET";
        let (out, progress) = decode_all(input).unwrap();
        assert_eq!(out, b"Wikipedia in\r\n\r\nchunks.");
        assert_eq!(progress.consumed, input.len() - 3);
        assert!(progress.done);
    }

    #[test]
    fn empty_body_and_done_stops_consuming() {
        let mut decoder = ChunkedDecoder::new();
        let mut sink = |_: &[u8]| panic!("no data expected");
        assert_eq!(
            decoder.feed(b"000\r\n\r\nX", &mut sink),
            Ok(Progress {
                consumed: 7,
                done: true
            })
        );
        assert!(decoder.is_done());
        assert_eq!(
            decoder.feed(b"X", &mut sink),
            Ok(Progress {
                consumed: 0,
                done: true
            })
        );
    }

    #[test]
    fn rejects_malformed_bodies() {
        let cases: &[(&[u8], ChunkedError)] = &[
            (b"\r\n", ChunkedError::BadChunkSize),
            (b"-1\r\n", ChunkedError::BadChunkSize),
            (b"0x5\r\n", ChunkedError::BadChunkSize),
            (b"+5\r\n", ChunkedError::BadChunkSize),
            (b"5 x\r\n", ChunkedError::BadChunkSize),
            (b"10000000000000000\r\n", ChunkedError::ChunkSizeOverflow),
            (b"5\n", ChunkedError::BareLf),
            (b"5\rx", ChunkedError::MissingCrlf),
            (b"3\r\nabcX", ChunkedError::MissingCrlf),
            (b"3\r\nabc\rX", ChunkedError::MissingCrlf),
            (b"3\r\nabc\n", ChunkedError::MissingCrlf),
            (b"3;a=\x00\r\n", ChunkedError::InvalidExtension),
            (b"0\r\n X: y\r\n\r\n", ChunkedError::InvalidTrailer),
            (b"0\r\nX: \x01\r\n\r\n", ChunkedError::InvalidTrailer),
            (b"0\r\nX: y\n", ChunkedError::BareLf),
            (b"0\r\n\n", ChunkedError::BareLf),
            (b"0\r\n\rX", ChunkedError::MissingCrlf),
        ];
        for (input, expected) in cases {
            assert_eq!(
                decode_all(input).map(|(_, p)| p),
                Err(*expected),
                "{}",
                input.escape_ascii()
            );
        }
    }

    #[test]
    fn body_limit_refuses_a_size_once_its_digits_end() {
        let mut decoder = ChunkedDecoder::new().with_max_body(10);
        assert_eq!(
            decoder.feed(b"7fffffffffffffff", &mut |_| {}),
            Ok(Progress {
                consumed: 16,
                done: false
            })
        );
        assert_eq!(
            decoder.feed(b"\r", &mut |_| {}),
            Err(ChunkedError::BodyTooLarge)
        );
        assert_eq!(ChunkedError::BodyTooLarge.status(), 413);
        // Overflow is a broken body (400) whatever the limit.
        let mut decoder = ChunkedDecoder::new().with_max_body(10);
        assert_eq!(
            decoder.feed(b"10000000000000000\r\n", &mut |_| {}),
            Err(ChunkedError::ChunkSizeOverflow)
        );
        assert_eq!(ChunkedError::ChunkSizeOverflow.status(), 400);
        // Chunks add up: 6 + 4 fit in 10, one byte more does not.
        let mut decoder = ChunkedDecoder::new().with_max_body(10);
        assert!(decoder
            .feed(b"6\r\nabcdef\r\n4\r\nabcd\r\n", &mut |_| {})
            .is_ok());
        assert_eq!(
            decoder.feed(b"1;x", &mut |_| {}),
            Err(ChunkedError::BodyTooLarge)
        );
        let mut decoder = ChunkedDecoder::new().with_max_body(10);
        assert!(
            decoder
                .feed(b"a\r\n0123456789\r\n0\r\n\r\n", &mut |_| {})
                .unwrap()
                .done
        );
    }

    #[test]
    fn limits() {
        let mut decoder = ChunkedDecoder::with_limits(8, 10);
        assert_eq!(
            decoder.feed(b"1;abcdefgh\r\n", &mut |_| {}),
            Err(ChunkedError::ChunkLineTooLong)
        );
        let mut decoder = ChunkedDecoder::with_limits(8, 10);
        assert_eq!(
            decoder.feed(b"0\r\nA: 1\r\nB: 2345\r\n\r\n", &mut |_| {}),
            Err(ChunkedError::TrailerTooLarge)
        );
        let mut decoder = ChunkedDecoder::with_limits(8, 10);
        assert!(decoder.feed(b"0000000a\r\n", &mut |_| {}).is_ok());
        assert_eq!(ChunkedError::BareLf.status(), 400);
        assert_eq!(ChunkedError::BareLf.to_string(), "bare LF in chunked body");
    }

    fn encode(chunks: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in chunks.iter().filter(|chunk| !chunk.is_empty()) {
            out.extend_from_slice(format!("{:X}\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\nTrailer: t\r\n\r\n");
        out
    }

    proptest! {
        #[test]
        fn any_split_decodes_the_same(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..6),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let encoded = encode(&chunks);
            let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(encoded.len())).collect();
            cuts.push(encoded.len());
            cuts.sort_unstable();

            let mut decoder = ChunkedDecoder::new();
            let mut out = Vec::new();
            let mut pending = Vec::new();
            let mut fed = 0;
            for cut in cuts {
                pending.extend_from_slice(&encoded[fed..cut]);
                fed = cut;
                let progress = decoder
                    .feed(&pending, &mut |data| out.extend_from_slice(data))
                    .unwrap();
                pending.drain(..progress.consumed);
            }
            prop_assert!(decoder.is_done());
            prop_assert!(pending.is_empty());
            prop_assert_eq!(&out, &chunks.concat());
            prop_assert_eq!(decoder.body_bytes(), out.len() as u64);
        }
    }
}
