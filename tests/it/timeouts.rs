//! Slowloris defences: `--header-timeout` closes a connection stuck in a request head and
//! `--keepalive-timeout` closes an idle persistent connection, both within a bounded time.

use crate::support;

use std::time::{Duration, Instant};
use support::*;

for_each_arch!(fn half_request_line_is_closed(arch) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch).args(["--header-timeout", "1"]));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /ok.tx");
    let started = Instant::now();
    // Either a 408 then a close, or a plain close.
    conn.set_read_timeout(Duration::from_secs(4));
    let bytes = conn.read_to_end().expect("read until close");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(3), "closed after {elapsed:?}");
    if !bytes.is_empty() {
        let responses = support::http::parse_all(&bytes, "GET");
        assert_eq!(responses.len(), 1);
        assert_eq!(responses[0].status, 408, "{:?}", responses[0]);
    }
    // A request trickled in slowly but within the limit still works on another connection.
    let mut slow = Conn::open(server.addr());
    for piece in ["GET /ok", ".txt HTTP/1.1\r\n", "Host: t\r\n", "\r\n"] {
        slow.send(piece);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(slow.read_response("GET").body, b"ok");
});

for_each_arch!(fn idle_keep_alive_is_closed(arch) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch).args(["--keepalive-timeout", "1"]));
    let mut conn = Conn::open(server.addr());
    assert_eq!(conn.get("/ok.txt", &[]).body, b"ok");
    let started = Instant::now();
    assert!(conn.closed_within(Duration::from_secs(4)), "idle connection still open after 4 s");
    assert!(started.elapsed() < Duration::from_secs(3), "closed after {:?}", started.elapsed());
    // A busy connection is not closed while requests keep coming faster than the timeout.
    let mut busy = Conn::open(server.addr());
    for _ in 0..6 {
        assert_eq!(busy.get("/ok.txt", &[]).body, b"ok");
        std::thread::sleep(Duration::from_millis(300));
    }
});

// The `408` on a header timeout is followed by a lingering close under every engine (the one
// rule of `engine::core`): what the client still sends of its request is read and discarded
// rather than answered with a reset that could destroy the `408` on its way. The epoll engines
// used to close plainly here, and a client still sending got a reset.
for_each_arch!(fn timeout_answer_is_followed_by_lingering_close(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::new(root.path(), arch).args(["--header-timeout", "1"]));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /slow.txt HTTP/1.1\r\nHost: t\r\n");
    conn.set_read_timeout(Duration::from_secs(4));
    let bytes = conn.read_to_end().expect("the 408, then the end of its stream");
    let responses = support::http::parse_all(&bytes, "GET");
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 408, "{:?}", responses[0]);
    // A closed socket answers the first late segment with a reset, which fails a later write
    // at once on loopback; a lingering one takes them (the linger timeout is seconds).
    let watch = Instant::now() + Duration::from_millis(300);
    while Instant::now() < watch {
        let sent = conn.try_send(b"X-Late: still sending\r\n");
        assert!(sent.is_ok(), "reset after the 408: {sent:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
});

// A `Connection: close` download still going out when the linger timeout has passed arrives
// whole under every engine: until its last byte is out the connection is sending (the send
// timeout, restarted by progress, and the minimum send rate govern), not closing. The linger
// timeout never restarts, and the event-loop engines cut such a download when it ran out (2 s by
// default), wherever it was; a response cut short by its upstream too.
for_each_arch!(fn a_last_response_outlasting_the_linger_timeout_arrives_whole(arch) {
    let root = TempRoot::new();
    // More than a kernel socket buffer holds (`tcp_wmem` max 4 MiB), so that the response is
    // still queued in ampd while it is read.
    let big = support::root::pattern_bytes(6 << 20, 9);
    root.file("big.bin", &big);
    let config = write_config(&root, arch, "[limits]\nlinger_timeout = \"200ms\"\n\n[[site]]\nroot = \"www\"\n");
    let server = Server::start(Options::config_file(&config));
    let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
    ampd_sys::socket::set_recv_buffer(std::os::fd::AsFd::as_fd(&stream), 32 << 10).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    std::io::Write::write_all(&mut stream, b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    // About 3 MB/s: two seconds for the whole, far above the minimum send rate.
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        match support::read_some(&mut stream, &mut chunk) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(error) => panic!("{arch}: {error} after {} bytes", received.len()),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let head_end = support::http::find(&received, b"\r\n\r\n").expect("a response head") + 4;
    assert_eq!(received.len() - head_end, big.len(), "{arch}: the whole body, then the close");
    assert!(received[head_end..] == big[..], "{arch}: the body as on disk");
});
