//! Telling an `h2c` listener's connections apart: one that opens with the HTTP/2 client
//! preface speaks HTTP/2 (RFC 9113 §3.3, prior knowledge), any other speaks HTTP/1.1.
//!
//! Owns: that decision from the first bytes. Must not touch: either protocol's parsing.

use super::Conn;

/// What the input of an `h2c` listener's connection opens with.
pub(super) enum Preface {
    /// The whole HTTP/2 client preface.
    Complete,
    /// The beginning of it, or of a first line not yet ended: more input decides.
    Partial,
    /// An HTTP/1 request (or what the HTTP/1 parser is to refuse).
    Absent,
    /// HTTP/2 that breaks the preface: it began with the preface's request line and then
    /// diverged, or its first line cannot be HTTP/1's. The session answers GOAWAY
    /// PROTOCOL_ERROR and closes (RFC 9113 §3.4): an HTTP/1 answer would be read by an
    /// HTTP/2 client as frames.
    Broken,
}

/// The preface's request line: no HTTP/1 request begins with it (RFC 9113 §3.4 chose it so).
const PREFACE_LINE: &[u8] = b"PRI * HTTP/2.0";

impl Conn {
    /// `max_line`: past this many bytes without a line end, the HTTP/1 parser answers (`414`).
    pub(super) fn preface(&self, max_line: usize) -> Preface {
        let input = &self.input[self.consumed..];
        let preface = ampd_http::h2::PREFACE;
        if input.starts_with(preface) {
            return Preface::Complete;
        }
        if preface.starts_with(input) {
            return Preface::Partial;
        }
        if input.starts_with(PREFACE_LINE) {
            return Preface::Broken;
        }
        // Empty lines before the request line are skipped, as the HTTP/1 parser does (RFC
        // 9112 §2.2).
        let start = input
            .iter()
            .position(|&byte| byte != b'\r' && byte != b'\n')
            .unwrap_or(input.len());
        match memchr::memchr(b'\n', &input[start..]) {
            Some(end) if ends_with_http1_version(&input[start..start + end]) => Preface::Absent,
            Some(_) => Preface::Broken,
            None if input.len() <= max_line => Preface::Partial,
            None => Preface::Absent,
        }
    }
}

/// Whether a request line (its CR, if any, still on) ends with ` HTTP/x.y`: HTTP/1's form
/// (RFC 9112 §2.3), whatever the version (`HTTP/3.0` is HTTP/1's parser's `505`).
fn ends_with_http1_version(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.len().checked_sub(9).map(|at| &line[at..]) {
        Some([b' ', b'H', b'T', b'T', b'P', b'/', major, b'.', minor]) => {
            major.is_ascii_digit() && minor.is_ascii_digit()
        }
        _ => false,
    }
}
