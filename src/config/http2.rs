//! The `[http2]` section: whether HTTP/2 is offered and the limits every HTTP/2 connection
//! keeps (`ampd_http::h2::Limits`).
//!
//! Owns: the section's types and defaults. Must not touch: parsing (`http2_keys.rs`), the
//! protocol (`ampd_http::h2`).

use ampd_http::h2::Limits;

/// How HTTP/2 is offered (docs/http2.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Http2 {
    /// `h2` is offered in ALPN on TLS listeners (default on).
    pub enabled: bool,
    /// The limits and flood budgets every HTTP/2 connection keeps.
    pub limits: Limits,
}

impl Default for Http2 {
    fn default() -> Http2 {
        Http2 {
            enabled: true,
            limits: Limits::default(),
        }
    }
}
