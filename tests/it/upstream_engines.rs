//! How every engine drives a proxied connection's upstream socket (docs/architecture.md,
//! "Upstream sockets"): idle keep-alive connections kept and reused, closed after
//! `keepalive_timeout` by the sweep, never kept when `keepalive = 0`; an upstream that stops
//! answering gets `504` after `read_timeout` and its socket closed; a refused or missing
//! upstream (TCP or unix) gets `502`; a unix-socket upstream serves; a client that leaves in the
//! middle of a response takes its upstream socket with it.
//!
//! The upstream is a raw one written here: it counts the connections it accepts and sees
//! closed, which is what these engine behaviours are about.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;

/// What the raw upstream saw.
#[derive(Default)]
struct Seen {
    accepted: AtomicUsize,
    /// Connections whose other end (ampd's) was closed or reset.
    closed: AtomicUsize,
}

impl Seen {
    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn closed(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }

    /// Wait (bounded) until `closed` reaches `count`.
    fn closed_reaches(&self, count: usize, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.closed() >= count {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.closed() >= count
    }
}

/// Serve one upstream connection: read request heads (GET, no body) and answer by path:
/// `/hello` → 200 keep-alive with the connection's number; `/hang` → nothing; `/stream` → a
/// head announcing 1 GiB, then data for as long as the peer takes it.
fn serve_connection(mut stream: impl Read + Write, number: usize, seen: &Seen) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = loop {
            if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                break end + 4;
            }
            match support::read_some(&mut stream, &mut chunk) {
                Ok(0) | Err(_) => {
                    seen.closed.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(count) => buffer.extend_from_slice(&chunk[..count]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        buffer.drain(..head_end);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
        if path.ends_with("/hang") {
            // Say nothing; wait for the proxy to give up (end of stream or reset).
            continue;
        }
        if path.ends_with("/stream") {
            let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n";
            if stream.write_all(head).is_err() {
                seen.closed.fetch_add(1, Ordering::SeqCst);
                return;
            }
            let block = vec![b's'; 64 << 10];
            loop {
                if stream.write_all(&block).is_err() {
                    seen.closed.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        }
        let body = format!("connection {number}");
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            seen.closed.fetch_add(1, Ordering::SeqCst);
            return;
        }
    }
}

/// A raw TCP upstream on 127.0.0.1, port 0; it runs until the test process ends.
fn tcp_upstream() -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let counted = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let number = counted.accepted.fetch_add(1, Ordering::SeqCst) + 1;
            let seen = counted.clone();
            std::thread::spawn(move || serve_connection(stream, number, &seen));
        }
    });
    (address, seen)
}

/// The same upstream on a unix socket at `path`.
fn unix_upstream(path: &Path) -> Arc<Seen> {
    let listener = UnixListener::bind(path).expect("bind the unix upstream");
    let seen = Arc::new(Seen::default());
    let counted = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let number = counted.accepted.fetch_add(1, Ordering::SeqCst) + 1;
            let seen = counted.clone();
            std::thread::spawn(move || serve_connection(stream, number, &seen));
        }
    });
    seen
}

/// A server proxying `/app/` to `proxy_pass`, with the pool's extra keys.
fn proxy_server(root: &TempRoot, arch: &str, proxy_pass: &str, pool_keys: &str) -> Server {
    let config = write_config(
        root,
        arch,
        &format!(
            r#"
[upstream.app]
servers = ["{proxy_pass}"]
{pool_keys}

[[site]]
root = "www"

  [[site.location]]
  path = "/app/"
  proxy_pass = "http://app"
"#
        ),
    );
    Server::start(Options::config_file(&config))
}

fn unused_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

for_each_arch!(fn idle_upstream_connections_are_reused(arch) {
    let (upstream, seen) = tcp_upstream();
    let root = TempRoot::new();
    let server = proxy_server(&root, arch, &upstream.to_string(), "keepalive = 4");
    let mut client = Conn::open(server.addr());
    for index in 0..5 {
        let response = client.get("/app/hello", &[]);
        assert_eq!(response.status, 200, "request {index}: {response:?}");
        assert_eq!(response.body_text(), "connection 1", "request {index} reused the first");
    }
    assert_eq!(seen.accepted(), 1, "one upstream connection for five requests");
    assert_eq!(seen.closed(), 0);
});

for_each_arch!(fn keepalive_zero_keeps_no_upstream_connection(arch) {
    let (upstream, seen) = tcp_upstream();
    let root = TempRoot::new();
    let server = proxy_server(&root, arch, &upstream.to_string(), "keepalive = 0");
    let mut client = Conn::open(server.addr());
    for index in 0..3 {
        let response = client.get("/app/hello", &[]);
        assert_eq!(response.status, 200, "request {index}: {response:?}");
        assert_eq!(response.body_text(), format!("connection {}", index + 1));
    }
    assert_eq!(seen.accepted(), 3);
    assert!(seen.closed_reaches(3, Duration::from_secs(5)), "each closed after its response");
});

for_each_arch!(fn idle_upstream_connections_close_after_keepalive_timeout(arch) {
    let (upstream, seen) = tcp_upstream();
    let root = TempRoot::new();
    let server = proxy_server(
        &root,
        arch,
        &upstream.to_string(),
        "keepalive = 4\nkeepalive_timeout = \"1s\"",
    );
    let mut client = Conn::open(server.addr());
    let kept = Instant::now();
    assert_eq!(client.get("/app/hello", &[]).status, 200);
    // Nothing else happens: the loop's (or thread group's, or process's) sweep closes it.
    assert!(seen.closed_reaches(1, Duration::from_secs(10)), "the idle connection stayed open");
    assert!(kept.elapsed() >= Duration::from_millis(900), "closed before its timeout");
    // The next request makes a new connection.
    let response = client.get("/app/hello", &[]);
    assert_eq!(response.body_text(), "connection 2");
});

for_each_arch!(fn an_upstream_that_stops_answering_gets_504_and_loses_its_socket(arch) {
    let (upstream, seen) = tcp_upstream();
    let root = TempRoot::new();
    let server = proxy_server(&root, arch, &upstream.to_string(), "read_timeout = \"1s\"\ntries = 1");
    let mut client = Conn::open(server.addr());
    client.set_read_timeout(Duration::from_secs(10));
    let asked = Instant::now();
    let response = client.get("/app/hang", &[]);
    assert_eq!(response.status, 504, "{response:?}");
    let waited = asked.elapsed();
    assert!(waited >= Duration::from_millis(900), "answered after {waited:?}");
    assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
    assert!(seen.closed_reaches(1, Duration::from_secs(5)), "the upstream socket stayed open");
    // The server goes on serving, on a new upstream connection.
    let response = Conn::open(server.addr()).get("/app/hello", &[]);
    assert_eq!(response.status, 200);
    assert_eq!(response.body_text(), "connection 2");
});

for_each_arch!(fn a_refused_or_missing_upstream_gets_502(arch) {
    let root = TempRoot::new();
    let refused = unused_port();
    let server = proxy_server(&root, arch, &refused.to_string(), "tries = 1");
    let response = Conn::open(server.addr()).get("/app/hello", &[]);
    assert_eq!(response.status, 502, "{response:?}");
    drop(server);

    let missing: PathBuf = root.outside_dir().join("missing.sock");
    let root = TempRoot::new();
    let server = proxy_server(&root, arch, &format!("unix:{}", missing.display()), "tries = 1");
    let response = Conn::open(server.addr()).get("/app/hello", &[]);
    assert_eq!(response.status, 502, "{response:?}");
});

for_each_arch!(fn a_unix_socket_upstream_serves_and_is_reused(arch) {
    let root = TempRoot::new();
    let path = root.outside_dir().join("app.sock");
    let seen = unix_upstream(&path);
    let server = proxy_server(&root, arch, &format!("unix:{}", path.display()), "keepalive = 2");
    let mut client = Conn::open(server.addr());
    for index in 0..3 {
        let response = client.get("/app/hello", &[]);
        assert_eq!(response.status, 200, "request {index}: {response:?}");
        assert_eq!(response.body_text(), "connection 1");
    }
    assert_eq!(seen.accepted(), 1);
});

for_each_arch!(fn a_client_that_leaves_mid_response_takes_its_upstream_socket_along(arch) {
    let (upstream, seen) = tcp_upstream();
    let root = TempRoot::new();
    let server = proxy_server(&root, arch, &upstream.to_string(), "keepalive = 4");
    let mut client = Conn::open(server.addr());
    client.send(support::http::build_request("GET", "/app/stream", &[]));
    // Some of the body arrives, then the client goes away.
    let mut some = [0u8; 64 << 10];
    let mut got = 0;
    client.set_read_timeout(Duration::from_secs(10));
    while got < some.len() {
        let count = support::read_some(&mut client.stream(), &mut some[got..]).expect("the response begins");
        assert!(count > 0, "closed before the body");
        got += count;
    }
    drop(client);
    assert!(
        seen.closed_reaches(1, Duration::from_secs(10)),
        "the upstream socket outlived its client"
    );
    // Not pooled: the next request needs a new upstream connection.
    let response = Conn::open(server.addr()).get("/app/hello", &[]);
    assert_eq!(response.status, 200);
    assert_eq!(response.body_text(), "connection 2");
});
