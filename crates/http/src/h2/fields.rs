//! Between HTTP/2 fields and the HTTP/1 types ampd serves with (RFC 9113 §8).
//!
//! Owns: a request's decoded field list → `RequestHead` (pseudo-headers, §8.3.1; fields that
//! are malformed in HTTP/2, §8.2; `Cookie` crumbs joined, §8.2.3), and an HTTP/1 response
//! head, as ampd's handlers write it, → the `:status` and fields of a HEADERS frame
//! (connection-specific fields dropped, §8.2.2). Must not touch: HPACK, frames, streams.

use crate::request::RequestHead;

/// Why a request's fields do not make a request: a stream error, PROTOCOL_ERROR (§8.1.1),
/// except where noted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MalformedRequest {
    /// A pseudo-header is missing, repeated, unknown, after a regular field, or a response
    /// one (`:status`).
    PseudoHeader(&'static str),
    /// A field name with upper case or a character outside tchar, or a value with NUL, CR or
    /// LF or leading/trailing whitespace (§8.2.1).
    FieldSyntax,
    /// A connection-specific field (`connection`, `keep-alive`, `proxy-connection`,
    /// `transfer-encoding`, `upgrade`), or `te` other than `trailers` (§8.2.2).
    ConnectionSpecific,
    /// `content-length` is not a number, or differs between repeats.
    ContentLength,
    /// `:authority` or `host` is not `host [":" port]`, or they disagree.
    Authority,
    /// CONNECT, which ampd does not tunnel over HTTP/2 (answered 405 rather than reset).
    Connect,
}

/// Builds the request of one header block, a field at a time as the HPACK decoder yields
/// them (the first fault is kept and reported by `finish`).
#[derive(Debug, Default)]
pub struct RequestBuilder {}

impl RequestBuilder {
    #[must_use]
    pub fn new() -> RequestBuilder {
        todo!("hpack helper")
    }

    /// The next decoded field, in block order.
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        let _ = (name, value);
        todo!("hpack helper")
    }

    /// The request the fields make. `end_stream`: the HEADERS frame ended the stream (no
    /// body). `version` is `Version::Http2`; `:authority` stands for `Host` (§8.3.1: it is
    /// added as a `host` field when the client sent none); `body` is `Length(n)` with a
    /// `content-length`, `None` when the stream ended with the head, otherwise `Chunked` (the
    /// server re-frames DATA as chunks for the HTTP/1 body readers); `keep_alive` true;
    /// `expect_continue` from `expect: 100-continue`.
    ///
    /// # Errors
    /// The list is malformed (§8.1.1).
    pub fn finish(self, end_stream: bool) -> Result<RequestHead, MalformedRequest> {
        let _ = end_stream;
        todo!("hpack helper")
    }
}

/// A response head as HEADERS carries it: `:status` and the fields, names in lower case, in
/// the order the HTTP/1 head had them, connection-specific ones left out. Kept and reused by
/// the server (one per connection), so a response costs no allocation per field.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResponseFields {
    pub status: u16,
    /// Names (lower-cased) and values, back to back.
    text: Vec<u8>,
    /// `[name start, name end, value start, value end]` in `text`.
    spans: Vec<[u32; 4]>,
}

impl ResponseFields {
    /// Read an HTTP/1 response head (`HTTP/1.1 200 OK\r\n...\r\n\r\n`, as ampd wrote it) into
    /// `self`, replacing what it held. Returns `None` when `head` is not a complete head.
    pub fn from_http1(&mut self, head: &[u8]) -> Option<()> {
        let _ = head;
        todo!("hpack helper")
    }

    /// Add a field (name in lower case).
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let _ = (name, value);
        todo!("hpack helper")
    }

    /// The fields, in order (`:status` is not among them).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.spans.iter().map(|span| {
            (
                &self.text[span[0] as usize..span[1] as usize],
                &self.text[span[2] as usize..span[3] as usize],
            )
        })
    }
}
