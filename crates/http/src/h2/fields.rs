//! Between HTTP/2 fields and the HTTP/1 types ampd serves with (RFC 9113 §8).
//!
//! Owns: a request's decoded field list → `RequestHead` (pseudo-headers, §8.3.1; fields that
//! are malformed in HTTP/2, §8.2; `Cookie` crumbs joined, §8.2.3), and an HTTP/1 response
//! head, as ampd's handlers write it, → the `:status` and fields of a HEADERS frame
//! (connection-specific fields dropped, §8.2.2). Must not touch: HPACK, frames, streams.
//!
//! Files: `request.rs` (fields → `RequestHead`), `response.rs` (HTTP/1 head → fields).

mod request;
mod response;
#[cfg(test)]
mod tests;

pub use request::{MalformedRequest, RequestBuilder};
pub(crate) use response::status_of_http1;
pub use response::ResponseFields;

/// The fields of HTTP/1 that describe a connection, not a message: HTTP/2 has none (§8.2.2).
pub(crate) fn is_connection_specific(lower_case_name: &[u8]) -> bool {
    matches!(
        lower_case_name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}
