//! TLS over real sockets under every engine, with real clients: curl (`--cacert`), Python's
//! `ssl` + `http.client` (tests/fixtures/tls_client.py: keep-alive, several requests, resumed
//! sessions) and headless Chromium. Files large (several MiB, compared byte for byte) and small
//! (from the file cache), HEAD and Range; plain and TLS listeners side by side, HSTS over TLS
//! only and `redirect_https`; SNI choosing between two sites' certificates (ECDSA P-256 and RSA
//! 2048) and the default certificate for unknown names and no SNI; session resumption (TLS 1.2
//! and 1.3, every resumed connection, whichever loop or worker it lands on); ALPN; client
//! certificates required and optional, and what a CGI script sees of them; a certificate swapped
//! by SIGHUP under an open keep-alive connection, a mismatched key rejected at reload and at
//! start. Certificates are made for each test by tests/it/support/tls.rs with the `openssl` command.
//!
//! What the engines differ in (the handshake and records over each engine's socket I/O, resumed
//! sessions across loops and workers, a reload under an open connection) runs under every
//! engine; what rustls decides from the configuration (ALPN, SNI, client certificates) and a
//! browser's view of a page runs once, on the default engine.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use support::bulk::sha256;
use support::root::pattern_bytes;
use support::scripts::install_cgi;
use support::tls::{
    curl_https, eventually, header, listeners, new_key, plain_addr, tls_addr, write_tls_config, Ca,
    Issued, KeyKind, PyTls,
};
use support::*;

const TLS_ONLY: &str = "\"127.0.0.1:0 tls\"";
const PLAIN_AND_TLS: &str = "[\"127.0.0.1:0\", \"127.0.0.1:0 tls\"]";
/// Bigger than any read buffer or TLS record, and than the small-file cache's entries.
const BIG: usize = (6 << 20) + 12_345;
const WAIT: Duration = Duration::from_secs(10);

/// A `[[site]]` serving `root` (relative to the config file) for `names`, with `cert`, then the
/// keys in `more`.
fn site(names: &[&str], root: &str, cert: &Issued, more: &str) -> String {
    let names: Vec<String> = names.iter().map(|name| format!("\"{name}\"")).collect();
    format!(
        "\n[[site]]\nserver_names = [{}]\nroot = \"{root}\"\ncertificate = \"{}\"\n\
         certificate_key = \"{}\"\n{more}\n",
        names.join(", "),
        cert.cert.display(),
        cert.key.display(),
    )
}

/// `METHOD PATH` with `Host: HOST` on a new plain connection.
fn plain_request(addr: SocketAddr, method: &str, path: &str, host: &str) -> Response {
    let mut conn = support::http::Conn::open(addr);
    conn.send(format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"));
    conn.read_response(method)
}

/// The test's CA, in `pki/` beside the root.
fn test_ca(root: &TempRoot) -> Ca {
    Ca::new(&root.outside_dir().join("pki"), "ampd test CA")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Python's settings for a verified connection to `name`.
fn to(name: &str, ca: &Ca) -> Value {
    json!({"server_name": name, "cafile": ca.cert})
}

/// A connection that must not get an HTTP answer: the handshake fails, or (TLS 1.3, where the
/// client finishes first) the first request does. The error text.
fn refused(py: &mut PyTls, id: &str, port: u16, settings: Value) -> String {
    let handshake = py.connect(id, port, settings);
    if handshake["ok"] != true {
        return handshake["error"].as_str().unwrap_or_default().to_owned();
    }
    let answer = py.request(id, "GET", "/hello.txt", json!({}));
    assert_ne!(answer["ok"], true, "{id}: an HTTP answer came: {answer}");
    py.close(id);
    answer["error"].as_str().unwrap_or_default().to_owned()
}

/// One site, a.test (ECDSA), on a TLS-only listener: hello.txt and a several-MiB big.bin.
fn one_site(arch: &str) -> (TempRoot, Ca, Server, Vec<u8>) {
    one_site_with(arch, "")
}

/// `one_site` with the server-wide `tables` (`[http2]`, …) before the site.
fn one_site_with(arch: &str, tables: &str) -> (TempRoot, Ca, Server, Vec<u8>) {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let a = ca.server("a", &["a.test", "*.a.test"], KeyKind::EcdsaP256);
    root.file("hello.txt", "hello over tls\n");
    let big = pattern_bytes(BIG, 7);
    root.file("big.bin", &big);
    let body = format!("{tables}{}", site(&["a.test"], "www", &a, ""));
    let config = write_tls_config(&root, arch, TLS_ONLY, &body);
    let server = Server::start(Options::config_file(&config));
    (root, ca, server, big)
}

/// curl over TLS, held to HTTP/1.1 (ALPN would otherwise agree on h2).
fn curl_https1(
    ca: &Path,
    name: &str,
    addr: SocketAddr,
    path: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["--http1.1"];
    args.extend_from_slice(extra);
    curl_https(ca, name, addr, path, &args)
}

for_each_arch!(fn curl_over_https(arch) {
    // HTTP/1.1 over TLS here; curl's HTTP/2 over TLS is tests/it/http2.rs's.
    let (root, ca, server, big) = one_site(arch);
    let addr = tls_addr(server.ready_line());

    let small = curl_https1(&ca.cert, "a.test", addr, "/hello.txt", &["-i"]);
    let head = text(&small.stdout);
    assert!(small.status.success(), "{}\n{}", text(&small.stderr), server.stderr());
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.ends_with("\r\n\r\nhello over tls\n"), "{head}");

    let saved = root.outside_dir().join("big.download");
    let download = curl_https1(&ca.cert, "a.test", addr, "/big.bin",
        &["-o", &saved.display().to_string(), "-w", "%{http_code} %{http_version}"]);
    assert_eq!(text(&download.stdout), "200 1.1", "{}", text(&download.stderr));
    let got = std::fs::read(&saved).expect("read the download");
    assert_eq!(got.len(), big.len());
    assert!(got == big, "the downloaded bytes differ from the file");

    let head_only = curl_https1(&ca.cert, "a.test", addr, "/big.bin", &["-I"]);
    let head = text(&head_only.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains(&format!("content-length: {BIG}\r\n")), "{head}");

    let range = curl_https1(&ca.cert, "a.test", addr, "/big.bin",
        &["-r", "1000000-1000099", "-D", "-"]);
    let answer = range.stdout;
    let split = support::http::find(&answer, b"\r\n\r\n").expect("a head") + 4;
    let head = text(&answer[..split]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 206"), "{head}");
    assert!(head.contains(&format!("content-range: bytes 1000000-1000099/{BIG}")), "{head}");
    assert!(answer[split..] == big[1_000_000..1_000_100], "range bytes differ");

    // curl checks the name: a certificate for a.test is not one for b.test.
    let wrong = curl_https(&ca.cert, "b.test", addr, "/hello.txt", &[]);
    assert_eq!(wrong.status.code(), Some(60), "{}", text(&wrong.stderr));
});

for_each_arch!(fn python_keep_alive_over_tls(arch) {
    let (_root, ca, server, big) = one_site(arch);
    let port = tls_addr(server.ready_line()).port();
    let mut py = PyTls::start();
    let handshake = py.connect_ok("k", port, to("a.test", &ca));
    assert_eq!(handshake["subject_cn"], "a.test", "{handshake}");
    assert_eq!(handshake["issuer_cn"], "ampd test CA", "{handshake}");
    // Several requests on the one connection (the client never opens another): the small file
    // comes from the file cache after the first.
    for _ in 0..5 {
        let small = py.get("k", "/hello.txt");
        assert_eq!(small["status"], 200, "{small}");
        assert_eq!(small["body"], "hello over tls\n", "{small}");
        assert_eq!(header(&small, "connection"), None, "{small}");
    }
    let whole = py.get("k", "/big.bin");
    assert_eq!(whole["status"], 200);
    assert_eq!(whole["body_len"], BIG);
    assert_eq!(whole["body_sha256"], sha256(&big).as_str());

    let head = py.request("k", "HEAD", "/big.bin", json!({}));
    assert_eq!(head["status"], 200, "{head}");
    assert_eq!(header(&head, "content-length"), Some(BIG.to_string().as_str()), "{head}");
    assert_eq!(head["body_len"], 0, "{head}");

    let tail = py.request("k", "GET", "/big.bin", json!({"Range": "bytes=-70000"}));
    assert_eq!(tail["status"], 206, "{tail}");
    let from = BIG - 70_000;
    assert_eq!(
        header(&tail, "content-range"),
        Some(format!("bytes {from}-{}/{BIG}", BIG - 1).as_str()),
        "{tail}"
    );
    assert_eq!(tail["body_sha256"], sha256(&big[from..]).as_str());

    let after = py.get("k", "/hello.txt");
    assert_eq!(after["body"], "hello over tls\n", "the connection serves on after a big file");
    let missing = py.get("k", "/nothing-here");
    assert_eq!(missing["status"], 404, "{missing}");
    assert_eq!(py.get("k", "/hello.txt")["status"], 200);
});

default_arch!(fn alpn_follows_the_http2_key(arch) {
    // By default `h2` is the server's first choice: a client offering both agrees on it.
    let (_root, ca, server, _big) = one_site(arch);
    let port = tls_addr(server.ready_line()).port();
    let mut py = PyTls::start();
    let mut offer = to("a.test", &ca);
    offer["alpn"] = json!(["h2", "http/1.1"]);
    let agreed = py.connect_ok("both", port, offer);
    assert_eq!(agreed["alpn"], "h2", "{agreed}");
    py.close("both");
    let mut old = to("a.test", &ca);
    old["alpn"] = json!(["http/1.1"]);
    let agreed = py.connect_ok("http1", port, old);
    assert_eq!(agreed["alpn"], "http/1.1", "{agreed}");
    assert_eq!(py.get("http1", "/hello.txt")["status"], 200);
    drop(server);

    // `[http2] enabled = false`: HTTP/1.1 only.
    let (_root, ca, server, _big) = one_site_with(arch, "[http2]\nenabled = false\n");
    let port = tls_addr(server.ready_line()).port();
    let mut offer = to("a.test", &ca);
    offer["alpn"] = json!(["h2", "http/1.1"]);
    let agreed = py.connect_ok("both", port, offer);
    assert_eq!(agreed["alpn"], "http/1.1", "{agreed}");
    assert_eq!(py.get("both", "/hello.txt")["status"], 200);

    // No ALPN at all: HTTP/1.1 all the same.
    let silent = py.connect_ok("none", port, to("a.test", &ca));
    assert_eq!(silent["alpn"], Value::Null, "{silent}");
    assert_eq!(py.get("none", "/hello.txt")["status"], 200);

    // Only h2, turned off: rustls answers RFC 7301 §3.2's no_application_protocol alert
    // rather than fall back.
    let mut h2 = to("a.test", &ca);
    h2["alpn"] = json!(["h2"]);
    let error = refused(&mut py, "h2", port, h2);
    assert!(
        error.to_ascii_lowercase().replace('_', " ").contains("no application protocol"),
        "{error}"
    );
    assert_eq!(py.get("both", "/hello.txt")["status"], 200, "others are served on");
});

for_each_arch!(fn plain_and_tls_listeners_side_by_side(arch) {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let a = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    let b = ca.server("b", &["b.test"], KeyKind::EcdsaP256);
    root.file("hello.txt", "site a\n");
    root.outside_file("b/hello.txt", "site b\n");
    let body = format!(
        "{}{}",
        site(&["a.test"], "www", &a, "hsts = \"365d\"\nhsts_include_subdomains = true"),
        site(&["b.test"], "b", &b, "redirect_https = true"),
    );
    let config = write_tls_config(&root, arch, PLAIN_AND_TLS, &body);
    let server = Server::start(Options::config_file(&config));
    let named = listeners(server.ready_line());
    assert_eq!(named.len(), 2, "{}", server.ready_line());
    let plain = plain_addr(server.ready_line());
    let secure = tls_addr(server.ready_line());
    assert_ne!(plain.port(), secure.port());

    // Site a: plain answers with no HSTS (RFC 6797 §7.2: not over plain HTTP), TLS with it.
    let over_plain = plain_request(plain, "GET", "/hello.txt", "a.test");
    assert_eq!(over_plain.status, 200, "{over_plain:?}");
    assert_eq!(over_plain.body_text(), "site a\n");
    assert_eq!(over_plain.header("strict-transport-security"), None, "{over_plain:?}");
    let mut py = PyTls::start();
    py.connect_ok("a", secure.port(), to("a.test", &ca));
    let over_tls = py.get("a", "/hello.txt");
    assert_eq!(over_tls["body"], "site a\n");
    assert_eq!(
        header(&over_tls, "strict-transport-security"),
        Some("max-age=31536000; includeSubDomains"),
        "{over_tls}"
    );

    py.connect_ok("b", secure.port(), to("b.test", &ca));
    let b_tls = py.get("b", "/hello.txt");
    assert_eq!(b_tls["status"], 200, "{b_tls}");
    assert_eq!(b_tls["body"], "site b\n");
    assert_eq!(header(&b_tls, "strict-transport-security"), None, "site b has no hsts");
});

default_arch!(fn redirect_https_sends_plain_requests_to_the_tls_port(arch) {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let b = ca.server("b", &["b.test"], KeyKind::EcdsaP256);
    root.file("hello.txt", "site b\n");
    let body = site(&["b.test"], "www", &b, "redirect_https = true");
    let config = write_tls_config(&root, arch, PLAIN_AND_TLS, &body);
    let server = Server::start(Options::config_file(&config));
    let plain = plain_addr(server.ready_line());
    let secure = tls_addr(server.ready_line());

    // Plain requests go to the same URL over https on the TLS listener's port (the port it
    // is bound to: `listen` says port 0 here).
    let moved = plain_request(plain, "GET", "/hello.txt?x=1&y=2", "b.test");
    assert_eq!(moved.status, 301, "{moved:?}");
    let location = format!("https://b.test:{}/hello.txt?x=1&y=2", secure.port());
    assert_eq!(moved.header("location"), Some(location.as_str()), "{moved:?}");
    // The Host's own port (the plain listener's) is not carried over.
    let with_port = plain_request(plain, "HEAD", "/", &format!("b.test:{}", plain.port()));
    assert_eq!(with_port.status, 301, "{with_port:?}");
    let location = format!("https://b.test:{}/", secure.port());
    assert_eq!(with_port.header("location"), Some(location.as_str()), "{with_port:?}");
    // Followed by curl, it lands on site b over TLS.
    let followed = curl([
        "-sS", "-L", "--cacert", &ca.cert.display().to_string(),
        "--resolve", &format!("b.test:{}:127.0.0.1", plain.port()),
        "--resolve", &format!("b.test:{}:127.0.0.1", secure.port()),
        &format!("http://b.test:{}/hello.txt", plain.port()),
    ]);
    assert_eq!(text(&followed.stdout), "site b\n", "{}", text(&followed.stderr));
});

default_arch!(fn sni_chooses_the_certificate(arch) {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let a = ca.server("a", &["a.test", "*.a.test"], KeyKind::EcdsaP256);
    let b = ca.server("b", &["b.test"], KeyKind::Rsa2048);
    let fallback = ca.server("fallback", &["fallback.test"], KeyKind::EcdsaP256);
    root.file("hello.txt", "site a\n");
    root.outside_file("b/hello.txt", "site b\n");
    root.outside_file("other/hello.txt", "the default site\n");
    // The default site has no certificate of its own: `[tls] certificate` serves unknown
    // names and clients that send no SNI.
    let body = format!(
        "[tls]\ncertificate = \"{}\"\ncertificate_key = \"{}\"\n{}{}\n[[site]]\ndefault = true\n\
         root = \"other\"\n",
        fallback.cert.display(),
        fallback.key.display(),
        site(&["a.test", "*.a.test"], "www", &a, ""),
        site(&["b.test"], "b", &b, ""),
    );
    let config = write_tls_config(&root, arch, TLS_ONLY, &body);
    let server = Server::start(Options::config_file(&config));
    let addr = tls_addr(server.ready_line());
    let port = addr.port();
    let mut py = PyTls::start();

    let on_a = py.connect_ok("a", port, to("a.test", &ca));
    assert_eq!(on_a["subject_cn"], "a.test", "{on_a}");
    assert_eq!(py.get("a", "/hello.txt")["body"], "site a\n");
    let wildcard = py.connect_ok("www.a", port, to("www.a.test", &ca));
    assert_eq!(wildcard["subject_cn"], "a.test", "{wildcard}");

    let on_b = py.connect_ok("b", port, to("b.test", &ca));
    assert_eq!(on_b["subject_cn"], "b.test", "{on_b}");
    assert_eq!(py.get("b", "/hello.txt")["body"], "site b\n");
    // Under TLS 1.2 the suite names the key: b's is RSA, a's ECDSA.
    let mut twelve = to("b.test", &ca);
    twelve["max"] = json!("1.2");
    let rsa = py.connect_ok("b12", port, twelve);
    assert_eq!(rsa["version"], "TLSv1.2", "{rsa}");
    assert!(rsa["cipher"].as_str().unwrap().starts_with("ECDHE-RSA-"), "{rsa}");
    let mut twelve = to("a.test", &ca);
    twelve["max"] = json!("1.2");
    let ecdsa = py.connect_ok("a12", port, twelve);
    assert!(ecdsa["cipher"].as_str().unwrap().starts_with("ECDHE-ECDSA-"), "{ecdsa}");

    // An unknown name and no name at all: the default certificate, the default site.
    let mut unknown = to("unknown.test", &ca);
    unknown["check_hostname"] = json!(false);
    let other = py.connect_ok("unknown", port, unknown);
    assert_eq!(other["subject_cn"], "fallback.test", "{other}");
    assert_eq!(py.get("unknown", "/hello.txt")["body"], "the default site\n");
    let nameless = py.connect_ok("nameless", port, json!({"cafile": ca.cert}));
    assert_eq!(nameless["subject_cn"], "fallback.test", "{nameless}");

    // curl checks each name against what it was served.
    for (name, body) in [("a.test", "site a\n"), ("b.test", "site b\n")] {
        let fetched = curl_https(&ca.cert, name, addr, "/hello.txt", &[]);
        assert_eq!(text(&fetched.stdout), body, "{name}: {}", text(&fetched.stderr));
    }
});

for_each_arch!(fn sessions_resume(arch) {
    let (_root, ca, server, _big) = one_site(arch);
    let port = tls_addr(server.ready_line()).port();
    let mut py = PyTls::start();
    for version in ["1.2", "1.3"] {
        let mut settings = to("a.test", &ca);
        settings["min"] = json!(version);
        settings["max"] = json!(version);
        let first_id = format!("first-{version}");
        let first = py.connect_ok(&first_id, port, settings.clone());
        assert_eq!(first["session_reused"], false, "{first}");
        // A request first: TLS 1.3 tickets come after the handshake.
        assert_eq!(py.get(&first_id, "/hello.txt")["status"], 200);
        py.close(&first_id);
        // Several connections, each resuming the session the one before ended with (as a
        // browser uses its newest ticket): whichever loop or worker each lands on (reactor,
        // uring and mp spread connections), it resumes.
        let mut previous = first_id;
        for attempt in 0..4 {
            let id = format!("again-{version}-{attempt}");
            let again = py.connect_ok(&id, port, json!({"server_name": "a.test", "resume": previous}));
            assert_eq!(again["session_reused"], true, "TLS {version} attempt {attempt}: {again}");
            assert_eq!(again["version"], format!("TLSv{version}"));
            assert_eq!(py.get(&id, "/hello.txt")["body"], "hello over tls\n");
            py.close(&id);
            previous = id;
        }
    }
});

/// Site a requires a client certificate from the clients' CA, site b asks for one; b's CGI
/// script dumps its environment.
fn mtls_server(arch: &str) -> (TempRoot, Ca, Ca, Ca, Server) {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let clients = Ca::new(&root.outside_dir().join("pki"), "clients CA");
    let strangers = Ca::new(&root.outside_dir().join("pki"), "strangers CA");
    let a = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    let b = ca.server("b", &["b.test"], KeyKind::EcdsaP256);
    root.file("hello.txt", "site a\n");
    root.outside_file("b/hello.txt", "site b\n");
    install_cgi(&root, "../b/cgi-bin");
    let client_ca = clients.cert.display().to_string();
    let body = format!(
        "{}{}\n[[site.location]]\npath = \"/cgi-bin/\"\nhandler = \"cgi\"\n",
        site(
            &["a.test"],
            "www",
            &a,
            &format!("client_certificates = \"required\"\nclient_ca = \"{client_ca}\"")
        ),
        site(
            &["b.test"],
            "b",
            &b,
            &format!("client_certificates = \"optional\"\nclient_ca = \"{client_ca}\"")
        ),
    );
    let config = write_tls_config(&root, arch, TLS_ONLY, &body);
    let server = Server::start(Options::config_file(&config));
    (root, ca, clients, strangers, server)
}

/// `to(name)` presenting `cert`.
fn with_cert(name: &str, ca: &Ca, cert: &Issued) -> Value {
    let mut settings = to(name, ca);
    settings["cert"] = json!(cert.cert);
    settings["key"] = json!(cert.key);
    settings
}

/// NAME=value lines of an env dump.
fn env_value<'a>(dump: &'a str, name: &str) -> Option<&'a str> {
    dump.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
}

default_arch!(fn client_certificates_required_and_optional(arch) {
    let (_root, ca, clients, strangers, server) = mtls_server(arch);
    let port = tls_addr(server.ready_line()).port();
    let alice = clients.client("alice", "alice");
    let mallory = strangers.client("mallory", "mallory");
    let mut py = PyTls::start();

    // Required: none and a stranger's are refused by the handshake; alice gets in.
    for version in ["1.2", "1.3"] {
        let mut bare = to("a.test", &ca);
        bare["max"] = json!(version);
        let error = refused(&mut py, &format!("bare-{version}"), port, bare);
        assert!(error.to_ascii_lowercase().contains("alert") || error.contains("EOF"),
            "TLS {version}, no certificate: {error}");
        let mut foreign = with_cert("a.test", &ca, &mallory);
        foreign["max"] = json!(version);
        let error = refused(&mut py, &format!("mallory-{version}"), port, foreign);
        assert!(error.to_ascii_lowercase().contains("alert") || error.contains("EOF"),
            "TLS {version}, a stranger's certificate: {error}");
        let mut good = with_cert("a.test", &ca, &alice);
        good["max"] = json!(version);
        let id = format!("alice-{version}");
        py.connect_ok(&id, port, good);
        let answer = py.get(&id, "/hello.txt");
        assert_eq!(answer["status"], 200, "{answer}");
        assert_eq!(answer["body"], "site a\n");
    }

    // Optional: with and without, both in; the script sees which.
    py.connect_ok("anonymous", port, to("b.test", &ca));
    let dump = py.get("anonymous", "/cgi-bin/env.py");
    assert_eq!(dump["status"], 200, "{dump}\n{}", server.stderr());
    let env = dump["body"].as_str().unwrap();
    assert_eq!(env_value(env, "HTTPS"), Some("on"), "{env}");
    assert_eq!(env_value(env, "REQUEST_SCHEME"), Some("https"), "{env}");
    assert_eq!(env_value(env, "SSL_CLIENT_VERIFY"), Some("NONE"), "{env}");
    assert_eq!(env_value(env, "SSL_CLIENT_S_DN"), None, "{env}");

    py.connect_ok("alice-b", port, with_cert("b.test", &ca, &alice));
    let dump = py.get("alice-b", "/cgi-bin/env.py");
    let env = dump["body"].as_str().unwrap();
    assert_eq!(env_value(env, "HTTPS"), Some("on"), "{env}");
    assert_eq!(env_value(env, "SSL_CLIENT_VERIFY"), Some("SUCCESS"), "{env}");
    let subject = env_value(env, "SSL_CLIENT_S_DN").unwrap_or_default();
    assert!(subject.contains("CN=alice"), "{env}");
    assert!(subject.contains("O=ampd tests"), "{env}");
    let issuer = env_value(env, "SSL_CLIENT_I_DN").unwrap_or_default();
    assert!(issuer.contains("CN=clients CA"), "{env}");
    // A stranger's certificate is not let in even where one is optional: it fails
    // verification (an absent one is what "optional" allows).
    let error = refused(&mut py, "mallory-b", port, with_cert("b.test", &ca, &mallory));
    assert!(!error.is_empty());
    assert_eq!(py.get("anonymous", "/hello.txt")["body"], "site b\n");
});

/// A site that requires client certificates, reached by every other way in: a plain (and
/// h2c) listener by `Host`, by an absolute-form target and over h2c, and TLS whose handshake
/// named another site. None gets its page; with a certificate over TLS it is served. What is
/// checked is `Conn`'s (src/conn/tls_tests.rs has every case): one engine is enough.
#[test]
fn a_client_certificate_site_answers_no_connection_without_one() {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let clients = Ca::new(&root.outside_dir().join("pki"), "clients CA");
    let a = ca.server("a", &["a.test", "admin.test"], KeyKind::EcdsaP256);
    root.file("hello.txt", "site a\n");
    root.outside_file("admin/hello.txt", "the admin page\n");
    let body = format!(
        "{}{}",
        site(&["a.test"], "www", &a, ""),
        site(
            &["admin.test"],
            "admin",
            &a,
            &format!(
                "client_certificates = \"required\"\nclient_ca = \"{}\"",
                clients.cert.display()
            )
        ),
    );
    let config = write_tls_config(
        &root,
        "reactor",
        "[\"127.0.0.1:0 h2c\", \"127.0.0.1:0 tls\"]",
        &body,
    );
    let server = Server::start(Options::config_file(&config));
    let plain = plain_addr(server.ready_line());
    let secure = tls_addr(server.ready_line());

    let by_host = plain_request(plain, "GET", "/hello.txt", "admin.test");
    assert_eq!(by_host.status, 403, "{by_host:?}");
    assert!(!by_host.body_text().contains("admin page"), "{by_host:?}");
    let absolute = plain_request(plain, "GET", "http://admin.test/hello.txt", "a.test");
    assert_eq!(absolute.status, 403, "{absolute:?}");
    let status = |output: std::process::Output| {
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let h2c = curl([
        "-sS",
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version} %{http_code}",
        "-H",
        "Host: admin.test",
        &format!("http://127.0.0.1:{}/hello.txt", plain.port()),
    ]);
    assert_eq!(status(h2c), "2 403");
    let write_out = [
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        "Host: admin.test",
    ];
    let sni_a = curl_https(&ca.cert, "a.test", secure, "/hello.txt", &write_out);
    assert_eq!(status(sni_a), "421");

    let alice = clients.client("alice", "alice");
    let served = curl_https(
        &ca.cert,
        "admin.test",
        secure,
        "/hello.txt",
        &[
            "--cert",
            &alice.cert.display().to_string(),
            "--key",
            &alice.key.display().to_string(),
        ],
    );
    assert_eq!(status(served), "the admin page\n");
    assert_eq!(
        plain_request(plain, "GET", "/hello.txt", "a.test").body_text(),
        "site a\n"
    );
}

/// Writes `from`'s certificate and key over `to`'s files (each by rename: a reload never
/// reads half a file).
fn replace_files(from: &Issued, to: &Issued) {
    for (source, target) in [(&from.cert, &to.cert), (&from.key, &to.key)] {
        let staged = target.with_extension("staged");
        std::fs::copy(source, &staged).expect("stage the new file");
        std::fs::rename(&staged, target).expect("put the new file in place");
    }
}

/// The DNS names of the certificate a new connection to a.test is served.
fn served_names(py: &mut PyTls, port: u16, ca: &Ca, id: &str) -> Value {
    let answer = py.connect_ok(id, port, to("a.test", ca));
    py.close(id);
    answer["sans"].clone()
}

for_each_arch!(fn sighup_swaps_the_certificate(arch) {
    let (root, ca, server, _big) = one_site(arch);
    let port = tls_addr(server.ready_line()).port();
    let pki = root.outside_dir().join("pki");
    let current = Issued { cert: pki.join("a.pem"), key: pki.join("a.key") };
    let mut py = PyTls::start();
    let kept = py.connect_ok("kept", port, to("a.test", &ca));
    assert_eq!(kept["sans"], json!(["a.test", "*.a.test"]), "{kept}");
    assert_eq!(py.get("kept", "/hello.txt")["status"], 200);

    // The same files, a new certificate in them (one more name): new handshakes get it, the
    // open connection goes on.
    let renewed = ca.server("a-renewed", &["a.test", "renewed.a.test"], KeyKind::EcdsaP256);
    replace_files(&renewed, &current);
    server.signal("HUP");
    assert!(server.wait_for_stderr("configuration reloaded", WAIT), "{}", server.stderr());
    let new_names = json!(["a.test", "renewed.a.test"]);
    let mut seen = Value::Null;
    // Under mp each worker takes the new generation when its master tells it: bounded wait.
    assert!(eventually(WAIT, || {
        seen = served_names(&mut py, port, &ca, "new");
        seen == new_names
    }), "a new connection still gets {seen}\n{}", server.stderr());
    // Every thread and loop takes it up, not only the first to accept after the signal
    // (under mt, a thread asleep in the waiting room accepts next).
    for attempt in 0..8 {
        let names = served_names(&mut py, port, &ca, &format!("new-{attempt}"));
        assert_eq!(names, new_names, "a later new connection after the reload");
    }
    let again = py.get("kept", "/hello.txt");
    assert_eq!(again["status"], 200, "the kept-alive connection after the reload: {again}");
    assert_eq!(again["body"], "hello over tls\n");

    // A key that does not match the certificate: the reload is refused and names the file; the
    // renewed certificate keeps serving.
    new_key(&current.key, KeyKind::EcdsaP256);
    server.signal("HUP");
    assert!(server.wait_for_stderr("reload rejected", WAIT), "{}", server.stderr());
    let stderr = server.stderr();
    let rejection = stderr.lines().find(|line| line.contains("reload rejected")).unwrap();
    assert!(rejection.contains(&current.key.display().to_string())
        || rejection.contains(&current.cert.display().to_string()),
        "the rejection names neither file: {rejection}");
    for attempt in 0..4 {
        let names = served_names(&mut py, port, &ca, &format!("after-bad-{attempt}"));
        assert_eq!(names, new_names, "after the rejected reload");
    }
    assert_eq!(py.get("kept", "/hello.txt")["status"], 200);
});

/// `ampd check` and `ampd run` read certificates before they serve, whatever the engine: one
/// engine is enough.
#[test]
fn a_bad_key_is_refused_at_start_naming_the_file() {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let a = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    let pki = root.outside_dir().join("pki");
    let cases = [
        (
            "a mismatched key",
            Issued {
                cert: a.cert.clone(),
                key: new_key(&pki.join("other.key"), KeyKind::EcdsaP256),
            },
            "other.key",
        ),
        (
            "a key that is not PEM",
            Issued {
                cert: a.cert.clone(),
                key: root.outside_file("pki/garbage.key", "not a key\n"),
            },
            "garbage.key",
        ),
        (
            "a certificate file that is missing",
            Issued {
                cert: pki.join("missing.pem"),
                key: a.key.clone(),
            },
            "missing.pem",
        ),
    ];
    for (what, pair, named) in cases {
        let config = write_tls_config(
            &root,
            "reactor",
            TLS_ONLY,
            &site(&["a.test"], "www", &pair, ""),
        );
        let file = config.display().to_string();
        let (code, _out, err) = run_to_exit(&["check", &file]);
        assert_eq!(code, Some(1), "check, {what}: {err}");
        assert!(
            err.contains(named),
            "check, {what}: the message does not name {named}: {err}"
        );
        let (code, _out, err) = run_to_exit(&["run", "-c", &file]);
        assert_ne!(code, Some(0), "run, {what}: {err}");
        assert!(
            err.contains(named),
            "run, {what}: the message does not name {named}: {err}"
        );
    }
    // And the good pair passes.
    let config = write_tls_config(
        &root,
        "reactor",
        TLS_ONLY,
        &site(&["a.test"], "www", &a, ""),
    );
    let (code, out, err) = run_to_exit(&["check", &config.display().to_string()]);
    assert_eq!(code, Some(0), "{out}{err}");
}

/// No certificate for the name asked and no `[tls] certificate`: the default site's own
/// certificate answers. Which certificate a hello gets is decided before any engine is
/// involved (`TlsContext::config_for`), so one engine is enough.
#[test]
fn the_default_sites_certificate_answers_unknown_names() {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let a = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    let b = ca.server("b", &["b.test"], KeyKind::Rsa2048);
    root.outside_file("b/hello.txt", "site b\n");
    root.file("hello.txt", "site a\n");
    let body = format!(
        "{}{}",
        site(&["a.test"], "www", &a, ""),
        site(&["b.test"], "b", &b, "default = true")
    );
    let config = write_tls_config(&root, "reactor", TLS_ONLY, &body);
    let server = Server::start(Options::config_file(&config));
    let port = tls_addr(server.ready_line()).port();
    let mut py = PyTls::start();
    let mut unknown = to("unknown.test", &ca);
    unknown["check_hostname"] = json!(false);
    let answer = py.connect_ok("unknown", port, unknown);
    assert_eq!(answer["subject_cn"], "b.test", "{answer}");
    assert_eq!(py.get("unknown", "/hello.txt")["body"], "site b\n");
    let nameless = py.connect_ok("nameless", port, json!({"cafile": ca.cert}));
    assert_eq!(nameless["subject_cn"], "b.test", "{nameless}");
}

/// Headless Chromium: `--dump-dom` prints the DOM after scripts ran.
fn chromium_dump_dom(url: &str, resolve: &str, profile: &Path) -> (Option<i32>, String, String) {
    let output = Command::new("timeout")
        .args([
            "-k",
            "5",
            "90",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--ignore-certificate-errors",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--host-resolver-rules={resolve}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", url])
        .stdin(Stdio::null())
        .output()
        .expect("chromium must be installed (apt-get install chromium)");
    (
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

default_arch!(fn chromium_renders_a_page_over_https(arch) {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let a = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    // The page's script comes in a second request over TLS and writes into the page.
    root.file("index.html", "<!doctype html><html><head><title>ampd tls</title></head>\
        <body><p id=\"static\">served over tls</p><p id=\"out\">script did not run</p>\
        <script src=\"/app.js\"></script></body></html>\n");
    root.file("app.js", "document.getElementById('out').textContent = \
        'script ran over ' + location.protocol + ' ' + (6 * 7);\n");
    let config = write_tls_config(&root, arch, TLS_ONLY, &site(&["a.test"], "www", &a, ""));
    let server = Server::start(Options::config_file(&config));
    let port = tls_addr(server.ready_line()).port();
    let profile = root.outside_dir().join("chromium-profile");
    let (code, dom, err) = chromium_dump_dom(
        &format!("https://a.test:{port}/"),
        "MAP a.test 127.0.0.1",
        &profile,
    );
    assert_eq!(code, Some(0), "chromium: {err}\n{}", server.stderr());
    assert!(dom.contains("<p id=\"static\">served over tls</p>"), "{dom}\n{err}");
    assert!(dom.contains("<p id=\"out\">script ran over https: 42</p>"), "{dom}\n{err}");
});

/// The harness's certificates are what the tests above take them for (checked by OpenSSL, not
/// by ampd): chains that verify for their purpose, the key types asked for, and a fresh key
/// that matches nothing.
#[test]
fn the_test_certificates_are_what_they_claim() {
    let root = TempRoot::new();
    let ca = test_ca(&root);
    let clients = Ca::new(&root.outside_dir().join("pki"), "clients CA");
    let ecdsa = ca.server("a", &["a.test", "*.a.test"], KeyKind::EcdsaP256);
    let rsa = ca.server("b", &["b.test"], KeyKind::Rsa2048);
    let alice = clients.client("alice", "alice");
    let openssl = |args: &[&str]| {
        let output = Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl");
        (
            output.status.success(),
            text(&output.stdout) + &text(&output.stderr),
        )
    };
    let path = |path: &Path| path.display().to_string();
    for (issued, by, purpose) in [
        (&ecdsa, &ca, "sslserver"),
        (&rsa, &ca, "sslserver"),
        (&alice, &clients, "sslclient"),
    ] {
        let (ok, said) = openssl(&[
            "verify",
            "-purpose",
            purpose,
            "-CAfile",
            &path(&by.cert),
            &path(&issued.cert),
        ]);
        assert!(ok, "{said}");
    }
    let (ok, said) = openssl(&["verify", "-CAfile", &path(&ca.cert), &path(&alice.cert)]);
    assert!(
        !ok,
        "a client certificate verified against the wrong CA: {said}"
    );
    let (_, shown) = openssl(&["x509", "-noout", "-text", "-in", &path(&ecdsa.cert)]);
    assert!(
        shown.contains("id-ecPublicKey") && shown.contains("P-256"),
        "{shown}"
    );
    assert!(shown.contains("DNS:a.test, DNS:*.a.test"), "{shown}");
    let (_, shown) = openssl(&["x509", "-noout", "-text", "-in", &path(&rsa.cert)]);
    assert!(
        shown.contains("rsaEncryption") && shown.contains("2048 bit"),
        "{shown}"
    );
    let public = |args: &[&str]| openssl(args).1;
    let certified = public(&["x509", "-noout", "-pubkey", "-in", &path(&ecdsa.cert)]);
    assert_eq!(
        certified,
        public(&["pkey", "-pubout", "-in", &path(&ecdsa.key)])
    );
    let other = new_key(
        &root.outside_dir().join("pki/other.key"),
        KeyKind::EcdsaP256,
    );
    assert_ne!(
        certified,
        public(&["pkey", "-pubout", "-in", &path(&other)])
    );
}
