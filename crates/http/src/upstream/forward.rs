//! The request head ampd sends an upstream, written afresh from the parsed client request
//! (RFC 9110 §7.6, RFC 9112 §3, §6).
//!
//! Owns `ForwardRequest` and the order and choice of fields in the upstream request. Must not
//! choose the upstream, rewrite the target or relay the body (the server's proxy exchange
//! does; it says here how the body will be framed).
//!
//! Never the client's raw bytes: the request line is always `HTTP/1.1`, `Host` comes first,
//! hop-by-hop fields and the client's framing are dropped, so are names with `_` (unless the
//! location passes them) and an untrusted client's forwarding claims, and exactly one framing
//! field is written from `body`. However the client framed its request, the upstream sees one message
//! framed one way, so no second request can hide in the first.

use std::net::IpAddr;

use crate::request::{BodyFraming, Header, Method};
use crate::response::{write_decimal, write_header};
use crate::token::is_field_value;

use super::forwarded::forwarding_fields;
use super::hop::{is_hop_by_hop, named_by_connection, ConnectionOptions};

/// How the request body is framed towards the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForwardBody {
    /// No body, and no framing field.
    None,
    /// `Content-Length: N`; exactly N bytes follow the head.
    Length(u64),
    /// `Transfer-Encoding: chunked`; the caller re-frames the body's data in chunks.
    Chunked,
}

impl From<BodyFraming> for ForwardBody {
    fn from(framing: BodyFraming) -> Self {
        match framing {
            BodyFraming::None => Self::None,
            BodyFraming::Length(length) => Self::Length(length),
            BodyFraming::Chunked => Self::Chunked,
        }
    }
}

/// Everything the upstream request head is made of.
#[derive(Debug, Clone)]
pub struct ForwardRequest<'a> {
    pub method: &'a Method,
    /// The path and query to send (origin-form). Bytes a request-target may not hold are
    /// percent-encoded on the way out.
    pub target: &'a str,
    /// The `Host` value for the upstream.
    pub host: &'a str,
    /// The client's fields, as parsed.
    pub client_headers: &'a [Header],
    pub body: ForwardBody,
    /// The client's address (the PROXY protocol's source, when one is used).
    pub client: IpAddr,
    /// The scheme the client used: `"http"` or `"https"`.
    pub proto: &'a str,
    /// The client's `Host` (or absolute-form authority), for `X-Forwarded-Host` and
    /// `Forwarded: host=`.
    pub client_host: Option<&'a str>,
    /// The client is a trusted proxy (`forwarded_trust`): its `X-Forwarded-For` and
    /// `Forwarded` chains are kept and this hop appended, and its `X-Forwarded-Proto` /
    /// `X-Forwarded-Host` (the first hop's view, when well-formed) replace this hop's, as Caddy
    /// does for trusted proxies. Otherwise the client's copies are dropped.
    pub trust_incoming: bool,
    /// The protocol to upgrade to (`"websocket"`) when the location tunnels; `None` drops the
    /// client's `Upgrade`.
    pub upgrade: Option<&'a str>,
    /// Pass the client's fields whose names hold `_` (nginx's `underscores_in_headers on`);
    /// otherwise they are dropped. Either way a name that, `_` read as `-`, is a field dropped
    /// here (`X_Forwarded_For`) is dropped: a CGI-style gateway (WSGI, Rack) reads both names
    /// as one variable (`HTTP_X_FORWARDED_FOR`), so it would pass for the field ampd remade.
    pub underscores: bool,
    /// Ask the upstream to keep the connection for the next request (`Connection:
    /// keep-alive`) or to close it after the response.
    pub keep_alive: bool,
}

/// Client fields that ampd writes itself (after the client's end-to-end fields), so the
/// client's copies are dropped: `Host` goes first, `Content-Length` follows from `body`, an
/// `Expect` is answered by ampd itself, and the forwarding fields are remade with the trust rule.
const REMADE: [&str; 7] = [
    "host",
    "content-length",
    "expect",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
];

/// The client's own account of where the request came from, besides the chains ampd remakes
/// (`X-Real-IP` as nginx's `real_ip` module and many applications read it; the port and path
/// prefix a front proxy saw): from a client that is not trusted (`trust_incoming`) they are
/// claims anyone can make, dropped as its `X-Forwarded-For` is; a trusted proxy's are passed.
const CLIENT_CLAIMS: [&str; 3] = ["x-real-ip", "x-forwarded-port", "x-forwarded-prefix"];

/// Whether the client's field `name` stays behind (see `write_request`).
fn dropped(name: &str, request: &ForwardRequest<'_>, connection: &ConnectionOptions<'_>) -> bool {
    let stays = |name: &str| {
        is_hop_by_hop(name)
            || REMADE
                .iter()
                .any(|remade| remade.eq_ignore_ascii_case(name))
            || connection.names(name)
            || (!request.trust_incoming
                && CLIENT_CLAIMS
                    .iter()
                    .any(|claim| claim.eq_ignore_ascii_case(name)))
    };
    if name.contains('_') {
        !request.underscores || stays(name) || stays(&name.replace('_', "-"))
    } else {
        stays(name)
    }
}

/// Appends the request head for the upstream to `out`.
///
/// Order: request line; `Host`; the client's end-to-end fields in the order received; the
/// forwarding fields; the one framing field; `Connection` (and `Upgrade`); the empty line.
/// A field whose value could not be sent safely (CR, LF, NUL: only a caller that built one by
/// hand can pass it) is left out rather than written.
pub fn write_request(request: &ForwardRequest<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(request.method.as_str().as_bytes());
    out.push(b' ');
    push_target(out, request.target);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    push_field(out, "Host", request.host.as_bytes());

    let connection = named_by_connection(request.client_headers);
    for header in request.client_headers {
        if !dropped(&header.name, request, &connection) {
            push_field(out, &header.name, &header.value);
        }
    }
    for (name, value) in forwarding_fields(request) {
        if !value.is_empty() {
            push_field(out, name, &value);
        }
    }

    match request.body {
        ForwardBody::None => {}
        ForwardBody::Length(length) => {
            out.extend_from_slice(b"Content-Length: ");
            write_decimal(out, length);
            out.extend_from_slice(b"\r\n");
        }
        ForwardBody::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    match request.upgrade {
        Some(protocol) if is_sendable(protocol.as_bytes()) => {
            out.extend_from_slice(b"Connection: upgrade\r\n");
            push_field(out, "Upgrade", protocol.as_bytes());
        }
        _ if request.keep_alive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        _ => out.extend_from_slice(b"Connection: close\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

/// A non-empty value without CR, LF, NUL or other controls but HTAB.
fn is_sendable(value: &[u8]) -> bool {
    !value.is_empty() && is_field_value(value)
}

fn push_field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    if is_field_value(value) {
        write_header(out, name, value);
    }
}

/// The target with every byte a request-target may not hold (controls, SP, `#`, DEL,
/// non-ASCII) percent-encoded, so the request line always has exactly two spaces and ends
/// where it should. An empty target becomes `/`.
fn push_target(out: &mut Vec<u8>, target: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    if target.is_empty() {
        out.push(b'/');
        return;
    }
    for &byte in target.as_bytes() {
        if byte > b' ' && byte < 0x7f && byte != b'#' {
            out.push(byte);
        } else {
            out.extend_from_slice(&[
                b'%',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
        }
    }
}

#[cfg(test)]
mod tests;
