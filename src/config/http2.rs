//! The `[http2]` section: whether HTTP/2 is offered and the limits every HTTP/2 connection
//! keeps (`ampd_http::h2::Limits`).
//!
//! Owns: the section's types and defaults. Must not touch: parsing (`http2_keys.rs`), the
//! protocol (`ampd_http::h2`).

use ampd_http::h2::Limits;

/// Streams of one connection that may talk to upstreams (proxy, FastCGI, CGI) at once: as many
/// as a browser's six HTTP/1.1 connections to a host could, and a few more, so a page's API
/// calls beside a long poll run side by side; few enough that one client connection cannot
/// turn its 128 streams into 128 upstream connections or CGI processes.
pub const DEFAULT_MAX_UPSTREAM_STREAMS: usize = 8;

/// The most `max_upstream_streams` may be: the upstream links the engines' tokens have room
/// for per connection (`engine::slab`).
pub const MAX_UPSTREAM_STREAMS: usize = 32;

/// How HTTP/2 is offered (docs/http2.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Http2 {
    /// `h2` is offered in ALPN on TLS listeners (default on).
    pub enabled: bool,
    /// The limits and flood budgets every HTTP/2 connection keeps.
    pub limits: Limits,
    /// Streams of one connection with an upstream link (proxy, FastCGI, CGI) at once; the
    /// streams past it wait for a link, in the order they asked.
    pub max_upstream_streams: usize,
}

impl Default for Http2 {
    fn default() -> Http2 {
        Http2 {
            enabled: true,
            limits: Limits::default(),
            max_upstream_streams: DEFAULT_MAX_UPSTREAM_STREAMS,
        }
    }
}
