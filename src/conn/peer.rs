//! Who the connection is with: the client's address and port (or the PROXY protocol's), the
//! listener that accepted it, what the TLS handshake settled, and whether it speaks HTTP/2,
//! as the engine tells them at accept and after the handshake.
//!
//! Owns: those facts and their accessors. Must not touch: what a request does with them
//! (`route.rs`, the handlers).

use std::net::IpAddr;
use std::sync::Arc;

use super::{Conn, State};
use crate::tls::TlsInfo;

impl Conn {
    /// The client's port, which the engine knows from `accept`.
    pub fn set_peer_port(&mut self, port: u16) {
        self.peer_port = port;
    }

    /// The listener that accepted the connection (its address as bound) and whether it is a
    /// TLS one; the engine says at accept.
    pub fn set_listener(&mut self, local: std::net::SocketAddr, secure: bool) {
        self.local = local;
        self.secure = secure;
    }

    /// The handshake is done: what it settled, for the log, `HTTPS`/`SSL_*` and HSTS; an
    /// agreed `h2` makes this an HTTP/2 connection.
    pub fn set_tls(&mut self, info: TlsInfo) {
        if info.alpn.as_deref() == Some(ampd_http::h2::ALPN_H2) {
            self.state = State::Http2Agreed;
        }
        self.tls = Some(Arc::new(info));
    }

    /// The listener takes HTTP/2 with prior knowledge beside HTTP/1.1 (RFC 9113 §3.3): a
    /// connection that opens with the preface speaks HTTP/2.
    pub fn accept_prior_knowledge(&mut self) {
        self.prior_knowledge = true;
    }

    /// Whether the connection speaks HTTP/2: a timeout, even an idle one, is then answered
    /// (GOAWAY, `timed_out`) before the close, where an idle HTTP/1 connection just closes.
    #[must_use]
    pub fn speaks_http2(&self) -> bool {
        matches!(self.state, State::Http2Agreed | State::Http2(_))
    }

    /// The listener's address, as bound.
    #[must_use]
    pub fn local_address(&self) -> std::net::SocketAddr {
        self.local
    }

    /// Whether the connection came in on a TLS listener.
    #[must_use]
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// What the handshake settled (`None` on a plain listener).
    #[must_use]
    pub fn tls(&self) -> Option<&TlsInfo> {
        self.tls.as_deref()
    }

    /// The client's address and port (the PROXY protocol's source, when one is used).
    #[must_use]
    pub fn peer_address(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.peer, self.peer_port)
    }

    /// The client: the connection's peer, or once a PROXY protocol header has been read, the
    /// client address it carried (what the log, access rules and rate limits use).
    #[must_use]
    pub fn peer(&self) -> IpAddr {
        self.peer
    }
}
