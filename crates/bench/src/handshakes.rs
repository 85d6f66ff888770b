//! `ampd-bench handshakes`: a new TLS connection per request, to measure how many TLS handshakes
//! a server completes per second, full or resumed.
//!
//! Why a client of its own: wrk resumes the session of each of its connections (so it cannot
//! measure full handshakes), `openssl s_time` runs one connection at a time (it measures latency,
//! not what a server can do), and both spend more CPU per handshake with OpenSSL 3 than the
//! servers measured do, so on one client core they, not the server, set the rate.
//!
//! Each of `--connections` threads repeats: connect, handshake, `GET PATH` with `Connection:
//! close`, read the response to its end (status 200, body as long as `Content-Length` says),
//! close. Full handshakes unless `--resume`: then the client keeps the sessions (TLS 1.3 tickets,
//! TLS 1.2 tickets or session ids) the server gives, and offers one on every connection.
//!
//! So that the server, not this client, is measured: the client neither verifies the server's
//! certificate nor the handshake's signature (as `wrk` and `curl -k` do not check the
//! certificate), sends an X25519 key share only (no post-quantum hybrid share, which an OpenSSL
//! 3.0 server would not pick anyway) and offers AES-128-GCM suites only.
//!
//! Owns: its threads and rustls client. Must not touch: `client/` (the plain-HTTP event loop).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{aws_lc_rs, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind, SignatureScheme,
};

use crate::response::ResponseParser;

/// TLS versions `--tls` may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// Whatever both ends prefer (TLS 1.3 with every server measured here).
    Any,
    V12,
    V13,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HandshakeOptions {
    pub url: String,
    pub connections: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub timeout: Duration,
    pub resume: bool,
    pub version: TlsVersion,
}

/// What one run measured; printed as one human line and one `RESULT` line (the shape of
/// bench/wrk/result.lua's, so bench/tls.sh reads both alike).
#[derive(Debug)]
pub struct Outcome {
    pub requests: u64,
    pub resumed: u64,
    pub bytes: u64,
    pub errors: u64,
    pub elapsed: Duration,
    pub latency: Histogram<u64>,
    /// The first error's text, to say why errors happened.
    pub first_error: Option<String>,
}

impl Outcome {
    #[must_use]
    pub fn report(&self) -> String {
        let seconds = self.elapsed.as_secs_f64().max(1e-9);
        let quantile = |q: f64| {
            if self.latency.is_empty() {
                0
            } else {
                self.latency.value_at_quantile(q)
            }
        };
        let mut text = format!(
            "{:.0} connections/s ({} requests, {} resumed, {} errors in {:.2} s), latency p50 {:.2} ms p99 {:.2} ms\n",
            self.requests as f64 / seconds,
            self.requests,
            self.resumed,
            self.errors,
            seconds,
            quantile(0.5) as f64 / 1000.0,
            quantile(0.99) as f64 / 1000.0,
        );
        if let Some(error) = &self.first_error {
            text.push_str(&format!("first error: {error}\n"));
        }
        text.push_str(&format!(
            "RESULT requests={} duration_us={} bytes={} errors={} p50_us={} p99_us={} resumed={}\n",
            self.requests,
            self.elapsed.as_micros(),
            self.bytes,
            self.errors,
            quantile(0.5),
            quantile(0.99),
            self.resumed,
        ));
        text
    }
}

/// Where to connect and what to send, from `--url`.
struct Target {
    address: SocketAddr,
    server_name: ServerName<'static>,
    request: Vec<u8>,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("handshakes needs an https:// URL, not '{url}'"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let address = authority
            .to_socket_addrs()
            .map_err(|error| format!("--url {url}: {error}"))?
            .next()
            .ok_or_else(|| format!("--url {url}: no address"))?;
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|_| format!("--url {url}: '{host}' is not a host name"))?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nUser-Agent: ampd-bench\r\n\r\n"
        )
        .into_bytes();
        Ok(Target {
            address,
            server_name,
            request,
        })
    }
}

/// Runs the measurement: a preflight connection that must succeed, the warm-up, the measured
/// duration.
///
/// # Errors
/// A bad URL, or a preflight that fails (the server is not there, or does not answer 200).
pub fn run(options: &HandshakeOptions) -> Result<Outcome, String> {
    let target = Arc::new(Target::parse(&options.url)?);
    let config = Arc::new(client_config(options)?);
    one_request(&target, &config, options.timeout)
        .map_err(|error| format!("{} ({}): {error}", options.url, target.address))?;
    let stop = Arc::new(AtomicBool::new(false));
    let measure_from = Instant::now() + options.warmup;
    let workers: Vec<_> = (0..options.connections.max(1))
        .map(|_| {
            let (target, config, stop) =
                (Arc::clone(&target), Arc::clone(&config), Arc::clone(&stop));
            let timeout = options.timeout;
            thread::spawn(move || worker(&target, &config, &stop, measure_from, timeout))
        })
        .collect();
    thread::sleep(options.warmup + options.duration);
    stop.store(true, Ordering::SeqCst);
    let elapsed = measure_from.elapsed();
    let mut outcome = Outcome {
        requests: 0,
        resumed: 0,
        bytes: 0,
        errors: 0,
        elapsed,
        latency: histogram(),
        first_error: None,
    };
    for worker in workers {
        let tally = worker
            .join()
            .map_err(|_| "a client thread panicked".to_owned())?;
        outcome.requests += tally.requests;
        outcome.resumed += tally.resumed;
        outcome.bytes += tally.bytes;
        outcome.errors += tally.errors;
        outcome.latency.add(&tally.latency).ok();
        if outcome.first_error.is_none() {
            outcome.first_error = tally.first_error;
        }
    }
    Ok(outcome)
}

struct Tally {
    requests: u64,
    resumed: u64,
    bytes: u64,
    errors: u64,
    latency: Histogram<u64>,
    first_error: Option<String>,
}

fn worker(
    target: &Target,
    config: &Arc<ClientConfig>,
    stop: &AtomicBool,
    measure_from: Instant,
    timeout: Duration,
) -> Tally {
    let mut tally = Tally {
        requests: 0,
        resumed: 0,
        bytes: 0,
        errors: 0,
        latency: histogram(),
        first_error: None,
    };
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let result = one_request(target, config, timeout);
        // Only connections started and finished inside the measured window count.
        if started < measure_from || stop.load(Ordering::Relaxed) {
            continue;
        }
        match result {
            Ok(done) => {
                tally.requests += 1;
                tally.bytes += done.bytes;
                tally.resumed += u64::from(done.resumed);
                let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tally.latency.saturating_record(micros.max(1));
            }
            Err(error) => {
                tally.errors += 1;
                tally.first_error.get_or_insert(error);
            }
        }
    }
    tally
}

struct Done {
    bytes: u64,
    resumed: bool,
}

/// One connection: connect, handshake, request, the whole response, close.
fn one_request(
    target: &Target,
    config: &Arc<ClientConfig>,
    timeout: Duration,
) -> Result<Done, String> {
    let mut socket = TcpStream::connect_timeout(&target.address, timeout)
        .map_err(|error| format!("connect: {error}"))?;
    socket.set_nodelay(true).ok();
    socket.set_read_timeout(Some(timeout)).ok();
    socket.set_write_timeout(Some(timeout)).ok();
    let mut connection = ClientConnection::new(Arc::clone(config), target.server_name.clone())
        .map_err(|error| format!("TLS: {error}"))?;
    let mut tls = rustls::Stream::new(&mut connection, &mut socket);
    tls.write_all(&target.request)
        .map_err(|error| format!("handshake or request: {error}"))?;
    let mut response = Vec::with_capacity(2048);
    let mut chunk = [0u8; 16384];
    loop {
        match tls.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => response.extend_from_slice(&chunk[..count]),
            // A server that closes without close_notify: the response's framing says whether
            // it was all there.
            Err(error) if error.kind() == ErrorKind::UnexpectedEof => break,
            Err(error) => return Err(format!("reading the response: {error}")),
        }
        if complete(&response)? {
            break;
        }
    }
    if !complete(&response)? {
        return Err(format!("response cut short after {} bytes", response.len()));
    }
    let resumed = tls.conn.handshake_kind() == Some(HandshakeKind::Resumed);
    Ok(Done {
        bytes: response.len() as u64,
        resumed,
    })
}

/// Whether `response` holds a whole 200 response (head and `Content-Length` bytes of body),
/// read by the same strict reader as every other response the bench takes.
fn complete(response: &[u8]) -> Result<bool, String> {
    let mut parser = ResponseParser::new();
    let (used, done) = parser.feed(response).map_err(|error| error.to_string())?;
    let Some(done) = done else {
        return if parser.reads_until_close() {
            Err("no Content-Length in the response".to_owned())
        } else {
            Ok(false)
        };
    };
    if done.status != 200 {
        return Err(format!("status {} (want 200)", done.status));
    }
    if used < response.len() {
        let body = response.len() - used + usize::try_from(done.body_len).unwrap_or(0);
        return Err(format!(
            "{body} bytes of body for Content-Length {}",
            done.body_len
        ));
    }
    Ok(true)
}

fn client_config(options: &HandshakeOptions) -> Result<ClientConfig, String> {
    let base = aws_lc_rs::default_provider();
    let provider = CryptoProvider {
        cipher_suites: base
            .cipher_suites
            .iter()
            .copied()
            .filter(|suite| {
                matches!(
                    suite.suite(),
                    rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                        | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                        | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
                )
            })
            .collect(),
        // A key share for X25519 only; P-256 is listed too because a TLS 1.2 server may only
        // use an ECDSA P-256 certificate with a client that names P-256 (RFC 8422 §5.1; OpenSSL
        // refuses the handshake otherwise).
        kx_groups: vec![aws_lc_rs::kx_group::X25519, aws_lc_rs::kx_group::SECP256R1],
        ..base
    };
    let versions: &[&rustls::SupportedProtocolVersion] = match options.version {
        TlsVersion::Any => rustls::DEFAULT_VERSIONS,
        TlsVersion::V12 => &[&rustls::version::TLS12],
        TlsVersion::V13 => &[&rustls::version::TLS13],
    };
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .map_err(|error| format!("TLS configuration: {error}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyServer))
        .with_no_client_auth();
    config.resumption = if options.resume {
        Resumption::in_memory_sessions(1024)
    } else {
        Resumption::disabled()
    };
    Ok(config)
}

fn histogram() -> Histogram<u64> {
    // Constant, valid bounds (1 µs to one hour, 3 significant figures): cannot fail.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

/// Accepts any certificate and signature: the load generator measures the server, it does not
/// authenticate it (see the module comment).
#[derive(Debug)]
struct AcceptAnyServer;

impl ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![
            SignatureScheme::ECDSA_NISTP256_SHA256,
            SignatureScheme::RSA_PSS_SHA256,
            SignatureScheme::RSA_PKCS1_SHA256,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_complete_when_its_body_is() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(complete(&head[..10]), Ok(false));
        assert_eq!(complete(&[&head[..], b"hel"].concat()), Ok(false));
        assert_eq!(complete(&[&head[..], b"hello"].concat()), Ok(true));
        assert!(complete(&[&head[..], b"hello!"].concat()).is_err());
        assert!(complete(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n").is_err());
        assert!(complete(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }

    #[test]
    fn the_url_gives_address_name_and_request() {
        let target = Target::parse("https://127.0.0.1:8443/f1k.bin").unwrap();
        assert_eq!(target.address, "127.0.0.1:8443".parse().unwrap());
        assert!(String::from_utf8(target.request)
            .unwrap()
            .starts_with("GET /f1k.bin HTTP/1.1\r\nHost: 127.0.0.1:8443\r\nConnection: close\r\n"));
        assert!(Target::parse("http://127.0.0.1:8443/").is_err());
    }
}
