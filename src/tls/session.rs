//! One connection's TLS, sans I/O: the engine hands it the ciphertext it read and writes the
//! records it seals; `Conn` sees only plaintext.
//!
//! Owns: the connection's rustls state. Must not touch: sockets beyond the write the engine
//! asks for, HTTP.

use std::sync::Arc;

use super::TlsContext;

/// A TLS connection from its first byte to its close.
pub struct TlsSession {
    #[allow(dead_code)] // Until the handshake lands (this session's next commit).
    context: Arc<TlsContext>,
}

impl std::fmt::Debug for TlsSession {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("TlsSession")
    }
}

impl TlsSession {
    #[must_use]
    pub fn new(context: Arc<TlsContext>) -> TlsSession {
        TlsSession { context }
    }
}
