//! HTTP/3 (RFC 9114) and QPACK (RFC 9204), sans I/O: the bytes of QUIC streams in, frames,
//! field sections and typed errors out. QUIC itself (packets, loss recovery, TLS) is not
//! here: the server runs it and hands this module each stream's bytes.
//!
//! Owns: QUIC's integers (`varint`), the error codes (`error`), SETTINGS (`settings`), the
//! frame layer and which frames each stream may carry (`frame`), field compression (`qpack`),
//! the client's control stream (`control`), a request stream's frames → the request
//! (`request_stream`), and a response → frames (`response`).
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
