//! Admission control over real sockets: slowloris (trickled heads), slow bodies and slow
//! readers are cut off while a normal client keeps being served; per-address and global
//! connection caps answer `503` with `Retry-After`; per-address request rates answer `429`.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::*;

fn start(root: &TempRoot, arch: &str, settings: &str) -> Server {
    root.file("a.txt", "a");
    Server::start(Options::config_file(&write_config(
        root,
        arch,
        &format!("{settings}\n[[site]]\nroot = \"www\"\n"),
    )))
}

/// A normal client fetching `/a.txt` until `stop`; returns (requests, worst latency).
fn normal_client(
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<(usize, Duration)> {
    thread::spawn(move || {
        let mut conn = Conn::open(addr);
        let (mut count, mut worst) = (0, Duration::ZERO);
        while !stop.load(Ordering::Relaxed) {
            let sent = Instant::now();
            assert_eq!(conn.get("/a.txt", &[]).body, b"a");
            worst = worst.max(sent.elapsed());
            count += 1;
            thread::sleep(Duration::from_millis(20));
        }
        (count, worst)
    })
}

/// The worst latency of 20 requests of the normal client's kind before any attack: what this
/// machine, with its load at the moment, takes anyway.
fn baseline_latency(addr: std::net::SocketAddr) -> Duration {
    let mut conn = Conn::open(addr);
    (0..20)
        .map(|_| {
            let sent = Instant::now();
            assert_eq!(conn.get("/a.txt", &[]).body, b"a");
            sent.elapsed()
        })
        .max()
        .unwrap_or_default()
}

/// The normal client was not held up by the attack: its worst latency stays under 500 ms or
/// four times its worst before the attack, whichever is more (a loaded machine is slow for
/// both). Held up behind an attacker, it would wait for the attacker's timeout: 1 s or more.
fn assert_not_held_up(count: usize, least: usize, worst: Duration, baseline: Duration) {
    let ceiling = Duration::from_millis(500).max(baseline * 4);
    assert!(
        count >= least && worst < ceiling,
        "normal client: {count} requests, worst {worst:?} (ceiling {ceiling:?}, baseline {baseline:?})"
    );
}

/// Whether the server ended the connection (EOF or reset) before `within`.
fn cut_off(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buffer = [0u8; 4096];
    loop {
        match support::read_some(&mut *stream, &mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error)
                if error.kind() == std::io::ErrorKind::WouldBlock
                    || error.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

for_each_arch!(fn slowloris_and_slow_bodies_are_cut_off(arch) {
    let root = TempRoot::new();
    let server = start(&root, arch, "[limits]\nheader_timeout = \"1s\"\nbody_timeout = \"1s\"");
    let addr = server.addr();
    let baseline = baseline_latency(addr);
    let stop = Arc::new(AtomicBool::new(false));
    let normal = normal_client(addr, stop.clone());
    let started = Instant::now();
    // Slowloris: heads trickled a byte at a time, never finished.
    let mut trickles: Vec<_> = (0..20)
        .map(|_| {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.write_all(b"GET /a.txt HTTP/1.1\r\nX-a: ").unwrap();
            stream
        })
        .collect();
    // A slow body: the head is complete, the body never is.
    let mut slow_body = TcpStream::connect(addr).unwrap();
    slow_body.write_all(b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nabc").unwrap();
    for round in 0..5 {
        for stream in &mut trickles {
            let _ = stream.write_all(b"b");
        }
        let _ = slow_body.write_all(b"d");
        thread::sleep(Duration::from_millis(150));
        let _ = round;
    }
    for stream in &mut trickles {
        assert!(cut_off(stream, Duration::from_secs(3)), "a slowloris client is still connected");
    }
    let mut reply = String::new();
    slow_body.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = slow_body.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "slow body: {reply:?}");
    // The attack lasts 0.75 s and the timeouts are 1 s: cut off by the timeouts, everything is
    // over in about 2 s. 5 s leaves a loaded machine room while still telling timeouts from no
    // timeouts (then each of the 21 waits above would have taken its full 3 s).
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    stop.store(true, Ordering::Relaxed);
    let (count, worst) = normal.join().unwrap();
    assert_not_held_up(count, 20, worst, baseline);
});

for_each_arch!(fn slow_readers_are_cut_off(arch) {
    let root = TempRoot::new();
    root.file("big.bin", support::root::pattern_bytes(12 << 20, 5));
    let server = start(&root, arch, "[limits]\nmin_send_rate = \"64KiB\"\nsend_timeout = \"30s\"");
    let addr = server.addr();
    let baseline = baseline_latency(addr);
    let stop = Arc::new(AtomicBool::new(false));
    let normal = normal_client(addr, stop.clone());
    // A full-speed download of the same file is not affected.
    let fast = thread::spawn(move || {
        let mut conn = Conn::open(addr);
        conn.set_read_timeout(Duration::from_secs(20));
        conn.get("/big.bin", &[]).body.len()
    });
    // The slow reader: a small receive buffer, 1 KiB every 100 ms (10 KiB/s).
    let mut slow = TcpStream::connect(addr).unwrap();
    ampd_sys::socket::set_recv_buffer(slow.as_fd(), 16 << 10).unwrap();
    slow.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let started = Instant::now();
    let mut received = 0usize;
    let mut chunk = [0u8; 1024];
    let closed = loop {
        if started.elapsed() > Duration::from_secs(12) {
            break false;
        }
        match support::read_some(&mut slow, &mut chunk) {
            Ok(0) | Err(_) => break true,
            Ok(count) => received += count,
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert!(closed, "slow reader still served after {:?} ({received} bytes)", started.elapsed());
    assert!(received < 12 << 20);
    assert_eq!(fast.join().unwrap(), 12 << 20);
    stop.store(true, Ordering::Relaxed);
    let (count, worst) = normal.join().unwrap();
    assert_not_held_up(count, 10, worst, baseline);
});

fn assert_shed(response: &Response, status: u16) {
    assert_eq!(response.status, status, "{response:?}");
    assert_eq!(response.header("retry-after"), Some("1"), "{response:?}");
    assert!(
        status == 429 || response.connection_has("close"),
        "{response:?}"
    );
}

for_each_arch!(fn per_address_and_global_connection_caps(arch) {
    let root = TempRoot::new();
    let server = start(&root, arch, "[admission]\nmax_connections_per_address = 3\nretry_after = \"1s\"");
    let addr = server.addr();
    let mut held: Vec<Conn> = (0..3).map(|_| Conn::open(addr)).collect();
    for conn in &mut held {
        assert_eq!(conn.get("/a.txt", &[]).status, 200);
    }
    let mut fourth = Conn::open(addr);
    assert_shed(&fourth.get("/a.txt", &[]), 503);
    assert!(fourth.closed_within(Duration::from_secs(3)));
    // A place given back is usable again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let response = Conn::open(addr).get("/a.txt", &[]);
        if response.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "place never given back: {response:?}");
        thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    drop(server);

    let root = TempRoot::new();
    let server = start(&root, arch, "[admission]\nmax_connections = 2");
    let mut held: Vec<Conn> = (0..2).map(|_| Conn::open(server.addr())).collect();
    for conn in &mut held {
        assert_eq!(conn.get("/a.txt", &[]).status, 200);
    }
    assert_shed(&Conn::open(server.addr()).get("/a.txt", &[]), 503);
    assert_eq!(held[0].get("/a.txt", &[]).status, 200, "admitted connections keep being served");
});

for_each_arch!(fn request_rate_per_address(arch) {
    let root = TempRoot::new();
    let server = start(&root, arch, "[admission]\nrequests_per_second = 4\nburst = 4");
    let mut conn = Conn::open(server.addr());
    let started = Instant::now();
    let responses: Vec<Response> = (0..6).map(|_| conn.get("/a.txt", &[])).collect();
    let took = started.elapsed();
    let statuses: Vec<u16> = responses.iter().map(|response| response.status).collect();
    // A burst of 4, then one request more each 250 ms: the six got at most this many 200s.
    let refilled = (took.as_millis() / 250) as usize;
    assert_eq!(&statuses[..4], &[200; 4], "the burst: {statuses:?} in {took:?}");
    for response in &responses[4..] {
        if response.status != 200 {
            assert_shed(response, 429);
        }
    }
    let answered = statuses.iter().filter(|&&status| status == 200).count();
    assert!(answered <= 4 + refilled, "{statuses:?} in {took:?}");
    if refilled == 0 {
        assert_eq!(&statuses[4..], &[429, 429], "no token came back in {took:?}");
    }
    // Past the burst a request is refused: asked faster than 4 a second, one soon is.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response = conn.get("/a.txt", &[]);
        if response.status == 429 {
            assert_shed(&response, 429);
            break;
        }
        assert_eq!(response.status, 200, "{response:?}");
        assert!(Instant::now() < deadline, "never limited");
    }
    // The connection stays open and the bucket refills at 4 per second.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(conn.get("/a.txt", &[]).status, 200);
});
