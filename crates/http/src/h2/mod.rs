//! HTTP/2 (RFC 9113) and HPACK (RFC 7541), sans I/O: bytes in, events and frames out.
//!
//! Owns: the frame codec (`frame`), header compression (`hpack`), one connection's protocol
//! state (`connection`: the preface, SETTINGS, stream states, flow control both ways, PING,
//! GOAWAY, RST_STREAM, the flood budgets of `flood`), and the mapping between HTTP/2 fields
//! and the HTTP/1 types the rest of ampd serves (`fields`: a request's pseudo-headers into a
//! `RequestHead`; a response's `response_head::Head` is HPACK-encoded by `head_block`), the
//! `priority` field of RFC 9218 (`priority`).
//! Must not touch: sockets, clocks (the caller passes `Instant`s), configuration files, what
//! a request is answered with. The server (`src/conn/h2/`) feeds a `Connection` the bytes it
//! reads and writes the frames it is handed.

pub mod connection;
pub mod error;
pub mod fields;
mod flood;
pub mod frame;
mod head_block;
pub mod hpack;
pub mod priority;
mod stream;

pub use connection::{Connection, Event, Limits, StreamId};
pub use error::ErrorCode;
pub use fields::ResponseFields;
pub use priority::Priority;

/// The client connection preface (RFC 9113 §3.4): a cleartext listener that speaks HTTP/2
/// with prior knowledge tells it from an HTTP/1 request by these bytes.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The ALPN protocol id of HTTP/2 over TLS (RFC 9113 §3.2).
pub const ALPN_H2: &[u8] = b"h2";
