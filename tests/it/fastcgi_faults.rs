//! ampd's FastCGI client against an application that misbehaves on purpose
//! (tests/fixtures/fastcgi_faults.py), under every engine: `FCGI_OVERLOADED` is 503,
//! `FCGI_UNKNOWN_ROLE` 502, a response head with a control byte 502 and never passed on, the
//! STDERR stream in the error log, and a connection that closes before `FCGI_END_REQUEST` a
//! response cut short (or 502), never one that looks whole. The server keeps serving after each.

use crate::support;

use support::flup::PyFastCgi;
use support::gateway::fetch;
use support::http::{build_request, Conn};
use support::*;

use std::time::Duration;

for_each_arch!(fn fastcgi_faults_are_mapped(arch) {
    let root = TempRoot::new();
    let application = PyFastCgi::faults();
    let config = write_config(
        &root,
        arch,
        &format!(
            "[[site]]\nroot = \"www\"\n\n[[site.location]]\npath = \"/\"\nfastcgi_pass = \"{}\"\n",
            application.addr()
        ),
    );
    let server = Server::start(Options::config_file(&config));

    let fine = fetch(server.addr(), "GET", "/fine", &[]);
    assert_eq!(fine.status, 200, "{fine:?}\n{}", server.stderr());
    assert_eq!(fine.body_text(), "ok\n");

    let overloaded = fetch(server.addr(), "GET", "/overloaded", &[]);
    assert_eq!(overloaded.status, 503, "{overloaded:?}");

    let role = fetch(server.addr(), "GET", "/unknown-role", &[]);
    assert_eq!(role.status, 502, "{role:?}");

    let bad = fetch(server.addr(), "GET", "/bad-head", &[]);
    assert_eq!(bad.status, 502, "{bad:?}");
    assert!(!bad.has_header("x-bad") && !bad.body_text().contains("never sent"), "{bad:?}");

    let logged = fetch(server.addr(), "GET", "/stderr", &[]);
    assert_eq!(logged.status, 200, "{logged:?}");
    assert!(
        server.wait_for_stderr("fastcgi stderr line for the error log", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );

    // Closed before FCGI_END_REQUEST, after a head with a length: fewer bytes, then the close.
    let mut conn = Conn::open(server.addr());
    conn.send(build_request("GET", "/no-end", &[]));
    let cut = String::from_utf8_lossy(&conn.read_to_end().expect("read until the close")).into_owned();
    if cut.starts_with("HTTP/1.1 200") {
        let body = &cut[cut.find("\r\n\r\n").expect("a whole head") + 4..];
        assert!(body.len() < 1000, "{cut:?}");
    } else {
        assert!(cut.starts_with("HTTP/1.1 502"), "neither cut short nor 502: {cut:?}");
    }

    let after = fetch(server.addr(), "GET", "/fine", &[]);
    assert_eq!(after.status, 200, "{after:?}");
});
