//! Between HTTP/2 fields and the HTTP/1 types ampd serves with (RFC 9113 §8).
//!
//! Owns: a request's decoded field list → `RequestHead` (pseudo-headers, §8.3.1; fields that
//! are malformed in HTTP/2, §8.2; `Cookie` crumbs joined, §8.2.3), a field list built for
//! `Connection::write_headers`, and which fields are connection-specific (§8.2.2). Must not
//! touch: HPACK, frames, streams.
//!
//! Files: `request.rs` (fields → `RequestHead`), `response.rs` (a list of response fields).

mod request;
mod response;
#[cfg(test)]
mod tests;

pub use request::{MalformedRequest, RequestBuilder};
pub use response::ResponseFields;

/// The fields of HTTP/1 that describe a connection, not a message: HTTP/2 has none (§8.2.2).
pub(crate) fn is_connection_specific(lower_case_name: &[u8]) -> bool {
    matches!(
        lower_case_name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}
