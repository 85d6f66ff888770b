//! What every response head says, whoever writes the response: the static-file handler, the
//! status and health handlers, error pages, and the proxy. Handlers use this vocabulary without
//! importing each other.
//!
//! Owns: `Persistence` (the `Connection` decision, RFC 9112 §9.3), `HeadContext` (the facts a
//! head is written under: `Date`, persistence, a location's added and cache headers), the
//! headers every response carries, the response head as data (`Head`, re-exported from
//! `ampd_http`, whose HTTP/2 encoder needs it) with its one HTTP/1 serialiser
//! (`write_http1_head`, the only writer of connection-specific fields), and status pages
//! (`status_page`, and `StatusAnswer`, a status page asked for by code that cannot write it
//! itself).
//! Must not touch: bodies of files, sockets, routing.

pub mod body_stage;
pub mod compress;
pub mod status_page;

pub use status_page::StatusAnswer;

pub use ampd_http::response_head::Head;

use ampd_http::response::write_header;

/// What `Connection` header the response carries (decided by `conn`, RFC 9112 §9.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// HTTP/1.1 keep-alive: no header needed.
    Implicit,
    /// HTTP/1.0 keep-alive: `Connection: keep-alive`.
    KeepAlive,
    Close,
}

/// The facts a response head is written under, supplied by the connection and its location.
#[derive(Debug)]
pub struct HeadContext<'a> {
    /// `Date` value, rendered once a second by the engine.
    pub date: &'a [u8; 29],
    pub persistence: Persistence,
    /// `Name: value\r\n` lines the location adds to every response.
    pub extra_headers: &'a [u8],
    /// The site's `Strict-Transport-Security` line over TLS; empty over plain HTTP, where it
    /// must never go (RFC 6797 §7.2). Kept out of every cached head for that reason.
    pub strict_transport_security: &'a [u8],
    /// `Cache-Control` for successful responses (the location's `cache_control`).
    pub cache_control: Option<&'a str>,
    /// `Expires` time (Unix seconds) and `max-age` for successful responses.
    pub expires: Option<(u64, u64)>,
}

/// `Server`, `Date`, `Connection`, HSTS and the location's added headers: on every response.
pub fn common_headers(out: &mut Vec<u8>, context: &HeadContext<'_>) {
    out.extend_from_slice(b"Server: ampd\r\n");
    date_and_persistence(out, context);
}

/// `common_headers` after `Server` (which a cached head prefix already holds).
pub fn date_and_persistence(out: &mut Vec<u8>, context: &HeadContext<'_>) {
    out.extend_from_slice(b"Date: ");
    out.extend_from_slice(context.date);
    out.extend_from_slice(b"\r\n");
    match context.persistence {
        Persistence::Implicit => {}
        Persistence::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        Persistence::Close => out.extend_from_slice(b"Connection: close\r\n"),
    }
    out.extend_from_slice(context.strict_transport_security);
    out.extend_from_slice(context.extra_headers);
}

/// `Cache-Control` and `Expires` of a location, on successful responses only (an error page
/// must not be cached for an hour).
pub fn cache_headers(out: &mut Vec<u8>, context: &HeadContext<'_>) {
    match (context.cache_control, context.expires) {
        (Some(value), _) => write_header(out, "Cache-Control", value.as_bytes()),
        (None, Some((_, max_age))) => {
            out.extend_from_slice(b"Cache-Control: max-age=");
            out.extend_from_slice(max_age.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        (None, None) => {}
    }
    if let Some((at, _)) = context.expires {
        write_header(out, "Expires", &ampd_http::date::format_http_date(at));
    }
}

/// What an HTTP/1 connection writes after a head's own fields: the fields only it may write,
/// decided by persistence and the body's framing, never stored in a `Head` (RFC 9110 §7.6.1;
/// HTTP/2 has none, RFC 9113 §8.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Http1Framing {
    pub persistence: Persistence,
    /// The body follows in the chunked coding (`Transfer-Encoding: chunked`, RFC 9112 §7.1).
    pub chunked: bool,
}

impl Http1Framing {
    /// A head whose body, if any, is delimited by its `Content-Length` or by the status.
    #[must_use]
    pub fn delimited(persistence: Persistence) -> Http1Framing {
        Http1Framing {
            persistence,
            chunked: false,
        }
    }

    /// An interim (1xx) head: the connection's fields go on the final one.
    pub const INTERIM: Http1Framing = Http1Framing {
        persistence: Persistence::Implicit,
        chunked: false,
    };
}

/// Serialise `head` for an HTTP/1 connection: the status line and fields, the connection's
/// own fields per `framing`, the blank line. Returns the bytes appended.
pub fn write_http1_head(head: &Head, framing: Http1Framing, out: &mut Vec<u8>) -> usize {
    let before = out.len();
    head.write_http1(out);
    connection_fields(framing, out);
    out.extend_from_slice(b"\r\n");
    out.len() - before
}

/// The `Connection` and `Transfer-Encoding` lines `framing` calls for.
pub fn connection_fields(framing: Http1Framing, out: &mut Vec<u8>) {
    match framing.persistence {
        Persistence::Implicit => {}
        Persistence::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        Persistence::Close => out.extend_from_slice(b"Connection: close\r\n"),
    }
    if framing.chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
}

/// `Server`, `Date`, HSTS and the location's added fields: what every response carries
/// (`common_headers` as data; `Connection` is the HTTP/1 serialiser's).
pub fn common_fields(head: &mut Head, context: &HeadContext<'_>) {
    head.push("Server", b"ampd");
    date_and_added_fields(head, context);
}

/// `common_fields` after `Server` (which a cached head already holds).
pub fn date_and_added_fields(head: &mut Head, context: &HeadContext<'_>) {
    head.push("Date", context.date);
    head.push_lines(context.strict_transport_security);
    head.push_lines(context.extra_headers);
}

/// `cache_headers` as data.
pub fn cache_fields(head: &mut Head, context: &HeadContext<'_>) {
    match (context.cache_control, context.expires) {
        (Some(value), _) => head.push("Cache-Control", value.as_bytes()),
        (None, Some((_, max_age))) => head.push_with("Cache-Control", |value| {
            value.extend_from_slice(b"max-age=");
            ampd_http::response::write_decimal(value, max_age);
        }),
        (None, None) => {}
    }
    if let Some((at, _)) = context.expires {
        head.push("Expires", &ampd_http::date::format_http_date(at));
    }
}
