//! Automatic certificates (ACME, RFC 8555) against Debian's pebble, which validates every
//! challenge for real over loopback (its DNS answers 127.0.0.1 for every name).
//!
//! `client_*`: the `ampd::tls::acme` API on its own, answering pebble's challenges from small
//! servers here that ask `http_challenge` / `challenge_certificate`, as ampd's request and
//! handshake paths do.

use crate::support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ampd::config::{AcmeChallenge, AcmeSettings, CertificateSource, HostName, Site, SiteTls};
use ampd::tls::acme;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use support::pebble::{self, Pebble};
use support::TempRoot;

fn settings(pebble: &Pebble, state: &Path, challenge: AcmeChallenge) -> AcmeSettings {
    AcmeSettings {
        directory: pebble.directory.clone(),
        ca_root: Some(pebble.ca_root.clone()),
        email: Some("admin@example.test".to_owned()),
        challenge,
        state_dir: state.to_path_buf(),
        renew_before: Duration::from_secs(30 * 86_400),
    }
}

fn acme_site(names: &[&str]) -> Site {
    Site {
        names: names
            .iter()
            .map(|name| HostName::Exact((*name).to_owned()))
            .collect(),
        default: false,
        locations: Vec::new(),
        tls: SiteTls {
            certificate: Some(CertificateSource::Acme),
            ..SiteTls::default()
        },
    }
}

/// A background server answering until dropped.
struct Answering {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Answering {
    fn start(answer: impl Fn(TcpStream) + Send + 'static) -> Answering {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        stream
                            .set_read_timeout(Some(Duration::from_secs(5)))
                            .unwrap();
                        answer(stream);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Answering {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// HTTP-01 at `/.well-known/acme-challenge/TOKEN`, from `acme::http_challenge`.
fn http01_server(settings: AcmeSettings) -> Answering {
    Answering::start(move |mut stream| {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n")
            && support::read_some(&mut stream, &mut byte).unwrap_or(0) == 1
        {
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        let target = head.split(' ').nth(1).unwrap_or("");
        let answer = target
            .strip_prefix(acme::HTTP_CHALLENGE_PREFIX)
            .and_then(|token| acme::http_challenge(token, &settings));
        let response = match answer {
            Some(body) => format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
            None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
        };
        let _ = stream.write_all(response.as_bytes());
    })
}

/// TLS-ALPN-01: a handshake answered with `acme::challenge_certificate` for `acme-tls/1`.
fn alpn_server(settings: AcmeSettings) -> Answering {
    #[derive(Debug)]
    struct Challenges(AcmeSettings);
    impl rustls::server::ResolvesServerCert for Challenges {
        fn resolve(
            &self,
            hello: rustls::server::ClientHello<'_>,
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            let asks_acme = hello
                .alpn()
                .is_some_and(|mut offered| offered.any(|id| id == ampd::tls::ALPN_ACME));
            if !asks_acme {
                return None;
            }
            acme::challenge_certificate(hello.server_name()?, &self.0)
        }
    }
    let mut config = rustls::ServerConfig::builder_with_provider(ampd::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Challenges(settings)));
    config.alpn_protocols = vec![ampd::tls::ALPN_ACME.to_vec()];
    let config = Arc::new(config);
    Answering::start(move |mut stream| {
        let mut connection = rustls::ServerConnection::new(config.clone()).unwrap();
        while connection.is_handshaking() {
            if connection.complete_io(&mut stream).is_err() {
                return;
            }
        }
        connection.send_close_notify();
        let _ = connection.complete_io(&mut stream);
    })
}

fn leaf_of(certified: &rustls::sign::CertifiedKey) -> &[u8] {
    certified.cert[0].as_ref()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn client_obtains_with_http01() {
    if !pebble::installed() {
        panic!("pebble is not installed (apt-get install pebble; scripts/test.sh does)");
    }
    let work = TempRoot::new();
    // Pebble needs the challenge port before it starts: bind the server first.
    let state = work.outside_dir().join("state");
    let placeholder = AcmeSettings {
        state_dir: state.clone(),
        ..AcmeSettings::default()
    };
    let http = http01_server(placeholder);
    let pebble = Pebble::start(&work.outside_dir().join("pebble"), http.port, 1);
    let settings = settings(&pebble, &state, AcmeChallenge::Http01);
    let site = acme_site(&["a.test", "www.a.test"]);
    assert!(
        acme::certificate(&site, &settings).is_none(),
        "nothing stored yet"
    );

    let names = vec!["a.test".to_owned(), "www.a.test".to_owned()];
    let not_after = acme::obtain(&settings, &names)
        .unwrap_or_else(|error| panic!("{error}\npebble: {}", pebble.log_text()));
    assert!(not_after > std::time::SystemTime::now() + Duration::from_secs(86_400));

    let certified = acme::certificate(&site, &settings).expect("a certificate is served");
    assert!(contains(leaf_of(&certified), b"a.test"));
    assert!(contains(leaf_of(&certified), b"www.a.test"));
    assert!(certified.cert.len() >= 2, "the chain has the intermediate");
    // Issued by pebble's CA.
    let root = pebble.issuing_root();
    let root = CertificateDer::from_pem_slice(root.as_bytes()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        ampd::tls::provider(),
    )
    .build()
    .unwrap();
    rustls::client::danger::ServerCertVerifier::verify_server_cert(
        verifier.as_ref(),
        &certified.cert[0],
        &certified.cert[1..],
        &rustls::pki_types::ServerName::try_from("www.a.test").unwrap(),
        &[],
        rustls::pki_types::UnixTime::now(),
    )
    .expect("the chain verifies against pebble's root");
    // The key is private, the state directory too.
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("sites/a.test/key.pem")), 0o600);
    assert_eq!(mode(&state.join("account.key")), 0o600);
    // The challenge answers are withdrawn.
    assert_eq!(
        std::fs::read_dir(state.join("challenges/http-01"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn client_obtains_with_tls_alpn01() {
    let work = TempRoot::new();
    let state = work.outside_dir().join("state");
    let placeholder = AcmeSettings {
        state_dir: state.clone(),
        ..AcmeSettings::default()
    };
    let alpn = alpn_server(placeholder);
    let pebble = Pebble::start(&work.outside_dir().join("pebble"), 1, alpn.port);
    let settings = settings(&pebble, &state, AcmeChallenge::TlsAlpn01);
    let names = vec!["b.test".to_owned()];
    acme::obtain(&settings, &names)
        .unwrap_or_else(|error| panic!("{error}\npebble: {}", pebble.log_text()));
    let certified = acme::certificate(&acme_site(&["b.test"]), &settings).expect("served");
    assert!(contains(leaf_of(&certified), b"b.test"));
    assert!(
        acme::challenge_certificate("b.test", &settings).is_none(),
        "withdrawn"
    );
}

#[test]
fn client_refuses_wildcards_and_names_the_problem() {
    let work = TempRoot::new();
    let state = work.outside_dir().join("state");
    let mut pebble = Pebble::start(&work.outside_dir().join("pebble"), 1, 1);
    let settings = settings(&pebble, &state, AcmeChallenge::Http01);
    let error = acme::obtain(&settings, &["*.c.test".to_owned()]).unwrap_err();
    assert!(error.to_string().contains("DNS-01"), "{error}");
    // No one answers port 1: pebble's validation fails, and its problem document is named.
    let error = acme::obtain(&settings, &["d.test".to_owned()]).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("http-01 for d.test is invalid"), "{text}");
    assert!(text.contains("urn:ietf:params:acme:error:"), "{text}");
    // A server that is down: the directory step says so.
    pebble.stop();
    let error = acme::obtain(&settings, &["d.test".to_owned()]).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("directory: https://127.0.0.1:"),
        "{error}"
    );
}

/// Wait (bounded) until `done` holds.
fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// The manager (`start`, `update`) in this process: obtains at start, renews when a reload
/// finds the certificate within `renew_before` of its end (the new one is what `certificate`
/// gives from then on), and when the CA is down keeps the stored certificate and logs why. The
/// only test here that starts the process-wide manager and configures the error log.
#[test]
fn client_manager_obtains_renews_and_survives_the_ca_going_down() {
    let work = TempRoot::new();
    let state = work.outside_dir().join("state");
    let error_log = work.outside_dir().join("error.log");
    ampd::log::error::configure(&ampd::config::LogOptions {
        access: None,
        format: ampd::config::LogFormat::Common,
        error: Some(error_log.clone()),
        level: ampd::config::Level::Info,
    })
    .unwrap();
    let logged = || std::fs::read_to_string(&error_log).unwrap_or_default();
    let http = http01_server(AcmeSettings {
        state_dir: state.clone(),
        ..AcmeSettings::default()
    });
    let mut pebble = Pebble::start(&work.outside_dir().join("pebble"), http.port, 1);
    let mut config = ampd::config::Config::new(work.path().to_path_buf());
    config.sites[0].names = vec![HostName::Exact("m.test".to_owned())];
    config.sites[0].tls.certificate = Some(CertificateSource::Acme);
    config.tls.acme = settings(&pebble, &state, AcmeChallenge::Http01);
    // Longer than pebble's certificates live (5 years): each look renews.
    config.tls.acme.renew_before = Duration::from_secs(20 * 365 * 86_400);
    let site = config.sites[0].clone();
    let served = || acme::certificate(&site, &config.tls.acme).map(|key| key.cert[0].clone());

    acme::start(&config);
    assert!(
        wait_until(Duration::from_secs(60), || served().is_some()),
        "no certificate obtained; log: {}\npebble: {}",
        logged(),
        pebble.log_text()
    );
    let first = served().unwrap();
    assert!(logged().contains("acme: obtaining a certificate for m.test (none is stored)"));

    acme::update(&config);
    assert!(
        wait_until(Duration::from_secs(60), || served()
            .is_some_and(|now| now != first)),
        "not renewed; log: {}",
        logged()
    );
    let second = served().unwrap();
    assert!(logged().contains("acme: obtaining a certificate for m.test (it expires in"));

    pebble.stop();
    acme::update(&config);
    assert!(
        wait_until(Duration::from_secs(30), || logged()
            .contains("acme: m.test: directory: https://127.0.0.1:")),
        "no error logged: {}",
        logged()
    );
    assert!(logged().contains("the stored certificate (if any) keeps serving; retrying in 60 s"));
    assert_eq!(
        served(),
        Some(second),
        "the stored certificate still serves"
    );
}

// ---- The whole server: `ampd run` with `[tls.acme]`, pebble validating against its listeners.

/// The certificate ampd presents for `name` on `port`, verified against `root` (PEM); and
/// whether a request over it was answered.
fn served_leaf(port: u16, name: &str, root: &str) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(root.as_bytes()).map_err(|error| error.to_string())?)
        .map_err(|error| error.to_string())?;
    let config = rustls::ClientConfig::builder_with_provider(ampd::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let mut connection = rustls::ClientConnection::new(Arc::new(config), server_name)
        .map_err(|error| error.to_string())?;
    let mut socket = TcpStream::connect(("127.0.0.1", port)).map_err(|error| error.to_string())?;
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut stream = rustls::Stream::new(&mut connection, &mut socket);
    stream
        .write_all(
            format!("GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .map_err(|error| error.to_string())?;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    if !response.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "no 200 over TLS: {}",
            String::from_utf8_lossy(&response)
        ));
    }
    let leaf = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .ok_or("no certificate")?;
    Ok(leaf.as_ref().to_vec())
}

/// ampd serving `names` from `certificate = "acme"` on two pre-chosen ports (pebble must know
/// them before it starts), and the pebble validating against them.
struct AcmeServer {
    _work: TempRoot,
    pebble: Pebble,
    server: support::Server,
    tls_port: u16,
    root: String,
}

fn acme_server(arch: &str, challenge: &str, renew_before: &str) -> AcmeServer {
    let work = TempRoot::new();
    work.file("index.html", "hello over acme\n");
    // The ports are chosen before ampd binds them (pebble must know them first), so another
    // test's socket may take one in between: then choose again.
    let mut attempts = 0;
    let (pebble, server, tls_port) = loop {
        attempts += 1;
        let http_port = pebble::free_port();
        let tls_port = pebble::free_port();
        let pebble = Pebble::start(&work.outside_dir().join("pebble"), http_port, tls_port);
        let head = support::config_head(arch).replace(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = [\"127.0.0.1:{http_port}\", \"127.0.0.1:{tls_port} tls\"]"),
        );
        let body = format!(
            r#"{head}
[tls.acme]
directory = "{directory}"
ca_root = "{ca_root}"
email = "admin@example.test"
challenge = "{challenge}"
state_dir = "{state}"
renew_before = "{renew_before}"

[[site]]
default = true
server_names = ["a.test", "www.a.test"]
root = "www"
certificate = "acme"
"#,
            directory = pebble.directory,
            ca_root = pebble.ca_root.display(),
            state = work.outside_dir().join("state").display(),
        );
        let path = work.outside_file("ampd.toml", body);
        let started = std::panic::catch_unwind(|| {
            support::Server::start(support::Options::config_file(&path))
        });
        match started {
            Ok(server) => break (pebble, server, tls_port),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .map_or("", String::as_str)
                    .to_owned();
                if attempts == 5 || !message.contains("Address already in use") {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    };
    let root = pebble.issuing_root();
    AcmeServer {
        _work: work,
        pebble,
        server,
        tls_port,
        root,
    }
}

impl AcmeServer {
    /// Wait (bounded) until a handshake for `name` is answered with a certificate other than
    /// `not`.
    /// The certificate that handshake showed is returned: under `mp` another connection may
    /// reach a worker that has not re-read the state directory yet (it does within a second).
    fn wait_served(&self, name: &str, not: Option<&[u8]>) -> Vec<u8> {
        let mut last = String::new();
        let mut served = None;
        let found = wait_until(Duration::from_secs(60), || {
            match served_leaf(self.tls_port, name, &self.root) {
                Ok(leaf) if Some(leaf.as_slice()) != not => {
                    served = Some(leaf);
                    return true;
                }
                Ok(_) => last = "the same certificate".to_owned(),
                Err(error) => last = error,
            }
            false
        });
        assert!(
            found,
            "{name} not served a new certificate: {last}\nampd: {}\npebble: {}",
            self.server.stderr(),
            self.pebble.log_text()
        );
        served.unwrap()
    }
}

for_each_arch!(fn server_obtains_with_http01(arch) {
    let server = acme_server(arch, "http-01", "30d");
    let leaf = server.wait_served("a.test", None);
    assert!(contains(&leaf, b"www.a.test"));
    // The same certificate for the other name.
    assert_eq!(server.wait_served("www.a.test", None), leaf);
});

for_each_arch!(fn server_obtains_with_tls_alpn01(arch) {
    let server = acme_server(arch, "tls-alpn-01", "30d");
    let leaf = server.wait_served("a.test", None);
    assert!(contains(&leaf, b"a.test"));
});

// `renew_before` longer than pebble's certificates live: a reload finds the certificate due,
// and the new one is served without a restart.
for_each_arch!(fn server_renews_without_restart(arch) {
    let server = acme_server(arch, "http-01", "7300d");
    let first = server.wait_served("a.test", None);
    server.server.signal("HUP");
    let second = server.wait_served("a.test", Some(&first));
    assert_ne!(first, second);
});

/// The CA gone: the stored certificate keeps serving and the failure is logged.
#[test]
fn server_keeps_serving_when_the_ca_is_down() {
    let mut server = acme_server("reactor", "http-01", "7300d");
    let first = server.wait_served("a.test", None);
    server.pebble.stop();
    server.server.signal("HUP");
    assert!(
        server.server.wait_for_stderr(
            "acme: a.test, www.a.test: directory: https://127.0.0.1:",
            Duration::from_secs(30)
        ),
        "no error logged: {}",
        server.server.stderr()
    );
    assert!(server
        .server
        .stderr()
        .contains("keeps serving; retrying in 60 s"));
    assert_eq!(
        served_leaf(server.tls_port, "a.test", &server.root).unwrap(),
        first
    );
}
