//! `ampd-bench handshakes` end to end against a small rustls server on 127.0.0.1 (port 0, a
//! certificate made with the `openssl` CLI): every request is a new TLS connection, full
//! handshakes unless `--resume`, and the server's own count of resumed handshakes agrees with the
//! client's RESULT line; bad input is one line and a non-zero exit.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, ServerConnection};
use rustls::HandshakeKind;

use support::{ampd_bench, temp_dir};

/// A TLS server answering every request with `hello` and closing (close_notify, then FIN).
struct TlsServer {
    port: u16,
    full: Arc<AtomicU64>,
    resumed: Arc<AtomicU64>,
}

impl TlsServer {
    fn start(name: &str) -> TlsServer {
        let dir = temp_dir(name);
        let status = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
            .arg(dir.join("key.pem"))
            .arg("-out")
            .arg(dir.join("cert.pem"))
            .stderr(std::process::Stdio::null())
            .status()
            .expect("the openssl CLI is installed");
        assert!(status.success(), "openssl req failed");
        let chain = CertificateDer::pem_file_iter(dir.join("cert.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new().unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let full = Arc::new(AtomicU64::new(0));
        let resumed = Arc::new(AtomicU64::new(0));
        let (full_count, resumed_count) = (Arc::clone(&full), Arc::clone(&resumed));
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let config = Arc::clone(&config);
                let (full, resumed) = (Arc::clone(&full_count), Arc::clone(&resumed_count));
                thread::spawn(move || {
                    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
                    let mut connection = ServerConnection::new(config).unwrap();
                    let mut tls = rustls::Stream::new(&mut connection, &mut stream);
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match tls.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let answer =
                        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
                    if tls.write_all(answer).is_err() {
                        return;
                    }
                    match tls.conn.handshake_kind() {
                        Some(HandshakeKind::Resumed) => resumed.fetch_add(1, Ordering::SeqCst),
                        _ => full.fetch_add(1, Ordering::SeqCst),
                    };
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        TlsServer {
            port,
            full,
            resumed,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

/// The `RESULT key=value ...` line's value for `key`.
fn result(stdout: &str, key: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|line| line.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line in {stdout}"));
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap()
}

fn run(arguments: &[&str]) -> String {
    let output = ampd_bench(arguments);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{arguments:?}: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn every_request_is_a_full_handshake_unless_resume_is_asked() {
    let server = TlsServer::start("handshakes-full");
    let url = server.url("/");
    let stdout = run(&[
        "handshakes",
        "--url",
        &url,
        "--connections",
        "2",
        "--duration",
        "500ms",
    ]);
    let requests = result(&stdout, "requests");
    assert!(requests > 10, "{stdout}");
    assert_eq!(result(&stdout, "errors"), 0, "{stdout}");
    assert_eq!(result(&stdout, "resumed"), 0, "{stdout}");
    assert_eq!(result(&stdout, "bytes") % requests, 0, "{stdout}");
    assert_eq!(server.resumed.load(Ordering::SeqCst), 0);
    // The warm-up's and the preflight's connections are handshakes too, not counted as requests.
    assert!(server.full.load(Ordering::SeqCst) >= requests);
}

#[test]
fn resume_resumes_every_handshake_after_the_first_ones() {
    let server = TlsServer::start("handshakes-resumed");
    let url = server.url("/");
    for version in ["1.3", "1.2"] {
        let before = server.resumed.load(Ordering::SeqCst);
        let stdout = run(&[
            "handshakes",
            "--url",
            &url,
            "--connections",
            "2",
            "--duration",
            "500ms",
            "--resume",
            "--tls",
            version,
        ]);
        let requests = result(&stdout, "requests");
        let resumed = result(&stdout, "resumed");
        assert!(requests > 10, "TLS {version}: {stdout}");
        assert_eq!(result(&stdout, "errors"), 0, "TLS {version}: {stdout}");
        // Measured after a warm-up: every counted connection finds a session to resume.
        assert_eq!(resumed, requests, "TLS {version}: {stdout}");
        assert!(
            server.resumed.load(Ordering::SeqCst) - before >= resumed,
            "TLS {version}"
        );
    }
}

/// A failure (a plain URL, nobody listening) is one line and exit status 1; a usage mistake is
/// clap's message and exit status 2.
#[test]
fn bad_input_is_one_line_and_a_non_zero_exit() {
    let closed_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("https://127.0.0.1:{closed_port}/");
    let cases: [(&[&str], &str, i32); 4] = [
        (
            &["handshakes", "--url", "http://127.0.0.1:1/"],
            "https://",
            1,
        ),
        (&["handshakes", "--url", &unreachable], "127.0.0.1:", 1),
        (
            &[
                "handshakes",
                "--url",
                "https://127.0.0.1:1/",
                "--tls",
                "1.1",
            ],
            "invalid value '1.1' for '--tls <VERSION>'",
            2,
        ),
        (&["handshakes"], "--url <URL>", 2),
    ];
    for (arguments, needle, code) in cases {
        let output = ampd_bench(arguments);
        assert_eq!(output.status.code(), Some(code), "{arguments:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if code == 1 {
            assert_eq!(stderr.lines().count(), 1, "{arguments:?}: {stderr}");
            assert!(stderr.starts_with("ampd-bench: "), "{stderr}");
        } else {
            assert!(stderr.starts_with("error: "), "{stderr}");
        }
        assert!(
            stderr.contains(needle),
            "{arguments:?}: {stderr} lacks {needle}"
        );
    }
}
