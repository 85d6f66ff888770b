//! What every response head says, whoever writes the response: the static-file handler, the
//! status and health handlers, error pages, and the proxy. Handlers use this vocabulary without
//! importing each other.
//!
//! Owns: `Persistence` (the `Connection` decision, RFC 9112 §9.3), `HeadContext` (the facts a
//! head is written under: `Date`, persistence, a location's added and cache headers), the
//! headers every response carries, and status pages (`status_page`, and `StatusAnswer`, a
//! status page asked for by code that cannot write it itself).
//! Must not touch: bodies of files, sockets, routing.

pub mod compress;
pub mod status_page;

pub use status_page::StatusAnswer;

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
