//! HTTP/3 (RFC 9114) and QPACK (RFC 9204), sans I/O: the bytes of QUIC streams in, requests,
//! body pieces and typed errors out, and the bytes to write on our own streams. QUIC itself
//! (packets, loss recovery, TLS, flow control) is not here: the server runs it (quinn-proto)
//! and hands this module each stream's bytes.
//!
//! Owns: one connection's streams (`connection`: which stream is which, the client's control
//! and QPACK streams, our control, QPACK encoder and decoder streams, GOAWAY, blocked request
//! streams), QUIC's integers (`varint`), the error codes (`error`), SETTINGS (`settings`), the
//! frame layer and which frames each stream may carry (`frame`), field compression (`qpack`),
//! the client's control stream's frame rules (`control`), a request stream's frames → the
//! request (`request_stream`), and response heads (interim and final) → frames (`response`).
//! Must not touch: sockets, clocks, configuration files, what a request is answered with.

pub mod connection;
pub mod control;
pub mod error;
pub mod frame;
pub mod qpack;
pub mod request_stream;
pub mod response;
pub mod settings;
#[cfg(test)]
mod tests;
pub mod varint;

pub use connection::{Config, Connection, Event, LocalStream};
pub use control::{ControlEvent, ControlStream};
pub use error::{Error, ErrorCode, Scope};
pub use frame::{Frame, FrameReader, StreamKind};
pub use request_stream::{Event as RequestEvent, RequestError, RequestStream};
pub use response::HeadError;
pub use settings::Settings;

/// The ALPN protocol id of HTTP/3 (RFC 9114 §3.1).
pub const ALPN_H3: &[u8] = b"h3";
