//! `headers_remove` and `headers_set` on every response a location answers — a static file
//! (fast path and structured path alike), a proxied response, a CGI script's, a status page —
//! over HTTP/1.1 and HTTP/2, and a rule on a field ampd frames the message with refused at
//! load with file:line:key. Conn-level behaviour: the default engine only.

use crate::support;

use serde_json::{json, Value};
use std::net::SocketAddr;
use support::h2::{field, h2_client_ok};
use support::http::{build_request, Conn};
use support::tls::{listeners, write_tls_config};
use support::upstream::{RawUpstream, Reply};
use support::*;

const PLAIN_AND_H2C: &str = "[\"127.0.0.1:0\", \"127.0.0.1:0 h2c\"]";

/// The site removes `Server` everywhere and adds `X-Site`; `/api/` (proxied) also replaces
/// the upstream's `X-Powered-By` and `Cache-Control`; `/cgi-bin/` has its own remove list
/// (`X-Powered-By`), which replaces the site's, so its `Server` stays.
fn start(root: &TempRoot, arch: &str, upstream: SocketAddr) -> Server {
    root.file("hello.txt", "hello\n");
    root.dir("cgi-bin");
    support::write_executable(
        &root.path().join("cgi-bin/powered.cgi"),
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\nX-Powered-By: sh\\r\\n\\r\\ncgi\\n'\n",
    );
    let body = format!(
        r#"
[upstream.app]
servers = ["{upstream}"]
max_fails = 0

[[site]]
root = "www"
headers = {{ "X-Site" = "1" }}
headers_remove = ["Server"]

[[site.location]]
path = "/api/"
proxy_pass = "http://app"
headers_set = {{ "X-Powered-By" = "ampd-test", "Cache-Control" = "no-store" }}

[[site.location]]
path = "/cgi-bin/"
handler = "cgi"
headers_remove = ["x-powered-by"]
"#
    );
    let config = write_tls_config(root, arch, PLAIN_AND_H2C, &body);
    Server::start(Options::config_file(&config))
}

fn upstream() -> RawUpstream {
    RawUpstream::start(|_| {
        Reply::raw(
            "HTTP/1.1 200 OK\r\nX-Powered-By: Express\r\nCache-Control: max-age=60\r\n\
             X-Up: kept\r\nContent-Length: 2\r\n\r\nok",
        )
    })
}

default_arch!(fn rules_shape_static_proxied_cgi_and_status_answers_over_http1(arch) {
    let root = TempRoot::new();
    let upstream = upstream();
    let server = start(&root, arch, upstream.addr());
    let plain = listeners(server.ready_line())[0].1;
    let mut conn = Conn::open(plain);
    // Twice: the second is the header cache's hit, the fast path's turn.
    for _ in 0..2 {
        let file = conn.get("/hello.txt", &[]);
        assert_eq!(file.status, 200, "{file:?}");
        assert_eq!(file.body_text(), "hello\n");
        assert!(!file.has_header("server"), "{file:?}");
        assert_eq!(file.header("x-site"), Some("1"), "{file:?}");
        assert!(file.has_header("date") && file.has_header("content-length"), "{file:?}");
    }
    let missing = conn.get("/missing.txt", &[]);
    assert_eq!(missing.status, 404, "{missing:?}");
    assert!(!missing.has_header("server"), "{missing:?}");
    assert_eq!(missing.header("x-site"), Some("1"), "{missing:?}");

    conn.send(build_request("GET", "/api/x", &[]));
    let proxied = conn.read_proxied("GET");
    assert_eq!(proxied.status, 200, "{proxied:?}");
    assert_eq!(proxied.body_text(), "ok");
    assert!(!proxied.has_header("server"), "{proxied:?}");
    let powered: Vec<_> = proxied.headers_named("x-powered-by").collect();
    assert_eq!(powered, ["ampd-test"], "{proxied:?}");
    let cache: Vec<_> = proxied.headers_named("cache-control").collect();
    assert_eq!(cache, ["no-store"], "{proxied:?}");
    assert_eq!(proxied.header("x-up"), Some("kept"), "{proxied:?}");

    conn.send(build_request("GET", "/cgi-bin/powered.cgi", &[]));
    let script = conn.read_proxied("GET");
    assert_eq!(script.status, 200, "{script:?}");
    assert_eq!(script.body_text(), "cgi\n");
    assert!(!script.has_header("x-powered-by"), "{script:?}");
    assert_eq!(script.header("server"), Some("ampd"), "{script:?}");
});

default_arch!(fn http2_streams_see_the_same_fields(arch) {
    let root = TempRoot::new();
    let upstream = upstream();
    let server = start(&root, arch, upstream.addr());
    let h2c = listeners(server.ready_line())[1].1;
    let requests: Vec<Value> = ["/hello.txt", "/hello.txt", "/missing.txt", "/api/x", "/cgi-bin/powered.cgi"]
        .iter()
        .map(|path| json!({"path": path}))
        .collect();
    let answer = h2_client_ok(json!({"port": h2c.port(), "requests": requests}));
    let responses = answer["responses"].as_array().expect("responses");
    let statuses: Vec<_> = responses.iter().map(|response| response["status"].clone()).collect();
    assert_eq!(statuses, [200, 200, 404, 200, 200], "{answer}");
    for response in &responses[..4] {
        assert_eq!(field(response, "server"), None, "{response}");
        assert_eq!(field(response, "x-site"), Some("1"), "{response}");
    }
    assert_eq!(field(&responses[3], "x-powered-by"), Some("ampd-test"), "{answer}");
    assert_eq!(field(&responses[3], "cache-control"), Some("no-store"), "{answer}");
    assert_eq!(field(&responses[4], "x-powered-by"), None, "{answer}");
    assert_eq!(field(&responses[4], "server"), Some("ampd"), "{answer}");
});

#[test]
fn a_rule_on_a_framing_field_is_refused_with_file_line_and_key() {
    for (key, value, name) in [
        ("headers_remove", "[\"Content-Length\"]", "Content-Length"),
        (
            "headers_set",
            "{ \"Transfer-Encoding\" = \"gzip\" }",
            "Transfer-Encoding",
        ),
        ("headers_remove", "[\"Date\"]", "Date"),
    ] {
        let root = TempRoot::new();
        let file = root.outside_dir().join("bad.toml");
        let text = format!(
            "listen = \"127.0.0.1:0\"\n\n[[site]]\nroot = \"/tmp\"\n\n[[site.location]]\n\
             path = \"/a/\"\n{key} = {value}\n"
        );
        std::fs::write(&file, &text).unwrap();
        let (code, _, stderr) = run_to_exit(&["check", &file.display().to_string()]);
        assert_eq!(code, Some(1), "{text}\n{stderr}");
        assert!(
            stderr.contains("bad.toml:8:") && stderr.contains(&format!("site.location.{key}: ")),
            "{stderr}"
        );
        assert!(stderr.contains(&format!("'{name}'")), "{stderr}");
    }
}
