//! Bad input on a TLS listener, under every engine, each while another client is being served
//! (it must see nothing of it): a plain-HTTP request gets a plain-HTTP 400 (as nginx answers)
//! and a close; garbage gets a fatal TLS alert and a close; a handshake that stalls (half a
//! ClientHello, or nothing at all) is cut after `[tls] handshake_timeout`, not before; a TLS 1.2
//! renegotiation is refused; a client offering only TLS 1.0 or 1.1 is refused. The last two are
//! rustls's decisions from the configuration, the same under every engine: they run once.

use crate::support;

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::tls::{s_client, tls_addr, write_tls_config, Ca, KeyKind, PyTls};
use support::*;

/// The handshake timeout the tests configure: short, so a stall is cut quickly.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);
/// How late the cut may come (the loops' timers are coarse and the machine is shared).
const CUT_SLACK: Duration = Duration::from_secs(4);
/// TLS record content type 21 (RFC 8446 §5.1).
const ALERT: u8 = 0x15;

struct Setup {
    _root: TempRoot,
    ca: Ca,
    server: Server,
    addr: SocketAddr,
    /// A client on a kept-alive connection ("kept") opened before the fault.
    py: PyTls,
}

fn start(arch: &str) -> Setup {
    let root = TempRoot::new();
    let ca = Ca::new(&root.outside_dir().join("pki"), "ampd test CA");
    let a = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    root.file("hello.txt", "hello over tls\n");
    let body = format!(
        "[tls]\nhandshake_timeout = \"1s\"\n\n[[site]]\nserver_names = [\"a.test\"]\n\
         root = \"www\"\ncertificate = \"{}\"\ncertificate_key = \"{}\"\n",
        a.cert.display(),
        a.key.display()
    );
    let config = write_tls_config(&root, arch, "\"127.0.0.1:0 tls\"", &body);
    let server = Server::start(Options::config_file(&config));
    let addr = tls_addr(server.ready_line());
    let mut py = PyTls::start();
    py.connect_ok("kept", addr.port(), settings(&ca));
    assert_eq!(py.get("kept", "/hello.txt")["status"], 200);
    Setup {
        _root: root,
        ca,
        server,
        addr,
        py,
    }
}

fn settings(ca: &Ca) -> Value {
    json!({"server_name": "a.test", "cafile": ca.cert})
}

impl Setup {
    /// The kept-alive client and a new connection are both served.
    fn others_are_served(&mut self, why: &str) {
        let kept = self.py.get("kept", "/hello.txt");
        assert_eq!(
            kept["body"], "hello over tls\n",
            "{why}: the kept-alive client: {kept}"
        );
        let id = "fresh";
        self.py.connect_ok(id, self.addr.port(), settings(&self.ca));
        let fresh = self.py.get(id, "/hello.txt");
        assert_eq!(
            fresh["status"],
            200,
            "{why}: a new client: {fresh}\n{}",
            self.server.stderr()
        );
        self.py.close(id);
    }
}

/// What a connection saw until the server closed it: the bytes, and when the close came.
struct Closed {
    bytes: Vec<u8>,
    after: Duration,
}

/// Reads until EOF or a reset (bounded by `within`, else panics), timing from `since`.
fn read_until_closed(stream: &mut TcpStream, since: Instant, within: Duration) -> Closed {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = within.saturating_sub(since.elapsed());
        assert!(
            !left.is_zero(),
            "not closed within {within:?}; read {bytes:?}"
        );
        stream.set_read_timeout(Some(left)).unwrap();
        match support::read_some(&mut *stream, &mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => break,
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("not closed within {within:?}; read {bytes:?}")
            }
            Err(error) => panic!("read: {error}"),
        }
    }
    Closed {
        bytes,
        after: since.elapsed(),
    }
}

/// The first record of `bytes` is a fatal alert (RFC 8446 §6: level 2); its description.
fn fatal_alert(bytes: &[u8]) -> u8 {
    assert!(bytes.len() >= 7, "no alert record, only {bytes:02x?}");
    assert_eq!(bytes[0], ALERT, "not an alert record: {bytes:02x?}");
    assert_eq!(&bytes[3..5], &[0, 2], "an alert is two bytes: {bytes:02x?}");
    assert_eq!(bytes[5], 2, "not a fatal alert: {bytes:02x?}");
    bytes[6]
}

for_each_arch!(fn plain_http_on_the_tls_port_gets_a_400(arch) {
    let mut setup = start(arch);
    for request in [
        "GET /hello.txt HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "POST /form HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
    ] {
        let mut stream = TcpStream::connect(setup.addr).unwrap();
        let since = Instant::now();
        stream.write_all(request.as_bytes()).unwrap();
        let closed = read_until_closed(&mut stream, since, Duration::from_secs(10));
        let answer = String::from_utf8_lossy(&closed.bytes).into_owned();
        assert!(answer.starts_with("HTTP/1.1 400 "), "{request:?} → {answer:?}");
        let split = answer.find("\r\n\r\n").expect("a whole head") + 4;
        let head = answer[..split].to_ascii_lowercase();
        assert!(head.contains("connection: close\r\n"), "{answer}");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length: "))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no content-length: {answer}"));
        assert_eq!(answer.len() - split, length, "{answer}");
        // Says why, as nginx's "The plain HTTP request was sent to HTTPS port" does.
        assert!(answer[split..].contains("HTTPS"), "{answer}");
        setup.others_are_served("after a plain request");
    }
});

for_each_arch!(fn garbage_gets_an_alert_and_a_close(arch) {
    let mut setup = start(arch);
    let cases: [(&str, Vec<u8>); 3] = [
        // Not a TLS record type at all.
        ("binary junk", (0u8..64).map(|n| n.wrapping_mul(37) | 0x80).collect()),
        // A handshake record holding a ClientHello that is four bytes of nonsense.
        ("a malformed ClientHello", vec![
            0x16, 0x03, 0x01, 0x00, 0x08, 0x01, 0x00, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef,
        ]),
        // Application data before any handshake.
        ("data before the handshake", vec![0x17, 0x03, 0x03, 0x00, 0x05, 1, 2, 3, 4, 5]),
    ];
    for (what, bytes) in cases {
        let mut stream = TcpStream::connect(setup.addr).unwrap();
        let since = Instant::now();
        stream.write_all(&bytes).unwrap();
        let closed = read_until_closed(&mut stream, since, Duration::from_secs(10));
        let description = fatal_alert(&closed.bytes);
        assert!(
            closed.after < HANDSHAKE_TIMEOUT,
            "{what}: closed after {:?}, the handshake timeout rather than at once",
            closed.after
        );
        assert_ne!(description, 0, "{what}: close_notify is not an answer to garbage");
        setup.others_are_served(what);
    }
});

/// The first 100 bytes of a real ClientHello (TLS 1.3, from Python's ssl) whose record header
/// announces all of it: what a slowloris client sends before it stops.
fn half_a_client_hello() -> Vec<u8> {
    let script = "import ssl,sys\n\
        c=ssl.create_default_context()\n\
        i,o=ssl.MemoryBIO(),ssl.MemoryBIO()\n\
        s=c.wrap_bio(i,o,server_hostname='a.test')\n\
        try:\n s.do_handshake()\n\
        except ssl.SSLWantReadError:\n pass\n\
        sys.stdout.buffer.write(o.read())\n";
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .expect("python3");
    let hello = output.stdout;
    assert!(
        hello.len() > 200 && hello[0] == 0x16,
        "not a ClientHello: {hello:02x?}"
    );
    hello[..100].to_vec()
}

for_each_arch!(fn a_stalled_handshake_is_cut_after_the_timeout(arch) {
    let mut setup = start(arch);
    let half = half_a_client_hello();
    // Both stall at once, and others are served meanwhile.
    let mut silent = TcpStream::connect(setup.addr).unwrap();
    let silent_since = Instant::now();
    let mut partial = TcpStream::connect(setup.addr).unwrap();
    let partial_since = Instant::now();
    partial.write_all(&half).unwrap();
    setup.others_are_served("during two stalled handshakes");
    for (what, stream, since) in [
        ("nothing sent", &mut silent, silent_since),
        ("half a ClientHello", &mut partial, partial_since),
    ] {
        let closed = read_until_closed(stream, since, HANDSHAKE_TIMEOUT + CUT_SLACK);
        assert!(
            closed.after >= HANDSHAKE_TIMEOUT.mul_f32(0.9),
            "{what}: cut after {:?}, before the handshake timeout",
            closed.after
        );
        if !closed.bytes.is_empty() {
            assert_eq!(closed.bytes[0], ALERT, "{what}: {:02x?}", closed.bytes);
        }
    }
    setup.others_are_served("after the stalled handshakes");
    // A handshake that completes in time is not cut: the kept-alive connection, idle for longer
    // than the handshake timeout by now, still answers.
    assert_eq!(setup.py.get("kept", "/hello.txt")["status"], 200);
});

default_arch!(fn renegotiation_is_refused(arch) {
    let mut setup = start(arch);
    let ca = setup.ca.cert.display().to_string();
    // `R` asks s_client to renegotiate (a new ClientHello inside the TLS 1.2 session).
    let (_code, out, err) = s_client(
        setup.addr,
        &["-tls1_2", "-servername", "a.test", "-CAfile", &ca],
        b"R\n",
        Duration::from_secs(10),
    );
    let all = format!("{out}\n{err}");
    assert!(out.contains("Verify return code: 0 (ok)"), "no handshake: {all}");
    assert!(all.contains("RENEGOTIATING"), "s_client did not try: {all}");
    // RFC 5746 and rustls: the server answers no_renegotiation (OpenSSL: "no renegotiation");
    // a second full handshake would print a second certificate chain.
    assert!(all.to_ascii_lowercase().contains("no renegotiation"), "{all}");
    assert_eq!(out.matches("Certificate chain").count(), 1, "{all}");
    setup.others_are_served("after a renegotiation attempt");
});

default_arch!(fn tls_10_and_11_are_refused(arch) {
    let mut setup = start(arch);
    for version in ["1.0", "1.1"] {
        let mut old = settings(&setup.ca);
        old["min"] = json!(version);
        old["max"] = json!(version);
        let answer = setup.py.connect(&format!("old-{version}"), setup.addr.port(), old);
        assert_eq!(answer["ok"], false, "TLS {version} was accepted: {answer}");
        let error = answer["error"].as_str().unwrap().to_ascii_uppercase();
        // Refused by a fatal alert (rustls sends handshake_failure; RFC 8446 §D.2 would
        // allow protocol_version), not a timeout or a reset.
        assert!(error.contains("ALERT"), "TLS {version}: {error}");
        setup.others_are_served(&format!("after a TLS {version} hello"));
    }
    for flag in ["-tls1", "-tls1_1"] {
        let (code, out, err) = s_client(
            setup.addr,
            &[flag, "-servername", "a.test", "-cipher", "DEFAULT:@SECLEVEL=0"],
            b"",
            Duration::from_secs(10),
        );
        assert_ne!(code, Some(0), "s_client {flag} connected: {out}\n{err}");
        assert!(!out.contains("BEGIN CERTIFICATE") && !out.contains("Server certificate"),
            "{flag}: a certificate was sent: {out}");
    }
});
