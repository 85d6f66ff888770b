//! HTTP/2 under every engine, with real clients: curl `--http2` over TLS (ALPN h2) and
//! `--http2-prior-knowledge` on an `h2c` listener, which still serves HTTP/1.1; Python's `h2`
//! library (tests/fixtures/h2_client.py, which checks frame sizes, windows and fields itself):
//! fifty streams at once on one connection, a several-MiB file through a 4 KiB window (over h2c,
//! where file DATA may go out by sendfile, and over TLS), request bodies to a CGI script with
//! and without content-length, Range, If-None-Match, a precompressed variant, the status and
//! health handlers, 404, HEAD, a stream reset mid-download with the connection going on, and a
//! SIGTERM that lets an open stream finish after GOAWAY, an idle connection ended by GOAWAY at
//! `keepalive_timeout`; `Upgrade: h2c` answered as HTTP/1.1; proxied and CGI streams served
//! beside a stream whose upstream never answers, each on its own upstream link (a reset closes
//! only its link, the connection's close every one), `max_upstream_streams` holding the
//! streams past it until a link is free, a stream retried on the next server over its link;
//! headless Chromium loading a page of 120 resources over one connection (the DevTools
//! protocol names the connection of every response, tests/fixtures/chromium_page.py).

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use support::bulk::sha256;
use support::h2::{field, h2_client, h2_client_ok, PYTHON};
use support::root::pattern_bytes;
use support::scripts::install_cgi;
use support::tls::{
    curl_https, eventually, listeners, tls_addr, write_tls_config, Ca, Issued, KeyKind,
};
use support::upstream::{RawUpstream, Reply};
use support::*;

const H2C: &str = "\"127.0.0.1:0 h2c\"";
/// A plain listener first, then an h2c one (the ready line names them in this order).
const PLAIN_AND_H2C: &str = "[\"127.0.0.1:0\", \"127.0.0.1:0 h2c\"]";
const TLS_ONLY: &str = "\"127.0.0.1:0 tls\"";
/// Several MiB, not a multiple of any frame or window size.
const BIG: usize = (5 << 20) + 12_345;
/// How many small files the many-streams test asks for at once.
const STREAMS: usize = 50;
const WAIT: Duration = Duration::from_secs(10);

/// The locations every site here has: status and health handlers and a CGI directory.
const LOCATIONS: &str = "\n[[site.location]]\npath = \"/status\"\nexact = true\n\
    handler = \"status\"\n\n[[site.location]]\npath = \"/health\"\nexact = true\n\
    handler = \"health\"\n\n[[site.location]]\npath = \"/cgi-bin/\"\nhandler = \"cgi\"\n\
    max_body = \"20MiB\"\n";

/// The files every test serves: hello.txt, big.bin (BIG pattern bytes), f0..f49.txt (each
/// different), style.css with a precompressed style.css.gz, and the CGI scripts in cgi-bin.
fn build_root() -> (TempRoot, Vec<u8>) {
    let root = TempRoot::new();
    root.file("hello.txt", "hello over http/2\n");
    let big = pattern_bytes(BIG, 11);
    root.file("big.bin", &big);
    for index in 0..STREAMS {
        root.file(&format!("f{index}.txt"), small_file(index));
    }
    root.file("style.css", "body { color: green; } /* identity */\n");
    root.file("style.css.gz", b"\x1f\x8b pretend gzip bytes of style.css");
    install_cgi(&root, "cgi-bin");
    (root, big)
}

/// f{index}.txt: a different length and text for each index.
fn small_file(index: usize) -> String {
    format!("small file {index}: {}\n", "x".repeat(index * 37))
}

/// A site serving www on `listen` (plain or h2c), with LOCATIONS.
fn start_plain(root: &TempRoot, arch: &str, listen: &str) -> Server {
    start_plain_with(root, arch, listen, "")
}

/// The same with `more` server-wide keys first.
fn start_plain_with(root: &TempRoot, arch: &str, listen: &str, more: &str) -> Server {
    let body = format!("{more}\n[[site]]\nroot = \"www\"\n{LOCATIONS}");
    let config = write_tls_config(root, arch, listen, &body);
    Server::start(Options::config_file(&config))
}

/// a.test (ECDSA P-256) on a TLS listener, with LOCATIONS and then `more` server-wide keys.
fn start_tls(root: &TempRoot, arch: &str, more: &str) -> (Ca, Server) {
    let ca = Ca::new(&root.outside_dir().join("pki"), "ampd test CA");
    let a: Issued = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    let body = format!(
        "{more}\n[[site]]\nserver_names = [\"a.test\"]\nroot = \"www\"\ncertificate = \"{}\"\n\
         certificate_key = \"{}\"\n{LOCATIONS}",
        a.cert.display(),
        a.key.display()
    );
    let config = write_tls_config(root, arch, TLS_ONLY, &body);
    let server = Server::start(Options::config_file(&config));
    (ca, server)
}

/// The n-th listener the ready line names.
fn listener(server: &Server, index: usize) -> SocketAddr {
    let all = listeners(server.ready_line());
    assert!(
        all.len() > index,
        "the ready line names {} listeners: {}",
        all.len(),
        server.ready_line()
    );
    all[index].1
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An h2_client.py command on h2c `addr` for `requests`.
fn h2c(addr: SocketAddr, requests: Value) -> Value {
    json!({"port": addr.port(), "requests": requests})
}

/// The one answer of a single-request exchange, which must have ended normally.
fn only(answer: &Value) -> &Value {
    let response = &answer["responses"][0];
    assert_eq!(response["ended"], true, "{answer}");
    response
}

for_each_arch!(fn curl_negotiates_h2_over_tls(arch) {
    let (root, big) = build_root();
    let (ca, server) = start_tls(&root, arch, "");
    let addr = tls_addr(server.ready_line());

    let small = curl_https(&ca.cert, "a.test", addr, "/hello.txt",
        &["--http2", "-v", "-w", "\n%{http_version}"]);
    let (out, err) = (text(&small.stdout), text(&small.stderr));
    assert!(small.status.success(), "{err}\n{}", server.stderr());
    assert!(err.contains("ALPN: server accepted h2"), "{err}");
    assert_eq!(out, "hello over http/2\n\n2", "{err}");

    let saved = root.outside_dir().join("big.download");
    let download = curl_https(&ca.cert, "a.test", addr, "/big.bin",
        &["--http2", "-o", &saved.display().to_string(), "-w", "%{http_code} %{http_version}"]);
    assert_eq!(text(&download.stdout), "200 2", "{}", text(&download.stderr));
    let got = std::fs::read(&saved).expect("read the download");
    assert_eq!(got.len(), big.len());
    assert!(got == big, "the bytes downloaded over HTTP/2 differ from the file");

    let head = curl_https(&ca.cert, "a.test", addr, "/big.bin", &["--http2", "-I"]);
    let head = text(&head.stdout);
    assert!(head.starts_with("HTTP/2 200"), "{head}");
    assert!(head.contains(&format!("content-length: {BIG}\r\n")), "{head}");

    // The same listener still speaks HTTP/1.1 to a client that offers only that.
    let old = curl_https(&ca.cert, "a.test", addr, "/hello.txt",
        &["--http1.1", "-v", "-w", "\n%{http_version}"]);
    assert_eq!(text(&old.stdout), "hello over http/2\n\n1.1", "{}", text(&old.stderr));
    assert!(text(&old.stderr).contains("ALPN: server accepted http/1.1"), "{}", text(&old.stderr));
});

/// `[http2] enabled = false`: ALPN offers only http/1.1, so curl's `--http2` gets HTTP/1.1.
/// What ALPN offers is decided by the TLS context before any engine is involved: one engine.
#[test]
fn http2_disabled_offers_only_http11() {
    let (root, _big) = build_root();
    let (ca, server) = start_tls(&root, "reactor", "[http2]\nenabled = false\n");
    let addr = tls_addr(server.ready_line());
    let answer = curl_https(
        &ca.cert,
        "a.test",
        addr,
        "/hello.txt",
        &["--http2", "-v", "-w", "\n%{http_version}"],
    );
    let err = text(&answer.stderr);
    assert_eq!(text(&answer.stdout), "hello over http/2\n\n1.1", "{err}");
    assert!(!err.contains("ALPN: server accepted h2"), "{err}");
}

for_each_arch!(fn prior_knowledge_on_h2c_beside_http11(arch) {
    let (root, _big) = build_root();
    let server = start_plain(&root, arch, PLAIN_AND_H2C);
    let all = listeners(server.ready_line());
    assert_eq!(all.len(), 2, "both listeners in the ready line: {}", server.ready_line());
    assert!(all.iter().all(|(tls, _)| !tls), "{}", server.ready_line());
    let (plain, h2c) = (all[0].1, all[1].1);

    let answer = curl([
        "-sS", "--http2-prior-knowledge", "-w", "\n%{http_version}",
        &format!("http://{h2c}/hello.txt"),
    ]);
    assert_eq!(text(&answer.stdout), "hello over http/2\n\n2",
        "{}\n{}", text(&answer.stderr), server.stderr());

    // The h2c listener still serves HTTP/1.1, keep-alive included.
    let mut conn = Conn::open(h2c);
    for _ in 0..2 {
        let response = conn.get("/hello.txt", &[]);
        assert_eq!(response.version, "HTTP/1.1");
        assert_eq!(response.status, 200);
        assert_eq!(response.body_text(), "hello over http/2\n");
    }

    // A plain listener does not take the preface: an HTTP/1.1 answer (505), then close.
    let refused = send_raw(plain, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    assert!(text(&refused).starts_with("HTTP/1.1 505 "), "{}", text(&refused));
});

for_each_arch!(fn fifty_streams_at_once_on_one_connection(arch) {
    let (root, _big) = build_root();
    let server = start_plain(&root, arch, H2C);
    let requests: Vec<Value> = (0..STREAMS)
        .map(|index| json!({"path": format!("/f{index}.txt")}))
        .collect();
    let answer = h2_client_ok(h2c(server.addr(), json!(requests)));
    let advertised = answer["server_settings"]["MAX_CONCURRENT_STREAMS"].as_u64();
    assert!(advertised.is_none_or(|most| most >= STREAMS as u64), "{answer}");
    let responses = answer["responses"].as_array().expect("responses");
    assert_eq!(responses.len(), STREAMS);
    for (index, response) in responses.iter().enumerate() {
        let expected = small_file(index);
        assert_eq!(response["status"], 200, "f{index}: {response}");
        assert_eq!(response["ended"], true, "f{index}: {response}");
        assert_eq!(response["body"], expected.as_str(), "f{index}: {response}");
        assert_eq!(field(response, "content-length"), Some(expected.len().to_string().as_str()));
        assert_eq!(field(response, "content-type"), Some("text/plain; charset=utf-8"));
    }
    assert!(answer["goaway"].is_null(), "{answer}");
});

/// Checks one download of big.bin through a 4 KiB window.
fn assert_small_window_download(answer: &Value, big_sha: &str) {
    let response = only(answer);
    assert_eq!(response["status"], 200, "{response}");
    assert_eq!(response["body_len"], BIG, "{response}");
    assert_eq!(
        response["body_sha256"], big_sha,
        "the bytes differ from the file"
    );
    // No DATA frame larger than what the window allowed; our own account never went below 0.
    assert!(
        response["largest_data_frame"].as_u64().unwrap() <= 4096,
        "{response}"
    );
    assert!(answer["lowest_window"].as_i64().unwrap() >= 0, "{answer}");
    assert!(answer["flow_error"].is_null(), "{answer}");
    assert!(
        response["data_frames"].as_u64().unwrap() >= (BIG / 4096) as u64,
        "{response}"
    );
}

for_each_arch!(fn large_file_through_a_small_window(arch) {
    let (root, big) = build_root();
    let big_sha = sha256(&big);
    let server = start_plain(&root, arch, H2C);
    let mut command = h2c(server.addr(), json!([{"path": "/big.bin"}]));
    command["settings"] = json!({"initial_window_size": 4096});
    command["timeout"] = json!(120);
    assert_small_window_download(&h2_client_ok(command), &big_sha);
    drop(server);

    // Over TLS too (each frame is read and encrypted, not sent from the file).
    let (ca, server) = start_tls(&root, arch, "");
    let command = json!({"port": tls_addr(server.ready_line()).port(),
        "tls": {"server_name": "a.test", "cafile": ca.cert},
        "settings": {"initial_window_size": 4096}, "timeout": 120,
        "requests": [{"path": "/big.bin"}]});
    let answer = h2_client_ok(command);
    assert_eq!(answer["alpn"], "h2", "{answer}");
    assert_small_window_download(&answer, &big_sha);
});

for_each_arch!(fn request_bodies_reach_a_cgi_script(arch) {
    let (root, _big) = build_root();
    let server = start_plain(&root, arch, H2C);
    let length = (1 << 20) + 4321;
    // Both at once on one connection; well within the 20 s body and header timeouts: a stream
    // left waiting for one of them shows as a failure here, not as a slow pass.
    let mut command = h2c(server.addr(), json!([
        {"method": "POST", "path": "/cgi-bin/echo.py", "body_len": length,
         "headers": [["content-type", "application/octet-stream"]]},
        {"method": "POST", "path": "/cgi-bin/echo.py", "body_len": length,
         "content_length": false},
    ]));
    command["timeout"] = json!(15);
    let answer = h2_client_ok(command);
    for (which, response) in answer["responses"].as_array().unwrap().iter().enumerate() {
        assert_eq!(response["status"], 200, "request {which}: {response}\n{}", server.stderr());
        assert_eq!(response["ended"], true, "request {which}: {response}");
        assert_eq!(response["sent_len"], length);
        assert_eq!(response["body_len"], length, "request {which}: {response}");
        assert_eq!(response["body_sha256"], response["sent_sha256"],
            "request {which}: the echo differs from the body sent");
        // Without content-length the body comes as DATA until END_STREAM; the script still
        // sees its exact length (as a chunked HTTP/1.1 body does).
        assert_eq!(field(response, "x-content-length"), Some(length.to_string().as_str()),
            "request {which}: {response}");
    }
});

default_arch!(fn ranges_validators_variants_handlers_and_head(arch) {
    let (root, big) = build_root();
    let server = start_plain(&root, arch, H2C);
    let addr = server.addr();
    let first = h2_client_ok(h2c(addr, json!([{"path": "/hello.txt"}])));
    let etag = field(only(&first), "etag").expect("an ETag").to_owned();

    let answer = h2_client_ok(h2c(addr, json!([
        {"path": "/big.bin", "headers": [["range", "bytes=1000000-1000099"]]},
        {"path": "/hello.txt", "headers": [["if-none-match", etag]]},
        {"path": "/style.css", "headers": [["accept-encoding", "gzip"]]},
        {"path": "/status", "keep_body": true},
        {"path": "/health"},
        {"path": "/no-such-file.txt"},
        {"method": "HEAD", "path": "/big.bin"},
    ])));
    let responses = answer["responses"].as_array().expect("responses");
    for response in responses {
        assert_eq!(response["ended"], true, "{response}");
    }

    let range = &responses[0];
    assert_eq!(range["status"], 206, "{range}");
    assert_eq!(field(range, "content-range"), Some(format!("bytes 1000000-1000099/{BIG}").as_str()));
    assert_eq!(range["body_len"], 100);
    assert_eq!(range["body_sha256"], sha256(&big[1_000_000..1_000_100]), "range bytes differ");

    let not_modified = &responses[1];
    assert_eq!(not_modified["status"], 304, "{not_modified}");
    assert_eq!(not_modified["body_len"], 0, "{not_modified}");
    assert_eq!(field(not_modified, "etag"), Some(etag.as_str()));

    let variant = &responses[2];
    assert_eq!(variant["status"], 200, "{variant}");
    assert_eq!(field(variant, "content-encoding"), Some("gzip"), "{variant}");
    assert_eq!(variant["body_sha256"], sha256(b"\x1f\x8b pretend gzip bytes of style.css"));
    let vary = field(variant, "vary").unwrap_or_default().to_ascii_lowercase();
    assert!(vary.contains("accept-encoding"), "{variant}");

    let status = &responses[3];
    assert_eq!(status["status"], 200, "{status}");
    let metrics = status["body"].as_str().unwrap_or_default();
    assert!(metrics.contains("ampd_requests_total"), "{metrics}");

    let health = &responses[4];
    assert_eq!(health["status"], 200, "{health}");
    assert!(health["body"].as_str().unwrap_or_default().starts_with("ok"), "{health}");

    assert_eq!(responses[5]["status"], 404, "{}", responses[5]);

    let head = &responses[6];
    assert_eq!(head["status"], 200, "{head}");
    assert_eq!(field(head, "content-length"), Some(BIG.to_string().as_str()), "{head}");
    assert_eq!(head["data_frames"], 0, "a HEAD answer has no DATA: {head}");
    // No connection-specific field crosses into HTTP/2 (RFC 9113 §8.2.2); h2 refuses them too.
    for response in responses {
        for name in ["connection", "keep-alive", "transfer-encoding", "upgrade"] {
            assert_eq!(field(response, name), None, "{name}: {response}");
        }
    }
});

for_each_arch!(fn a_reset_stream_leaves_the_connection_serving(arch) {
    let (root, big) = build_root();
    let server = start_plain(&root, arch, H2C);
    // big.bin reset after 100 000 bytes; then, on the same connection, hello.txt and big.bin
    // whole: the reset stream's unsent DATA must not hold the connection's window.
    let answer = h2_client_ok(h2c(server.addr(), json!([
        {"path": "/big.bin", "reset_after": 100_000},
        {"path": "/hello.txt", "after": 0},
        {"path": "/big.bin", "after": 1},
    ])));
    let responses = answer["responses"].as_array().unwrap();
    assert_eq!(responses[0]["reset_by_us"], true, "{answer}");
    assert!(responses[0]["body_len"].as_u64().unwrap() < BIG as u64, "{answer}");
    assert_eq!(responses[1]["status"], 200, "{answer}");
    assert_eq!(responses[1]["body"], "hello over http/2\n");
    assert_eq!(responses[2]["status"], 200, "{answer}");
    assert_eq!(responses[2]["body_sha256"], sha256(&big));
    assert!(answer["goaway"].is_null(), "{answer}");
    // The server still serves everyone else.
    assert_eq!(get(server.addr(), "/hello.txt").status, 200);
});

for_each_arch!(fn sigterm_sends_goaway_and_lets_the_open_stream_finish(arch) {
    let (root, big) = build_root();
    let mut server = start_plain(&root, arch, H2C);
    // A window of 16 KiB keeps big.bin in flight for many round trips: the signal (sent by the
    // client once the first DATA arrived) lands while the stream is open.
    let answer = h2_client(json!({"port": server.addr().port(),
        "settings": {"initial_window_size": 16384}, "timeout": 60,
        "requests": [{"path": "/big.bin"}],
        "signal": {"pid": server.pid(), "name": "TERM", "after_bytes": 1},
        "await_close": true}));
    assert_eq!(answer["ok"], true, "{answer}\n{}", server.stderr());
    let response = only(&answer);
    assert_eq!(response["status"], 200);
    assert_eq!(response["body_sha256"], sha256(&big), "the open stream was cut: {response}");
    let goaway = &answer["goaway"];
    assert_eq!(goaway["error_code"], "NO_ERROR", "{answer}");
    assert!(goaway["last_stream_id"].as_u64().unwrap() >= 1, "{answer}");
    assert_eq!(answer["closed"], true, "the connection stays open after its last stream: {answer}");
    assert_eq!(server.wait_exit(WAIT), Some(0), "{}", server.stderr());
});

for_each_arch!(fn an_idle_connection_gets_goaway_then_close(arch) {
    let (root, _big) = build_root();
    let server = start_plain_with(&root, arch, H2C, "[limits]\nkeepalive_timeout = \"1s\"\n");
    // One answered stream, then nothing: past keepalive_timeout the server says GOAWAY
    // NO_ERROR (the last stream it took: 1) and closes.
    let mut command = h2c(server.addr(), json!([{"path": "/hello.txt"}]));
    command["await_close"] = json!(true);
    command["timeout"] = json!(15);
    let answer = h2_client_ok(command);
    assert_eq!(only(&answer)["body"], "hello over http/2\n");
    assert_eq!(answer["goaway"]["error_code"], "NO_ERROR", "{answer}");
    assert_eq!(answer["goaway"]["last_stream_id"], 1, "{answer}");
    assert_eq!(answer["closed"], true, "{answer}");
});

/// An upstream whose `/api/slow…` requests are answered by `slow`, every other one at once with
/// `fast\n`; and a server on an h2c listener passing `/api/` to it, with LOCATIONS (CGI) and
/// then `http2` keys of `[http2]`.
fn start_proxy(root: &TempRoot, arch: &str, slow: Reply, http2: &str) -> (RawUpstream, Server) {
    let upstream = RawUpstream::start(move |seen| {
        if seen.target.starts_with("/api/slow") {
            slow.clone()
        } else {
            Reply::ok("fast", "fast\n")
        }
    });
    let body = format!(
        "[http2]\n{http2}\n\n{}\n[[site]]\nroot = \"www\"\n{LOCATIONS}\n{}",
        support::proxy::pool("api", &[upstream.addr()], ""),
        support::proxy::location("/api/", "api", ""),
    );
    let config = write_tls_config(root, arch, H2C, &body);
    (upstream, Server::start(Options::config_file(&config)))
}

for_each_arch!(fn streams_beside_a_silent_upstream_get_their_own_links(arch) {
    let (root, _big) = build_root();
    let (upstream, server) = start_proxy(&root, arch, Reply::Never, "");
    let go = root.outside_dir().join("go");
    // Stream 1's and stream 3's upstream never answers; stream 5 (proxied) and stream 7 (CGI)
    // must be answered all the same. Then stream 1 is reset, and the client holds the
    // connection open (stream 3 still waiting) until `go` exists.
    let mut command = h2c(server.addr(), json!([
        {"path": "/api/slow/1", "reset_when": [2, 3]},
        {"path": "/api/slow/3", "wait": false},
        {"path": "/api/fast"},
        {"path": "/cgi-bin/hello.cgi"},
    ]));
    command["timeout"] = json!(15);
    command["hold_until"] = json!(go);
    let client = std::thread::spawn(move || h2_client(command));
    let seen = upstream.wait_requests(3, WAIT);
    let mut targets: Vec<&str> = seen.iter().map(|request| request.target.as_str()).collect();
    targets.sort_unstable();
    assert_eq!(targets, ["/api/fast", "/api/slow/1", "/api/slow/3"],
        "every proxied stream reaches the upstream at once");
    // The reset closes stream 1's link, and only it: stream 3's stays open while the client
    // does, and the proxied answer's goes back to the pool.
    assert!(upstream.wait_closed(1, WAIT), "the reset stream's upstream link stays open\n{}",
        server.stderr());
    assert_eq!(upstream.connections_closed(), 1, "a reset closes only its stream's link");
    std::fs::write(&go, "").expect("write go");
    let answer = client.join().expect("the client thread");
    assert_eq!(answer["ok"], true, "{answer}
{}", server.stderr());
    let responses = answer["responses"].as_array().unwrap();
    assert_eq!(responses[0]["reset_by_us"], true, "{answer}");
    assert_eq!(responses[1]["ended"], false, "{answer}");
    assert_eq!(responses[2]["status"], 200, "{answer}");
    assert_eq!(responses[2]["body"], "fast\n", "{answer}");
    assert_eq!(responses[3]["status"], 200, "{answer}");
    let script = responses[3]["body"].as_str().unwrap_or_default();
    assert!(script.contains("SCRIPT_NAME=/cgi-bin/hello.cgi"), "{answer}");
    // The client's close ends every link its streams still held: stream 3's.
    assert!(upstream.wait_closed(2, WAIT), "a closed connection's upstream link stays open\n{}",
        server.stderr());
    // The server goes on serving.
    assert_eq!(get(server.addr(), "/hello.txt").status, 200);
});

/// `max_upstream_streams = 1`: the second proxied stream waits for the first one's link, and
/// gets the same upstream connection after it (kept alive, handed on in request order).
#[test]
fn max_upstream_streams_holds_the_streams_past_it() {
    let (root, _big) = build_root();
    let slow = Reply::Delay(
        Duration::from_millis(300),
        Box::new(Reply::ok("slow", "slow\n")),
    );
    let (upstream, server) = start_proxy(&root, "amped", slow, "max_upstream_streams = 1");
    let answer = h2_client_ok(h2c(
        server.addr(),
        json!([
            {"path": "/api/slow"},
            {"path": "/api/fast"},
        ]),
    ));
    let responses = answer["responses"].as_array().unwrap();
    assert_eq!(responses[0]["body"], "slow\n", "{answer}");
    assert_eq!(responses[1]["body"], "fast\n", "{answer}");
    let ended = |at: usize| responses[at]["ended_at"].as_f64().expect("ended_at");
    assert!(
        ended(1) >= ended(0),
        "the second stream did not wait for the link: {answer}"
    );
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        (seen[0].target.as_str(), seen[1].target.as_str()),
        ("/api/slow", "/api/fast")
    );
    assert_eq!(
        seen[0].connection, seen[1].connection,
        "one link, handed on: {seen:?}"
    );
}

/// A stream whose server refuses the connection is retried on the next server over its own
/// link: two streams, so that round-robin starts one of them at the refusing server.
#[test]
fn a_stream_retries_on_the_next_server_over_its_own_link() {
    let (root, _big) = build_root();
    let upstream = RawUpstream::answering("good", "good\n");
    let servers = [support::proxy::refusing_address(), upstream.addr()];
    let body = format!(
        "{}\n[[site]]\nroot = \"www\"\n{LOCATIONS}\n{}",
        support::proxy::pool("api", &servers, "tries = 2"),
        support::proxy::location("/api/", "api", ""),
    );
    let config = write_tls_config(&root, "amped", H2C, &body);
    let server = Server::start(Options::config_file(&config));
    let mut command = h2c(
        server.addr(),
        json!([{"path": "/api/a"}, {"path": "/api/b"}]),
    );
    command["timeout"] = json!(10);
    let answer = h2_client(command);
    assert_eq!(answer["ok"], true, "{answer}\n{}", server.stderr());
    for response in answer["responses"].as_array().unwrap() {
        assert_eq!(response["body"], "good\n", "{answer}");
    }
}

/// `Upgrade: h2c` (RFC 7540 §3.2, removed by RFC 9113) is not honoured: the request is
/// answered as HTTP/1.1 and the connection goes on in HTTP/1.1.
fn assert_upgrade_ignored(addr: SocketAddr) {
    let mut conn = Conn::open(addr);
    conn.send(
        "GET /hello.txt HTTP/1.1\r\nHost: test\r\nConnection: Upgrade, HTTP2-Settings\r\n\
         Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
    );
    let response = conn.read_response("GET");
    assert_eq!(response.version, "HTTP/1.1", "{response:?}");
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.body_text(), "hello over http/2\n");
    assert!(!response.has_header("upgrade"), "{response:?}");
    let again = conn.get("/hello.txt", &[]);
    assert_eq!(
        (again.version.as_str(), again.status),
        ("HTTP/1.1", 200),
        "{again:?}"
    );
}

default_arch!(fn upgrade_h2c_is_answered_as_http11(arch) {
    let (root, _big) = build_root();
    let server = start_plain(&root, arch, PLAIN_AND_H2C);
    assert_upgrade_ignored(listener(&server, 0));
    assert_upgrade_ignored(listener(&server, 1));
});

/// The page: 100 images and 20 scripts under /r/, and a script that, on `load`, writes what
/// loaded into #out.
fn write_page(root: &TempRoot) {
    // A 1x1 GIF.
    const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\
        \x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";
    let mut tags = String::new();
    for index in 0..100 {
        root.file(&format!("r/i{index}.gif"), GIF);
        tags.push_str(&format!("<img src=\"/r/i{index}.gif\" alt=\"\">"));
    }
    for index in 0..20 {
        root.file(
            &format!("r/s{index}.js"),
            format!("window.scriptsRun = (window.scriptsRun || 0) + 1; // {index}\n"),
        );
        tags.push_str(&format!("<script src=\"/r/s{index}.js\"></script>"));
    }
    root.file(
        "page.html",
        format!(
        "<!doctype html><html><head><title>120</title></head><body><p id=\"out\">not loaded</p>\
         {tags}<script>window.addEventListener('load', function () {{\
         var images = Array.prototype.filter.call(document.images, function (i) {{\
         return i.complete && i.naturalWidth > 0; }}).length;\
         document.getElementById('out').textContent = 'images ' + images + ' scripts ' + \
         window.scriptsRun; }});</script></body></html>\n"),
    );
}

/// Runs tests/fixtures/chromium_page.py (bounded: its own 60 s and `timeout` 90 s).
fn chromium_page(url: &str, profile: &Path) -> Value {
    let command = json!({"url": url, "resolve": "MAP a.test 127.0.0.1", "profile": profile,
        "expression": "document.getElementById('out').textContent", "timeout": 60});
    let mut child = Command::new("timeout")
        .args(["-k", "5", "90", PYTHON])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chromium_page.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium_page.py");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(command.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().expect("chromium_page.py output");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "chromium_page.py: {}\n{}",
            text(&output.stdout),
            text(&output.stderr)
        )
    })
}

for_each_arch!(fn chromium_loads_120_resources_over_one_connection(arch) {
    let (root, _big) = build_root();
    write_page(&root);
    let log = root.outside_dir().join("access.log");
    let (_ca, server) = start_tls(&root, arch,
        &format!("[log]\naccess = \"{}\"\nformat = \"json\"\n", log.display()));
    let port = tls_addr(server.ready_line()).port();
    let profile = root.outside_dir().join("chromium-profile");
    let answer = chromium_page(&format!("https://a.test:{port}/page.html"), &profile);
    assert_eq!(answer["ok"], true, "{answer}\n{}", server.stderr());
    assert_eq!(answer["value"], "images 100 scripts 20", "{answer}");
    let resources: Vec<&Value> = answer["responses"].as_array().unwrap().iter()
        .filter(|response| response["url"].as_str().unwrap_or_default().contains("/r/"))
        .collect();
    assert_eq!(resources.len(), 120, "{answer}");
    let page = answer["responses"].as_array().unwrap().iter()
        .find(|response| response["url"].as_str().unwrap_or_default().ends_with("/page.html"))
        .unwrap_or_else(|| panic!("no response for the page: {answer}"));
    for response in &resources {
        assert_eq!(response["status"], 200, "{response}");
        assert_eq!(response["protocol"], "h2", "{response}");
        assert_eq!(response["connection_id"], page["connection_id"],
            "a resource came over another connection than the page: {response}\n{page}");
    }
    // The server saw each of them as an HTTP/2 request (its access log, written by a thread).
    let over_h2 = || {
        std::fs::read_to_string(&log).unwrap_or_default().lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry["uri"].as_str().unwrap_or_default().starts_with("/r/")
                && entry["protocol"] == "HTTP/2.0" && entry["status"] == 200)
            .count()
    };
    assert!(eventually(WAIT, || over_h2() == 120), "{} of 120 in the access log as HTTP/2.0:\n{}",
        over_h2(), std::fs::read_to_string(&log).unwrap_or_default());
});
