//! The HTTP side of TLS through `harness`, the engine's part played by the test: the listener
//! says TLS (`set_listener`) and the handshake what it settled (`set_tls`), as an engine does
//! before the first request byte. `Strict-Transport-Security` over TLS only (RFC 6797 §7.2),
//! also on heads the header cache holds; `redirect_https`; the access log's TLS fields.

use std::net::SocketAddr;
use std::time::Duration;

use super::harness::{Harness, INDEX};
use super::Need;
use crate::config::{Config, Hsts, Listen, LogFormat};
use crate::tls::{ClientCertificate, TlsInfo};

const PLAIN: &str = "127.0.0.1:8080";
const SECURE: &str = "127.0.0.1:8443";

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n")
}

fn handshake() -> TlsInfo {
    TlsInfo {
        protocol: "TLSv1.3",
        cipher: "TLS13_AES_128_GCM_SHA256",
        server_name: Some("a.test".into()),
        alpn: Some(b"http/1.1".to_vec().into_boxed_slice()),
        resumed: false,
        client: None,
    }
}

/// Listen plain on `PLAIN` and TLS on `tls_port` (a certificate made for the test).
fn listen_both(config: &mut Config, tls_port: u16) {
    let root = config.sites[0].locations[0]
        .settings
        .static_files
        .root
        .clone();
    config.tls.certificate = Some(super::harness::certificate(&root));
    config.listen = vec![
        Listen::plain(PLAIN.parse().unwrap()),
        Listen {
            address: SocketAddr::from(([127, 0, 0, 1], tls_port)),
            tls: true,
            h2c: false,
            ipv6_half: false,
        },
    ];
}

fn hsts(config: &mut Config) {
    config.sites[0].tls.hsts = Some(Hsts {
        max_age: Duration::from_secs(365 * 86_400),
        include_subdomains: true,
        preload: false,
    });
}

/// A connection as an engine hands it over from a TLS listener after the handshake.
fn secure(harness: &mut Harness) {
    harness.conn.set_listener(SECURE.parse().unwrap(), true);
    harness.conn.set_tls(handshake());
}

fn plain(harness: &mut Harness) {
    harness.conn.set_listener(PLAIN.parse().unwrap(), false);
}

const STS: &str = "max-age=31536000; includeSubDomains";

#[test]
fn hsts_goes_on_every_response_over_tls_cached_heads_included() {
    let mut harness = Harness::new(hsts);
    secure(&mut harness);
    // Twice: the second `200` is built from the header cache's head.
    let requests = [get("/index.html"), get("/index.html"), get("/missing")].concat();
    harness.feed(requests.as_bytes());
    let responses = harness.take();
    let statuses: Vec<u16> = responses.iter().map(|response| response.status).collect();
    assert_eq!(statuses, [200, 200, 404]);
    for response in &responses {
        assert_eq!(
            response.header("strict-transport-security"),
            Some(STS),
            "{response:?}"
        );
    }
    assert_eq!(responses[1].body, INDEX);
}

#[test]
fn hsts_never_goes_over_plain_http_even_after_a_tls_connection_cached_the_head() {
    let mut harness = Harness::new(hsts);
    secure(&mut harness);
    harness.feed(get("/index.html").as_bytes());
    assert_eq!(
        harness.take()[0].header("strict-transport-security"),
        Some(STS)
    );
    // The same world (caches included), a plain connection.
    harness.reconnect();
    plain(&mut harness);
    let requests = [get("/index.html"), get("/missing")].concat();
    harness.feed(requests.as_bytes());
    let responses = harness.take();
    assert_eq!(responses.len(), 2);
    for response in &responses {
        assert_eq!(
            response.header("strict-transport-security"),
            None,
            "{response:?}"
        );
    }
}

#[test]
fn hsts_preload_and_a_site_without_hsts() {
    let mut harness = Harness::new(|config| {
        config.sites[0].tls.hsts = Some(Hsts {
            max_age: Duration::from_secs(600),
            include_subdomains: false,
            preload: true,
        });
    });
    secure(&mut harness);
    harness.feed(b"OPTIONS /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let responses = harness.take();
    assert_eq!(responses[0].status, 204);
    assert_eq!(
        responses[0].header("strict-transport-security"),
        Some("max-age=600; preload"),
        "answered before routing, still the site's"
    );
    let mut harness = Harness::new(|_| {});
    secure(&mut harness);
    harness.feed(get("/index.html").as_bytes());
    assert_eq!(harness.take()[0].header("strict-transport-security"), None);
}

#[test]
fn an_upstreams_own_hsts_gives_way_to_the_sites() {
    let mut harness = Harness::proxying(1, hsts);
    secure(&mut harness);
    let need = harness.feed(get("/app").as_bytes());
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_reply(
        b"HTTP/1.1 200 OK\r\nStrict-Transport-Security: max-age=1\r\nContent-Length: 2\r\n\r\nok",
    );
    let responses = harness.take();
    let values: Vec<&str> = responses[0]
        .headers
        .iter()
        .filter(|(name, _)| name == "strict-transport-security")
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(values, [STS]);
}

fn redirecting(tls_port: u16) -> Harness {
    let mut harness = Harness::new(|config| {
        listen_both(config, tls_port);
        config.sites[0].tls.redirect_https = true;
    });
    plain(&mut harness);
    harness
}

#[test]
fn a_plain_request_to_a_redirect_https_site_is_sent_to_the_tls_port() {
    let mut harness = redirecting(8443);
    harness.feed(b"GET /a/b%20c?x=1&y HTTP/1.1\r\nHost: A.Test:8080\r\n\r\n");
    harness.feed(b"POST /form HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nabc");
    let responses = harness.take();
    let answers: Vec<(u16, Option<&str>)> = responses
        .iter()
        .map(|response| (response.status, response.header("location")))
        .collect();
    assert_eq!(
        answers,
        [
            (301, Some("https://a.test:8443/a/b%20c?x=1&y")),
            (301, Some("https://a.test:8443/form")),
        ]
    );
    assert_eq!(responses[0].header("strict-transport-security"), None);
}

#[test]
fn the_https_port_443_is_left_out_and_a_request_without_host_names_the_listener() {
    let mut harness = redirecting(443);
    harness.feed(b"GET http://b.test:8080/p?q HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.feed(b"GET /x HTTP/1.0\r\n\r\n");
    let responses = harness.take();
    assert_eq!(responses[0].header("location"), Some("https://b.test/p?q"));
    assert_eq!(responses[1].header("location"), Some("https://127.0.0.1/x"));
}

#[test]
fn acme_challenges_are_not_redirected_and_tls_requests_are_served() {
    let mut harness = redirecting(8443);
    harness.feed(get("/.well-known/acme-challenge/token123").as_bytes());
    let responses = harness.take();
    assert_eq!(responses[0].status, 404, "routed as any request");
    assert_eq!(responses[0].header("location"), None);
    let mut harness = redirecting(8443);
    secure(&mut harness);
    harness.feed(get("/index.html").as_bytes());
    let responses = harness.take();
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].body, INDEX);
}

fn logged(harness: &mut Harness, request: &str) -> serde_json::Value {
    harness.feed(request.as_bytes());
    harness.take();
    let log = harness.access_log();
    let line = log.lines().last().expect("a log line");
    serde_json::from_str(line).unwrap()
}

#[test]
fn the_json_log_names_the_tls_version_cipher_and_client_certificate() {
    let mut harness = Harness::new(|_| {}).logging(LogFormat::Json);
    harness.conn.set_listener(SECURE.parse().unwrap(), true);
    harness.conn.set_tls(TlsInfo {
        client: Some(Box::new(ClientCertificate {
            subject: "CN=alice,O=Example".to_owned(),
            issuer: "CN=Test CA".to_owned(),
            ..ClientCertificate::default()
        })),
        ..handshake()
    });
    let line = logged(&mut harness, &get("/index.html"));
    assert_eq!(line["tls_protocol"], "TLSv1.3");
    assert_eq!(line["tls_cipher"], "TLS13_AES_128_GCM_SHA256");
    assert_eq!(line["tls_client_subject"], "CN=alice,O=Example");

    let mut harness = Harness::new(|_| {}).logging(LogFormat::Json);
    secure(&mut harness);
    let line = logged(&mut harness, &get("/index.html"));
    assert_eq!(line["tls_protocol"], "TLSv1.3");
    assert!(line["tls_client_subject"].is_null(), "{line}");

    let mut harness = Harness::new(|_| {}).logging(LogFormat::Json);
    plain(&mut harness);
    let line = logged(&mut harness, &get("/index.html"));
    for field in ["tls_protocol", "tls_cipher", "tls_client_subject"] {
        assert!(line[field].is_null(), "{field}: {line}");
    }
}

/// A second site, `admin.test`, that asks for client certificates; the first answers `a.test`.
fn with_an_mtls_site(config: &mut Config) {
    let mut admin = config.sites[0].clone();
    admin.names = vec![crate::config::HostName::Exact("admin.test".into())];
    admin.default = false;
    admin.tls.client_certificates = crate::config::ClientCertificates::Required {
        ca: "clients.pem".into(),
    };
    config.sites[0].names = vec![crate::config::HostName::Exact("a.test".into())];
    config.sites.push(admin);
}

/// The handshake chose `a.test` (no client certificate asked for) but the request names
/// `admin.test`, which asks for one: `421 Misdirected Request` (RFC 9110 §15.5.20), as nginx
/// answers, so that SNI cannot be used to step around a site's client-certificate check.
#[test]
fn a_host_other_than_the_handshakes_site_that_asks_for_client_certificates_is_misdirected() {
    let mut harness = Harness::new(with_an_mtls_site);
    secure(&mut harness);
    let requests = [
        "GET /index.html HTTP/1.1\r\nHost: admin.test\r\n\r\n".to_owned(),
        get("/index.html"),
    ]
    .concat();
    harness.feed(requests.as_bytes());
    let statuses: Vec<u16> = harness
        .take()
        .iter()
        .map(|response| response.status)
        .collect();
    assert_eq!(statuses, [421, 200]);

    // The handshake that named admin.test itself got its client-certificate check.
    let mut harness = Harness::new(with_an_mtls_site);
    harness.conn.set_listener(SECURE.parse().unwrap(), true);
    harness.conn.set_tls(TlsInfo {
        server_name: Some("admin.test".into()),
        client: Some(Box::new(ClientCertificate {
            subject: "CN=alice".to_owned(),
            ..ClientCertificate::default()
        })),
        ..handshake()
    });
    harness.feed(b"GET /index.html HTTP/1.1\r\nHost: admin.test\r\n\r\n");
    let statuses: Vec<u16> = harness
        .take()
        .iter()
        .map(|response| response.status)
        .collect();
    assert_eq!(statuses, [200]);
}

fn statuses_of(harness: &mut Harness, requests: &[&str]) -> Vec<u16> {
    harness.feed(requests.concat().as_bytes());
    harness
        .take()
        .iter()
        .map(|response| response.status)
        .collect()
}

/// A site that requires client certificates answers nothing to a connection that has no
/// verified one for it, whatever listener it came in on: plain HTTP has no handshake at all
/// (`403`, by `Host` or by an absolute-form target alike), and neither does a TLS connection
/// whose handshake (impossibly, rustls refuses it) let it in without one.
#[test]
fn a_site_that_requires_client_certificates_refuses_connections_without_one() {
    let mut harness = Harness::new(with_an_mtls_site);
    plain(&mut harness);
    let statuses = statuses_of(
        &mut harness,
        &[
            "GET /index.html HTTP/1.1\r\nHost: admin.test\r\n\r\n",
            "GET http://admin.test/index.html HTTP/1.1\r\nHost: a.test\r\n\r\n",
            "GET http://ADMIN.test:8080/index.html HTTP/1.1\r\nHost: a.test\r\n\r\n",
            "OPTIONS /index.html HTTP/1.1\r\nHost: admin.test\r\n\r\n",
            "POST /index.html HTTP/1.1\r\nHost: admin.test\r\nContent-Length: 2\r\n\r\nab",
            "GET /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n",
        ],
    );
    assert_eq!(statuses, [403, 403, 403, 403, 403, 200]);

    let mut harness = Harness::new(with_an_mtls_site);
    harness.conn.set_listener(SECURE.parse().unwrap(), true);
    harness.conn.set_tls(TlsInfo {
        server_name: Some("admin.test".into()),
        ..handshake()
    });
    let statuses = statuses_of(
        &mut harness,
        &["GET /index.html HTTP/1.1\r\nHost: admin.test\r\n\r\n"],
    );
    assert_eq!(statuses, [403]);
}

/// With `redirect_https`, plain requests for the site are sent to HTTPS (where the handshake
/// asks for the certificate) rather than refused.
#[test]
fn a_client_certificate_site_with_redirect_https_sends_plain_requests_to_https() {
    let mut harness = Harness::new(|config| {
        listen_both(config, 8443);
        with_an_mtls_site(config);
        // A TLS listener builds the site's verifier: any certificate will do as its CA.
        let ca = config.tls.certificate.clone().unwrap().certificate;
        config.sites[1].tls.client_certificates =
            crate::config::ClientCertificates::Required { ca };
        config.sites[1].tls.redirect_https = true;
    });
    plain(&mut harness);
    harness.feed(b"GET /index.html HTTP/1.1\r\nHost: admin.test\r\n\r\n");
    let responses = harness.take();
    assert_eq!(responses[0].status, 301);
    assert_eq!(
        responses[0].header("location"),
        Some("https://admin.test:8443/index.html")
    );
}

/// A request whose body goes to an upstream as it arrives is located before its body is read:
/// the client-certificate check comes before anything is forwarded.
#[test]
fn a_streamed_request_body_is_not_forwarded_without_the_sites_certificate() {
    let mut harness = Harness::proxying(1, with_an_mtls_site);
    secure(&mut harness);
    let need =
        harness.feed(b"POST /app HTTP/1.1\r\nHost: admin.test\r\nContent-Length: 5\r\n\r\nhello");
    assert!(!matches!(need, Need::Connect(..)), "{need:?}");
    assert_eq!(harness.statuses(), [421]);

    let mut harness = Harness::proxying(1, with_an_mtls_site);
    plain(&mut harness);
    let need =
        harness.feed(b"POST /app HTTP/1.1\r\nHost: admin.test\r\nContent-Length: 5\r\n\r\nhello");
    assert!(!matches!(need, Need::Connect(..)), "{need:?}");
    assert_eq!(harness.statuses(), [403]);
}
