//! Many clients at once: 1,000 concurrent connections all served, and several threads hammering
//! keep-alive connections with exact bodies. Every loop is bounded in time.

use crate::support;

use std::time::{Duration, Instant};
use support::*;

const CONNECTIONS: usize = 1000;

/// Makes sure this test process may hold `needed` descriptors. The server raises its own limit.
/// Uses util-linux `prlimit` on our own pid (no unsafe in tests); `ampd_sys::process::
/// raise_nofile_limit()` can replace this once it exists.
fn ensure_fd_limit(needed: u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or(0);
    if soft >= needed {
        return;
    }
    let hard = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(4))
        .unwrap_or("4096")
        .to_string();
    let status = std::process::Command::new("prlimit")
        .args([
            "--pid",
            &std::process::id().to_string(),
            &format!("--nofile={hard}:{hard}"),
        ])
        .status();
    assert!(
        matches!(status, Ok(code) if code.success()),
        "cannot raise the fd limit (soft {soft}, need {needed}): {status:?}"
    );
}

for_each_arch!(fn thousand_concurrent_connections(arch) {
    ensure_fd_limit(2 * CONNECTIONS as u64 + 200);
    let root = TempRoot::new();
    for index in 0..10 {
        root.file(&format!("c{index}.txt"), format!("content {index}"));
    }
    let server = Server::start(Options::new(root.path(), arch));
    let started = Instant::now();
    let mut conns: Vec<Conn> = (0..CONNECTIONS).map(|_| Conn::open(server.addr())).collect();
    for (index, conn) in conns.iter_mut().enumerate() {
        conn.send(support::http::build_request("GET", &format!("/c{}.txt", index % 10), &[]));
    }
    for (index, conn) in conns.iter_mut().enumerate() {
        let response = conn.read_response("GET");
        assert_eq!(response.status, 200, "connection {index}");
        assert_eq!(response.body_text(), format!("content {}", index % 10), "connection {index}");
    }
    // All still open: a second round on every connection.
    for (index, conn) in conns.iter_mut().enumerate() {
        let response = conn.get(&format!("/c{}.txt", (index + 1) % 10), &[]);
        assert_eq!(response.status, 200, "second round, connection {index}");
    }
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
});

for_each_arch!(fn threads_hammering_keep_alive(arch) {
    let root = TempRoot::new();
    let data = support::root::pattern_bytes(200_000, 3);
    root.file("mid.bin", &data);
    root.file("tiny.txt", "tiny");
    let server = Server::start(Options::new(root.path(), arch));
    let addr = server.addr();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let data = data.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                for index in 0..50 {
                    if index % 2 == 0 {
                        assert!(conn.get("/mid.bin", &[]).body == data);
                    } else {
                        assert_eq!(conn.get("/tiny.txt", &[]).body, b"tiny");
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker thread");
    }
});
