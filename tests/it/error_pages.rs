//! `error_pages` and `intercept_errors`: a status ampd answers (a static 404, an access
//! 403, a 405, a proxy 502, a FastCGI failure) is served by the page the site or location
//! lists, routed again inside ampd, with the original status (or the stated one); with
//! `intercept_errors` an upstream's or application's own error response is replaced the same
//! way; an error page that fails ends in the built-in page, and the connection stays usable.
//! Routing re-entry through a helper's job and an asynchronous upstream goes through every
//! engine and HTTP/2 (one test); the rest is `Conn`'s and runs on the default engine.

use crate::support;

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use support::flup::PyFastCgi;
use support::h2::{field, h2_client_ok};
use support::http::{build_request, Conn};
use support::proxy::refusing_address;
use support::tls::{listeners, write_tls_config};
use support::upstream::{RawUpstream, Reply};
use support::*;

const PLAIN_AND_H2C: &str = "[\"127.0.0.1:0\", \"127.0.0.1:0 h2c\"]";
const PAGE_404: &str = "<h1>custom not found</h1>\n";
const PAGE_4XX: &str = "<h1>custom client error</h1>\n";
const PAGE_5XX: &str = "<h1>custom server error</h1>\n";
const DENIED: &str = "<h1>go away, politely</h1>\n";

/// The pages, a file, and a site that lists them: `/down/` proxies to a closed port, `/app/`
/// to `upstream` (its errors passed through), `/caught/` to the same upstream with
/// `intercept_errors`, `/private/` denies everyone and answers that with a 200 page, `/loop/`
/// lists a page that does not exist.
fn start(root: &TempRoot, arch: &str, upstream: SocketAddr, log: bool) -> Server {
    root.file("hello.txt", "hello\n");
    root.file("errors/404.html", PAGE_404);
    root.file("errors/4xx.html", PAGE_4XX);
    root.file("errors/50x.html", PAGE_5XX);
    root.file("denied.html", DENIED);
    let log = if log {
        "[log]\naccess = \"access.log\"\nformat = \"common\"\n\n"
    } else {
        ""
    };
    let body = format!(
        r#"
{log}[upstream.down]
servers = ["{down}"]
max_fails = 0

[upstream.app]
servers = ["{upstream}"]
max_fails = 0

[[site]]
root = "www"
error_pages = {{ 404 = "/errors/404.html", "4xx" = "/errors/4xx.html", "5xx" = "/errors/50x.html" }}

[[site.location]]
path = "/down/"
proxy_pass = "http://down"

[[site.location]]
path = "/app/"
proxy_pass = "http://app"

[[site.location]]
path = "/caught/"
proxy_pass = "http://app"
intercept_errors = true

[[site.location]]
path = "/private/"
deny = ["all"]
error_pages = {{ 403 = {{ uri = "/denied.html", status = 200 }} }}

[[site.location]]
path = "/loop/"
error_pages = {{ 404 = "/loop/missing.html" }}
"#,
        down = refusing_address(),
    );
    let config = write_tls_config(root, arch, PLAIN_AND_H2C, &body);
    Server::start(Options::config_file(&config))
}

/// An upstream whose `/app/missing` and `/caught/missing` are its own 404 with its own body.
fn upstream() -> RawUpstream {
    RawUpstream::start(|seen| {
        if seen.target.ends_with("/missing") {
            Reply::raw(
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nupstream said",
            )
        } else {
            Reply::ok("app", "from the app")
        }
    })
}

for_each_arch!(fn a_static_404_and_a_proxy_502_are_served_by_their_pages(arch) {
    let root = TempRoot::new();
    let upstream = upstream();
    let server = start(&root, arch, upstream.addr(), false);
    let addresses = listeners(server.ready_line());
    let mut conn = Conn::open(addresses[0].1);
    // Twice each on one connection: the page's path is cached the second time, and the
    // connection stays usable after each.
    for _ in 0..2 {
        let missing = conn.get("/nothing.html", &[]);
        assert_eq!(missing.status, 404, "{missing:?}\n{}", server.stderr());
        assert_eq!(missing.body_text(), PAGE_404, "{missing:?}");
        assert!(missing.header("content-type").is_some_and(|value| value.starts_with("text/html")), "{missing:?}");
        assert!(!missing.has_header("etag") && !missing.has_header("last-modified"), "{missing:?}");
        conn.send(build_request("GET", "/down/x", &[]));
        let down = conn.read_proxied("GET");
        assert_eq!(down.status, 502, "{down:?}\n{}", server.stderr());
        assert_eq!(down.body_text(), PAGE_5XX, "{down:?}");
        let hello = conn.get("/hello.txt", &[]);
        assert_eq!((hello.status, hello.body_text().as_str()), (200, "hello\n"));
    }

    let requests: Vec<Value> = ["/nothing.html", "/down/x", "/hello.txt"]
        .iter()
        .map(|path| json!({"path": path}))
        .collect();
    let answer = h2_client_ok(json!({"port": addresses[1].1.port(), "requests": requests}));
    let responses = answer["responses"].as_array().expect("responses");
    let statuses: Vec<_> = responses.iter().map(|response| response["status"].clone()).collect();
    assert_eq!(statuses, [404, 502, 200], "{answer}");
    assert_eq!(responses[0]["body"], PAGE_404, "{answer}");
    assert!(field(&responses[0], "content-type").is_some_and(|value| value.starts_with("text/html")), "{answer}");
    assert_eq!(responses[1]["body"], PAGE_5XX, "{answer}");
});

default_arch!(fn the_stated_status_a_405_with_allow_and_head_without_a_body(arch) {
    let root = TempRoot::new();
    let upstream = upstream();
    let server = start(&root, arch, upstream.addr(), false);
    let mut conn = Conn::open(server.addr());

    let denied = conn.get("/private/secret.txt", &[]);
    assert_eq!(denied.status, 200, "{denied:?}");
    assert_eq!(denied.body_text(), DENIED, "{denied:?}");

    // Before any location is known (the method rule): the site's pages, the status's field kept.
    conn.send(build_request("DELETE", "/hello.txt", &[]));
    let refused = conn.read_response("DELETE");
    assert_eq!(refused.status, 405, "{refused:?}");
    assert_eq!(refused.body_text(), PAGE_4XX, "{refused:?}");
    assert_eq!(refused.header("allow"), Some("GET, HEAD, OPTIONS"), "{refused:?}");

    conn.send(build_request("HEAD", "/nothing.html", &[]));
    let head = conn.read_response("HEAD");
    assert_eq!(head.status, 404, "{head:?}");
    assert!(head.body.is_empty(), "{head:?}");
    assert_eq!(
        head.header("content-length"),
        Some(PAGE_404.len().to_string().as_str()),
        "{head:?}"
    );

    // The page is served whole: the request's range and validators are not the page's.
    let whole = conn.get("/nothing.html", &[("Range", "bytes=0-3"), ("If-None-Match", "*")]);
    assert_eq!(whole.status, 404, "{whole:?}");
    assert_eq!(whole.body_text(), PAGE_404, "{whole:?}");
    let hello = conn.get("/hello.txt", &[]);
    assert_eq!(hello.status, 200, "{hello:?}");
});

default_arch!(fn a_post_body_is_discarded_and_the_next_pipelined_request_served(arch) {
    let root = TempRoot::new();
    let upstream = upstream();
    let server = start(&root, arch, upstream.addr(), false);
    let mut conn = Conn::open(server.addr());
    let mut bytes = build_request("POST", "/hello.txt", &[("Content-Length", "11")]);
    bytes.extend_from_slice(b"hello world");
    bytes.extend_from_slice(&build_request("GET", "/hello.txt", &[]));
    conn.send(bytes);
    let refused = conn.read_response("POST");
    assert_eq!(refused.status, 405, "{refused:?}");
    assert_eq!(refused.body_text(), PAGE_4XX, "{refused:?}");
    let next = conn.read_response("GET");
    assert_eq!((next.status, next.body_text().as_str()), (200, "hello\n"), "{next:?}");

    // A proxy location's request whose body was never forwarded: the page, then the close.
    let mut conn = Conn::open(server.addr());
    let mut bytes = build_request("POST", "/down/form", &[("Content-Length", "5")]);
    bytes.extend_from_slice(b"x=1&y");
    conn.send(bytes);
    let down = conn.read_proxied("POST");
    assert_eq!(down.status, 502, "{down:?}");
    assert_eq!(down.body_text(), PAGE_5XX, "{down:?}");
    assert!(conn.closed_within(Duration::from_secs(10)), "the connection ends after it");
});

default_arch!(fn intercept_errors_replaces_an_upstream_error_and_is_off_by_default(arch) {
    let root = TempRoot::new();
    let upstream = upstream();
    let server = start(&root, arch, upstream.addr(), true);
    let mut conn = Conn::open(server.addr());
    for _ in 0..2 {
        conn.send(build_request("GET", "/app/missing", &[]));
        let passed = conn.read_proxied("GET");
        assert_eq!(passed.status, 404, "{passed:?}");
        assert_eq!(passed.body_text(), "upstream said", "off by default: {passed:?}");

        conn.send(build_request("GET", "/caught/missing", &[]));
        let caught = conn.read_proxied("GET");
        assert_eq!(caught.status, 404, "{caught:?}");
        assert_eq!(caught.body_text(), PAGE_404, "{caught:?}");

        conn.send(build_request("GET", "/caught/fine", &[]));
        let fine = conn.read_proxied("GET");
        assert_eq!((fine.status, fine.body_text().as_str()), (200, "from the app"), "{fine:?}");
    }
    // The access log has the status sent: the page's 200 for the stated status.
    let denied = conn.get("/private/x", &[]);
    assert_eq!(denied.status, 200, "{denied:?}");
    drop(conn);
    let mut server = server;
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let log = std::fs::read_to_string(root.outside_dir().join("access.log")).expect("access.log");
    assert!(log.contains("\"GET /caught/missing HTTP/1.1\" 404 "), "{log}");
    assert!(log.contains("\"GET /private/x HTTP/1.1\" 200 "), "{log}");
});

default_arch!(fn an_error_page_that_fails_ends_in_the_built_in_page(arch) {
    let root = TempRoot::new();
    let upstream = upstream();
    let server = start(&root, arch, upstream.addr(), false);
    let mut conn = Conn::open(server.addr());
    for _ in 0..3 {
        let missing = conn.get("/loop/nothing", &[]);
        assert_eq!(missing.status, 404, "{missing:?}");
        assert!(missing.body_text().contains("404 Not Found"), "the built-in page: {missing:?}");
        let hello = conn.get("/hello.txt", &[]);
        assert_eq!(hello.status, 200, "{hello:?}");
    }
});

default_arch!(fn fastcgi_failures_and_intercepted_application_errors_get_pages(arch) {
    let root = TempRoot::new();
    root.file("errors/50x.html", PAGE_5XX);
    let application = PyFastCgi::faults();
    let config = write_config(
        &root,
        arch,
        &format!(
            "[[site]]\nroot = \"www\"\nerror_pages = {{ \"5xx\" = \"/errors/50x.html\" }}\n\n\
             [[site.location]]\npath = \"/errors/\"\n\n\
             [[site.location]]\npath = \"/\"\nfastcgi_pass = \"{0}\"\n\n\
             [[site.location]]\npath = \"/caught/\"\nfastcgi_pass = \"{0}\"\nintercept_errors = true\n",
            application.addr()
        ),
    );
    let server = Server::start(Options::config_file(&config));
    let mut conn = Conn::open(server.addr());
    conn.send(build_request("GET", "/unknown-role", &[]));
    let role = conn.read_proxied("GET");
    assert_eq!(role.status, 502, "{role:?}\n{}", server.stderr());
    assert_eq!(role.body_text(), PAGE_5XX, "{role:?}");

    conn.send(build_request("GET", "/app-error", &[]));
    let passed = conn.read_proxied("GET");
    assert_eq!(passed.status, 500, "{passed:?}");
    assert_eq!(passed.body_text(), "the application failed\n", "{passed:?}");

    conn.send(build_request("GET", "/caught/app-error", &[]));
    let caught = conn.read_proxied("GET");
    assert_eq!(caught.status, 500, "{caught:?}");
    assert_eq!(caught.body_text(), PAGE_5XX, "{caught:?}");

    conn.send(build_request("GET", "/fine", &[]));
    let fine = conn.read_proxied("GET");
    assert_eq!((fine.status, fine.body_text().as_str()), (200, "ok\n"), "{fine:?}");
});

/// `ampd check` on a configuration whose line 6 is `line`: its error.
fn check_error(line: &str) -> String {
    let root = TempRoot::new();
    let file = root.outside_dir().join("bad.toml");
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\n[[site]]\nroot = \"/tmp\"\n[[site.location]]\n{line}\npath = \"/a/\"\n"
    );
    std::fs::write(&file, &text).unwrap();
    let (code, _, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(1), "{text}\n{stderr}");
    assert!(stderr.contains("bad.toml:6:"), "{text}\n{stderr}");
    stderr
}

#[test]
fn bad_error_pages_are_refused_with_file_line_and_key() {
    for (line, says) in [
        ("error_pages = { 200 = \"/x.html\" }", "'200'"),
        ("error_pages = { 600 = \"/x.html\" }", "'600'"),
        ("error_pages = { \"4xz\" = \"/x.html\" }", "'4xz'"),
        ("error_pages = { 404 = \"x.html\" }", "'x.html'"),
        ("error_pages = { 404 = \"/a b.html\" }", "'/a b.html'"),
        (
            "error_pages = { 404 = { uri = \"/x.html\", status = 304 } }",
            "304",
        ),
        ("error_pages = { 404 = { status = 200 } }", "uri"),
        ("intercept_errors = true", "proxy"),
    ] {
        let stderr = check_error(line);
        let key = line.split(' ').next().unwrap();
        assert!(
            stderr.contains(&format!("site.location.{key}")),
            "{line}\n{stderr}"
        );
        assert!(stderr.contains(says), "{line}: {says}\n{stderr}");
    }
}
