//! The upstream's response head: its type, the parser's limits and outcome, and the questions
//! the proxy asks of a head (a field's value, `Connection` options, which fields go on to the
//! client).
//!
//! Owns `ResponseHead`, `Limits` and `ResponseParse`. Must not parse bytes (`parser.rs` does)
//! or decide body framing (`body.rs`).

use crate::request::{Header, Version};
use crate::token::list_elements;

use super::framing::{self, Declared};
use super::hop::{is_hop_by_hop, named_by_connection};

/// Size limits of a response head, enforced on partial input too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest head in bytes, status line and final CRLF included.
    pub max_head_bytes: usize,
    /// Most field lines.
    pub max_headers: usize,
}

impl Default for Limits {
    /// The request side's limits: an application that needs a larger head than a browser may
    /// send is rare, and these bound what one exchange holds before the body streams.
    fn default() -> Self {
        Self {
            max_head_bytes: 32768,
            max_headers: 100,
        }
    }
}

/// The outcome of feeding a [`ResponseParser`](super::ResponseParser).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseParse {
    /// More bytes are needed.
    Partial,
    /// The head is complete; it occupied the first `len` bytes of the buffer.
    Complete { head: ResponseHead, len: usize },
}

/// A parsed and validated response head from an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub version: Version,
    pub status: u16,
    /// The reason phrase, possibly empty; bytes that are not UTF-8 (obs-text) are replaced,
    /// since clients ignore it (RFC 9112 §4).
    pub reason: Box<str>,
    /// Every field line in order, names as sent, values without surrounding OWS.
    pub headers: Vec<Header>,
    /// Whether the upstream keeps the connection open after this response (RFC 9112 §9.3):
    /// HTTP/1.1 unless `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`. The
    /// connection is reusable only if, besides, the body is delimited
    /// ([`ResponseBody::is_delimited`](super::ResponseBody::is_delimited)) and read to its end.
    pub keep_alive: bool,
}

impl ResponseHead {
    /// The value of the first field named `name` (ASCII case-insensitive).
    #[inline]
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        crate::message::first_named(&self.headers, name)
    }

    /// The values of every field named `name`, in the order received.
    #[inline]
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        crate::message::all_named(&self.headers, name)
    }

    /// Whether any `Connection` field lists `token` (ASCII case-insensitive), e.g. `close`
    /// or `upgrade`.
    #[must_use]
    pub fn connection_has(&self, token: &str) -> bool {
        self.headers_named("connection")
            .flat_map(list_elements)
            .any(|option| option.eq_ignore_ascii_case(token.as_bytes()))
    }

    /// A 1xx other than `101 Switching Protocols`: an interim response (`100 Continue`,
    /// `103 Early Hints`) after which the final response's head follows on the same
    /// connection (RFC 9110 §15.2).
    #[inline]
    #[must_use]
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }

    /// Whether this is a `101 Switching Protocols` to `protocol` (`"websocket"`): the
    /// upstream lists `upgrade` in `Connection` and names `protocol` (ASCII case-insensitive,
    /// any `/version` ignored) in `Upgrade` (RFC 9110 §7.8). A 101 to anything else is one the
    /// proxy did not ask for and must not tunnel.
    #[must_use]
    pub fn upgrades_to(&self, protocol: &str) -> bool {
        self.status == 101
            && self.connection_has("upgrade")
            && self
                .headers_named("upgrade")
                .flat_map(list_elements)
                .any(|offered| {
                    let name = offered.split(|&b| b == b'/').next().unwrap_or_default();
                    name.eq_ignore_ascii_case(protocol.as_bytes())
                })
    }

    /// The `Content-Length` value (identical duplicates folded), when the head declares one
    /// and its framing is valid. A response to HEAD or a 304 carries the length the body
    /// would have had (RFC 9110 §8.6), which the caller passes on; for other responses
    /// [`response_body`](super::response_body) is what frames the body.
    #[must_use]
    pub fn content_length(&self) -> Option<u64> {
        match framing::declared(self.version, &self.headers) {
            Ok(Declared::Length(length)) => Some(length),
            _ => None,
        }
    }

    /// The fields that go on to the client: all but the hop-by-hop ones
    /// ([`is_hop_by_hop`]), those the upstream's `Connection` names, and `Content-Length`
    /// and `Transfer-Encoding`, since the caller frames the body it relays itself (and adds
    /// `Connection`/`Upgrade` for a tunnel it accepts).
    pub fn end_to_end_headers(&self) -> impl Iterator<Item = &Header> {
        let connection = named_by_connection(&self.headers);
        self.headers.iter().filter(move |header| {
            !is_hop_by_hop(&header.name)
                && !header.name.eq_ignore_ascii_case("content-length")
                && !connection.names(&header.name)
        })
    }

    /// Writes the head back out in wire form: the status line as received (version, code,
    /// reason), then every field. Parsing the result yields an equal head; the fuzz target
    /// checks that, and tests build responses with it.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.version.as_str().as_bytes());
        out.push(b' ');
        crate::response::write_decimal(out, u64::from(self.status));
        out.push(b' ');
        out.extend_from_slice(self.reason.as_bytes());
        out.extend_from_slice(b"\r\n");
        for header in &self.headers {
            crate::response::write_header(out, &header.name, &header.value);
        }
        out.extend_from_slice(b"\r\n");
    }
}
