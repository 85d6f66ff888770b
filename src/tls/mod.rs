//! TLS: rustls as a sans-I/O layer between an engine's socket I/O and `Conn`.
//!
//! * `session`: one connection's TLS state machine (ClientHello → handshake → records), fed
//!   the ciphertext the engine read and handing `Conn` the plaintext; it seals `Conn`'s output
//!   (memory as is, file ranges read once into the loop's buffer) into records the engine
//!   writes. Every engine drives it the same way.
//! * `context`: per configuration generation, the rustls configurations a ClientHello chooses
//!   between (certificate by SNI, client-certificate policy per site, ALPN), built from
//!   `config::SiteTls`, rebuilt on reload.
//! * `tickets`: resumption ticket keys, shared by every loop and `mp` worker, rotated on a
//!   schedule; the process's session cache.
//! * `acme`: certificates obtained and renewed from an ACME directory (RFC 8555).
//! * `validity`: warnings for certificates read from files outside their dates.
//!
//! Must not touch: sockets (the engine reads and writes them), HTTP (that is `conn`'s).

pub mod acme;
pub mod client_certificate;
pub mod context;
mod pem_errors;
pub mod session;
pub mod tickets;
pub mod validity;

pub use context::{TlsContext, TlsError};
pub use session::TlsSession;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The ALPN protocol ids offered, in preference order (RFC 7301), after `h2`
/// (`ampd_http::h2::ALPN_H2`) when `[http2]` is enabled. `acme-tls/1` (RFC 8737) is answered
/// only with a challenge certificate, and the connection then closes.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";
pub const ALPN_ACME: &[u8] = b"acme-tls/1";

/// The cryptography under rustls: aws-lc-rs (see docs/architecture.md, "TLS").
#[must_use]
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// What the handshake settled, for `Conn`: the log, `HTTPS`/`SSL_*` meta-variables, HSTS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsInfo {
    /// `TLSv1.3`, `TLSv1.2`.
    pub protocol: &'static str,
    /// The IANA name: `TLS13_AES_128_GCM_SHA256`.
    pub cipher: &'static str,
    /// The name the client asked for (SNI), lower case.
    pub server_name: Option<Box<str>>,
    /// The ALPN protocol agreed on.
    pub alpn: Option<Box<[u8]>>,
    /// The session was resumed (ticket or cache) rather than fully negotiated.
    pub resumed: bool,
    /// The client's certificate, when the site asked for one and the client sent it (verified:
    /// rustls refuses the handshake otherwise).
    pub client: Option<Box<ClientCertificate>>,
}

/// A verified client certificate, as mod_ssl names its parts (`SSL_CLIENT_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientCertificate {
    /// RFC 2253 distinguished names: `CN=alice,O=Example`.
    pub subject: String,
    pub issuer: String,
    /// Upper-case hex.
    pub serial: String,
    /// `Nov 25 12:00:00 2026 GMT`, as OpenSSL prints them.
    pub not_before: String,
    pub not_after: String,
    /// The certificate, PEM (`SSL_CLIENT_CERT`).
    pub pem: String,
}

/// The client's certificate as `Conn` shows it.
fn client_certificate_of(der: &rustls::pki_types::CertificateDer<'_>) -> Option<ClientCertificate> {
    client_certificate::describe(der)
}
