//! TLS settings as loaded: the addresses the server listens on (plain and TLS side by side),
//! the server-wide `[tls]` table, and each site's certificate, client-certificate policy, HSTS
//! and HTTP→HTTPS redirect.
//!
//! Owns: the typed settings. Must not touch: reading certificates or building rustls's
//! configuration (that is `tls::context`'s, at generation build time).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// One listening socket: `"127.0.0.1:8443 tls"` is a TLS listener; `":8080"` is two of them
/// (`ListenAddress::Every`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Listen {
    pub address: SocketAddr,
    pub tls: bool,
    /// `"ADDR h2c"`: a cleartext listener that also takes HTTP/2 with prior knowledge (RFC
    /// 9113 §3.3), told from HTTP/1 by the client preface.
    pub h2c: bool,
    /// The `[::]` half of a `:PORT` entry, right after its `0.0.0.0` half: it binds the port
    /// that half got (the same port for port 0), and is left out, with a warning, on a machine
    /// without IPv6.
    pub ipv6_half: bool,
}

impl Listen {
    #[must_use]
    pub fn plain(address: SocketAddr) -> Listen {
        Listen {
            address,
            tls: false,
            h2c: false,
            ipv6_half: false,
        }
    }
}

/// What one address in `listen` (or `--listen`) names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenAddress {
    /// One socket address: `127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:8080` (IPv4 only).
    One(SocketAddr),
    /// `:PORT` or `*:PORT`: every address, IPv4 and IPv6, on one port (as Caddy and Go read
    /// `:8080`): a `0.0.0.0` socket and an IPv6-only `[::]` one. Two sockets rather than one
    /// dual-stack `[::]`: an IPv4 client then keeps its IPv4 address everywhere (logs,
    /// `allow`/`deny`, `X-Forwarded-For`) instead of arriving as `::ffff:a.b.c.d`.
    Every(u16),
}

impl ListenAddress {
    /// The sockets it stands for, each speaking as `tls` and `h2c` say.
    #[must_use]
    pub fn listeners(self, tls: bool, h2c: bool) -> Vec<Listen> {
        let listen = |address, ipv6_half| Listen {
            address,
            tls,
            h2c,
            ipv6_half,
        };
        match self {
            ListenAddress::One(address) => vec![listen(address, false)],
            ListenAddress::Every(port) => vec![
                listen(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)), false),
                listen(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)), true),
            ],
        }
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tls {
            write!(formatter, "{} tls", self.address)
        } else {
            write!(formatter, "{}", self.address)
        }
    }
}

/// The lowest TLS version offered (`[tls] min_version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

/// The server-wide `[tls]` table.
#[derive(Clone, Debug)]
pub struct TlsServer {
    pub min_version: MinVersion,
    /// Cipher suites by IANA name, in preference order; empty: the provider's defaults.
    pub ciphers: Vec<String>,
    /// Stateless resumption tickets (RFC 8446 §4.6.1, RFC 5077), their keys shared by every
    /// loop and `mp` worker and rotated every `ticket_rotation`.
    pub session_tickets: bool,
    pub ticket_rotation: Duration,
    /// Sessions kept per process for resumption by id (TLS 1.2) and by TLS 1.3 PSK when tickets
    /// are off; `0` turns the cache off.
    pub session_cache: usize,
    /// How long a handshake may take from the connection's accept.
    pub handshake_timeout: Duration,
    /// The certificate for names no site's certificate covers (and clients that send no SNI),
    /// when the default site has none.
    pub certificate: Option<CertificateFiles>,
    pub acme: AcmeSettings,
}

impl Default for TlsServer {
    fn default() -> TlsServer {
        TlsServer {
            min_version: MinVersion::Tls12,
            ciphers: Vec::new(),
            session_tickets: true,
            ticket_rotation: Duration::from_secs(12 * 3600),
            session_cache: 20_000,
            handshake_timeout: Duration::from_secs(10),
            certificate: None,
            acme: AcmeSettings::default(),
        }
    }
}

/// A certificate chain and its key, from PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateFiles {
    /// The leaf first, then intermediates.
    pub certificate: PathBuf,
    pub key: PathBuf,
    /// A DER OCSP response to staple (re-read on reload).
    pub ocsp_response: Option<PathBuf>,
}

/// Where a site's certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertificateSource {
    Files(CertificateFiles),
    /// Obtained from `[tls.acme]`'s directory for the site's `server_names`, kept in its state
    /// directory and renewed before expiry.
    Acme,
}

/// Whether a site asks for client certificates (mTLS), verified against `ca` (PEM).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ClientCertificates {
    #[default]
    Off,
    /// Asked for; a client without one is let in (`SSL_CLIENT_VERIFY=NONE`).
    Optional { ca: PathBuf },
    /// A client without a valid certificate fails the handshake.
    Required { ca: PathBuf },
}

/// `Strict-Transport-Security` (RFC 6797) on the site's responses over TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hsts {
    pub max_age: Duration,
    pub include_subdomains: bool,
    pub preload: bool,
}

/// A site's TLS settings (keys of `[[site]]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteTls {
    pub certificate: Option<CertificateSource>,
    pub client_certificates: ClientCertificates,
    pub hsts: Option<Hsts>,
    /// Requests over a plain listener get `301` to the same URL over `https` (the first TLS
    /// listener's port); ACME's HTTP-01 challenges are still answered.
    pub redirect_https: bool,
}

/// Which ACME challenge a site's certificate is validated with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AcmeChallenge {
    /// RFC 8555 §8.3: a token under `/.well-known/acme-challenge/` on port 80.
    #[default]
    Http01,
    /// RFC 8737: a self-signed certificate offered to the `acme-tls/1` ALPN on port 443.
    TlsAlpn01,
}

/// `[tls.acme]`: the ACME account every `certificate = "acme"` site uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcmeSettings {
    /// The directory URL.
    pub directory: String,
    /// PEM roots to trust for the directory's HTTPS, besides the system's (a test CA such as
    /// pebble's).
    pub ca_root: Option<PathBuf>,
    pub email: Option<String>,
    pub challenge: AcmeChallenge,
    /// Where the account key, certificates and keys (0600) are kept.
    pub state_dir: PathBuf,
    /// Renew when less than this is left of a certificate's validity.
    pub renew_before: Duration,
}

impl Default for AcmeSettings {
    fn default() -> AcmeSettings {
        AcmeSettings {
            directory: "https://acme-v02.api.letsencrypt.org/directory".to_owned(),
            ca_root: None,
            email: None,
            challenge: AcmeChallenge::Http01,
            state_dir: PathBuf::from("/var/lib/ampd"),
            renew_before: Duration::from_secs(30 * 86_400),
        }
    }
}
