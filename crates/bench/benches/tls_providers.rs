//! rustls's two crypto providers side by side, as a server uses them: TLS 1.3 handshakes in
//! memory (ECDSA P-256 and RSA 2048 certificates, full and resumed with a ticket) and bulk
//! encryption of 1 MiB responses (AES-128-GCM records), so that the choice of ampd's provider
//! (`ampd::tls::provider()`, aws-lc-rs) rests on figures.
//!
//!   cargo bench -p ampd-bench --features providers --bench tls_providers
//!
//! Only the server's side is timed (its `read_tls`, `process_new_packets`, `write_tls` and, for
//! bulk, `writer().write_all`): the client is the same provider but its time is not the
//! server's. Both providers get the same suite (TLS13_AES_128_GCM_SHA256) and key exchange
//! (X25519), so the figures differ by the providers' primitives only. Each figure is the median
//! of BATCHES batches of about BATCH_SECONDS each, the providers' batches alternating.
//! Certificates are made with the `openssl` CLI.
//!
//! It lives in ampd-bench behind the `providers` feature because enabling rustls's `ring`
//! feature anywhere in a build unifies it into every crate of that build; the server never sees it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{aws_lc_rs, ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ProducesTickets;
use rustls::{
    ClientConfig, ClientConnection, Connection, DigitallySignedStruct, HandshakeKind, ServerConfig,
    ServerConnection, SignatureScheme,
};

const BATCHES: usize = 7;
const BATCH_SECONDS: f64 = 0.4;
const BULK_BYTES: usize = 1 << 20;

/// One row's measurement: one batch with the given provider, its figure.
type Measure = Box<dyn Fn(&Provider) -> f64>;

struct Provider {
    name: &'static str,
    provider: CryptoProvider,
    ticketer: fn() -> Arc<dyn ProducesTickets>,
}

fn providers() -> Vec<Provider> {
    let aws = aws_lc_rs::default_provider();
    let ring = ring::default_provider();
    vec![
        Provider {
            name: "aws-lc-rs",
            provider: CryptoProvider {
                cipher_suites: vec![aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256],
                kx_groups: vec![aws_lc_rs::kx_group::X25519],
                ..aws
            },
            ticketer: || aws_lc_rs::Ticketer::new().expect("aws-lc-rs ticketer"),
        },
        Provider {
            name: "ring",
            provider: CryptoProvider {
                cipher_suites: vec![ring::cipher_suite::TLS13_AES_128_GCM_SHA256],
                kx_groups: vec![ring::kx_group::X25519],
                ..ring
            },
            ticketer: || ring::Ticketer::new().expect("ring ticketer"),
        },
    ]
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument picks rows by name.
    let filter: Option<String> = std::env::args()
        .skip(1)
        .find(|argument| !argument.starts_with('-'));
    let dir = std::env::temp_dir().join(format!("ampd-tls-providers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let certificates = [
        (
            "ECDSA P-256",
            make_certificate(
                &dir,
                "ecdsa",
                &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
            ),
        ),
        (
            "RSA 2048",
            make_certificate(&dir, "rsa", &["-newkey", "rsa:2048"]),
        ),
    ];
    println!("rustls 0.23 providers, server side only, medians of {BATCHES} batches");
    println!("| row | aws-lc-rs | ring | aws-lc-rs / ring |");
    println!("|---|---:|---:|---:|");
    let mut rows: Vec<(String, Measure)> = Vec::new();
    for (label, (chain, key)) in &certificates {
        for resumed in [false, true] {
            let (chain, key) = (chain.clone(), key.clone_key());
            let kind = if resumed { "resumed" } else { "full" };
            rows.push((
                format!("TLS 1.3 handshakes/s, {label}, {kind}"),
                Box::new(move |provider: &Provider| {
                    handshakes_per_second(provider, &chain, &key, resumed)
                }),
            ));
        }
    }
    let (chain, key) = (
        certificates[0].1 .0.clone(),
        certificates[0].1 .1.clone_key(),
    );
    rows.push((
        "AES-128-GCM encryption of 1 MiB responses, MB/s".to_owned(),
        Box::new(move |provider: &Provider| bulk_megabytes_per_second(provider, &chain, &key)),
    ));
    let providers = providers();
    for (name, measure) in &rows {
        if filter
            .as_ref()
            .is_some_and(|filter| !name.contains(filter.as_str()))
        {
            continue;
        }
        // Batches alternate between the providers (A B A B ...), so that a change in the
        // machine's load falls on both alike.
        let mut batches = vec![Vec::new(); providers.len()];
        for _ in 0..BATCHES {
            for (figures, provider) in batches.iter_mut().zip(&providers) {
                figures.push(measure(provider));
            }
        }
        let figures: Vec<f64> = batches.into_iter().map(median).collect();
        println!(
            "| {name} | {:.0} | {:.0} | {:.2} |",
            figures[0],
            figures[1],
            figures[0] / figures[1]
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn make_certificate(
    dir: &Path,
    name: &str,
    key_options: &[&str],
) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let (cert, key): (PathBuf, PathBuf) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let status = Command::new("openssl")
        .args(["req", "-x509"])
        .args(key_options)
        .args([
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the openssl CLI is installed");
    assert!(status.success(), "openssl req {name} failed");
    let chain = CertificateDer::pem_file_iter(&cert)
        .expect("certificate file")
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate PEM");
    (chain, PrivateKeyDer::from_pem_file(&key).expect("key PEM"))
}

fn configs(
    provider: &Provider,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let crypto = Arc::new(provider.provider.clone());
    let mut server = ServerConfig::builder_with_provider(Arc::clone(&crypto))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(chain.to_vec(), key.clone_key())
        .expect("certificate and key");
    server.ticketer = (provider.ticketer)();
    let client = ClientConfig::builder_with_provider(crypto)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyServer))
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// Moves everything `from` has to send into `to`; returns the time spent in the server's calls.
fn transfer(from: &mut Connection, to: &mut Connection, buffer: &mut Vec<u8>) -> Duration {
    let mut server_time = Duration::ZERO;
    buffer.clear();
    let started = Instant::now();
    while from.wants_write() {
        from.write_tls(buffer).expect("write_tls to memory");
    }
    if matches!(from, Connection::Server(_)) {
        server_time += started.elapsed();
    }
    if buffer.is_empty() {
        return server_time;
    }
    let started = Instant::now();
    let mut input = &buffer[..];
    while !input.is_empty() {
        to.read_tls(&mut input).expect("read_tls from memory");
        to.process_new_packets().expect("a good TLS peer");
    }
    if matches!(to, Connection::Server(_)) {
        server_time += started.elapsed();
    }
    server_time
}

/// One handshake (and the tickets after it); returns the server's time in it.
fn handshake(
    server_config: &Arc<ServerConfig>,
    client_config: &Arc<ClientConfig>,
    buffer: &mut Vec<u8>,
) -> (Duration, Connection, Connection) {
    let name = ServerName::try_from("localhost").expect("a DNS name");
    let mut client =
        Connection::Client(ClientConnection::new(Arc::clone(client_config), name).expect("client"));
    let started = Instant::now();
    let mut server =
        Connection::Server(ServerConnection::new(Arc::clone(server_config)).expect("server"));
    let mut server_time = started.elapsed();
    loop {
        server_time += transfer(&mut client, &mut server, buffer);
        server_time += transfer(&mut server, &mut client, buffer);
        if !client.is_handshaking()
            && !server.is_handshaking()
            && !client.wants_write()
            && !server.wants_write()
        {
            break;
        }
    }
    (server_time, server, client)
}

fn median(mut figures: Vec<f64>) -> f64 {
    figures.sort_by(f64::total_cmp);
    figures[figures.len() / 2]
}

fn handshakes_per_second(
    provider: &Provider,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    resumed: bool,
) -> f64 {
    let (server_config, mut client_config) = configs(provider, chain, key);
    if !resumed {
        let mut config = (*client_config).clone();
        config.resumption = rustls::client::Resumption::disabled();
        client_config = Arc::new(config);
    }
    let mut buffer = Vec::with_capacity(1 << 16);
    // The first handshake gives the client its tickets.
    handshake(&server_config, &client_config, &mut buffer);
    let (mut count, mut server_time) = (0u32, Duration::ZERO);
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < BATCH_SECONDS {
        let (time, server, _) = handshake(&server_config, &client_config, &mut buffer);
        let kind = match server {
            Connection::Server(server) => server.handshake_kind(),
            Connection::Client(_) => None,
        };
        assert_eq!(
            kind == Some(HandshakeKind::Resumed),
            resumed,
            "{}: handshake kind {kind:?}",
            provider.name
        );
        server_time += time;
        count += 1;
    }
    f64::from(count) / server_time.as_secs_f64()
}

fn bulk_megabytes_per_second(
    provider: &Provider,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> f64 {
    let (server_config, client_config) = configs(provider, chain, key);
    let mut buffer = Vec::with_capacity(BULK_BYTES + (1 << 16));
    let (_, mut server, mut client) = handshake(&server_config, &client_config, &mut buffer);
    server.set_buffer_limit(None);
    client.set_buffer_limit(None);
    let payload = vec![0x5a_u8; BULK_BYTES];
    let mut received = vec![0u8; BULK_BYTES];
    let (mut bytes, mut server_time) = (0usize, Duration::ZERO);
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < BATCH_SECONDS {
        let sealing = Instant::now();
        server.writer().write_all(&payload).expect("plaintext in");
        buffer.clear();
        while server.wants_write() {
            server.write_tls(&mut buffer).expect("write_tls to memory");
        }
        server_time += sealing.elapsed();
        // The client takes the records a read_tls at a time (its plaintext buffer is
        // bounded), checking every byte.
        let (mut input, mut filled) = (&buffer[..], 0);
        while !input.is_empty() {
            client.read_tls(&mut input).expect("read_tls from memory");
            client.process_new_packets().expect("a good TLS peer");
            while let Ok(count) = client.reader().read(&mut received[filled..]) {
                if count == 0 {
                    break;
                }
                filled += count;
            }
        }
        assert_eq!(filled, BULK_BYTES);
        assert_eq!(received, payload);
        bytes += BULK_BYTES;
    }
    bytes as f64 / server_time.as_secs_f64() / 1e6
}

/// Accepts any certificate and signature: the client's side is not what is measured.
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
