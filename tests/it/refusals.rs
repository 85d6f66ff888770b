//! Refusals are reported (issue 15, finding 5): connections shed at a cap (answered `503`, or
//! dropped far over it) and internal `500`s each leave a line in the error log, at most one per
//! interval with the count of those left out, and are counted in the metrics.

use crate::support;

use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::http::build_request;
use support::*;

const STATUS: &str =
    "\n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n";

/// The value of the sample `series` in the status location's text (0 when absent).
fn sample(server: &Server, series: &str) -> f64 {
    let text = get(server.addr(), "/status").body_text();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Processes that each throttle their own lines: `mp`'s workers (four in `write_config`), as
/// nginx's workers each do.
fn processes(arch: &str) -> usize {
    if arch == "mp" {
        4
    } else {
        1
    }
}

/// Waits (bounded) until a fresh connection is admitted again (until the server has seen the
/// crowd go, a new one may still be refused or dropped).
fn until_admitted(server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut conn = Conn::open(server.addr());
        let answered = conn
            .try_send(&build_request("GET", "/a.txt", &[]))
            .and_then(|()| conn.try_read_response("GET"));
        if answered.is_ok_and(|response| response.status == 200) {
            return;
        }
        assert!(Instant::now() < deadline, "never admitted again");
        std::thread::sleep(Duration::from_millis(20));
    }
}

for_each_arch!(fn shedding_at_the_connection_cap_is_logged_and_counted(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "a");
    let config = write_config(
        &root,
        arch,
        &format!("[admission]\nmax_connections = 2\n[[site]]\nroot = \"www\"\n{STATUS}"),
    );
    let server = Server::start(Options::config_file(&config));
    let mut held: Vec<Conn> = (0..2).map(|_| Conn::open(server.addr())).collect();
    for conn in &mut held {
        assert_eq!(conn.get("/a.txt", &[]).status, 200);
    }
    // Over the cap: 503s; far over it (cap + cap/8 + 16): closed without an answer.
    let refused = Conn::open(server.addr()).get("/a.txt", &[]);
    assert_eq!(refused.status, 503);
    let crowd: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(server.addr()).expect("connect"))
        .collect();
    assert!(
        server.wait_for_stderr("503", Duration::from_secs(5)),
        "{arch}: the 503 is not logged:\n{}",
        server.stderr()
    );
    assert!(
        server.wait_for_stderr("dropped", Duration::from_secs(5)),
        "{arch}: the dropped connections are not logged:\n{}",
        server.stderr()
    );
    drop(crowd);
    drop(held);
    until_admitted(&server);
    let log = server.stderr();
    let lines = log.lines().filter(|line| line.contains("connection")).count();
    assert!(lines <= 4 * processes(arch), "{arch}: {lines} lines for one burst of refusals:\n{log}");
    assert!(sample(&server, "ampd_shed_total{reason=\"connections\"}") >= 1.0);
    assert!(
        sample(&server, "ampd_connections_dropped_total{reason=\"connections\"}") >= 1.0,
        "{arch}: drops not counted"
    );
});

default_arch!(fn internal_errors_are_logged_and_counted(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "a");
    // A socket in the document root: opening it fails with ENXIO, which is the server's
    // problem, not the client's (500).
    let _socket = std::os::unix::net::UnixListener::bind(root.path().join("sock")).expect("bind");
    let config = write_config(&root, arch, &format!("[[site]]\nroot = \"www\"\n{STATUS}"));
    let server = Server::start(Options::config_file(&config));
    for _ in 0..20 {
        assert_eq!(get(server.addr(), "/sock").status, 500);
    }
    assert!(
        server.wait_for_stderr("500", Duration::from_secs(5)),
        "{arch}: the 500 is not logged:\n{}",
        server.stderr()
    );
    let log = server.stderr();
    assert!(log.contains("/sock"), "{arch}: the log names the request:\n{log}");
    let lines = log.lines().filter(|line| line.contains("500")).count();
    assert!(lines <= 2 * processes(arch), "{arch}: {lines} lines for 20 errors:\n{log}");
    assert_eq!(sample(&server, "ampd_internal_errors_total"), 20.0, "{arch}");
});
