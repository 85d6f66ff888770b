//! The defaults protect a server with no configuration: a slow reader (slowhttptest's
//! slow-read attack) is cut off within seconds by the default `min_send_rate`, under every
//! engine, while a normal download of the same file is unaffected.

use crate::support;

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::thread;
use std::time::{Duration, Instant};
use support::*;

/// Within a few seconds under every engine (4–6 s at the default 1 KiB/s); the rest is margin for
/// a busy machine. Without a default rate such a reader would live for the whole 60 s send
/// timeout after each bit of progress, that is for ever.
const CUT_WITHIN: Duration = Duration::from_secs(25);

for_each_arch!(fn slow_readers_are_cut_off_by_default(arch) {
    let root = TempRoot::new();
    let big = support::root::pattern_bytes(12 << 20, 5);
    root.file("big.bin", &big);
    let server = Server::start(Options::new(root.path(), arch));
    let addr = server.addr();
    // The slow reader: a small receive buffer, 100 bytes every 200 ms (500 B/s), so that it
    // makes some progress and the send timeout alone would never end it.
    let mut slow = TcpStream::connect(addr).unwrap();
    ampd_sys::socket::set_recv_buffer(slow.as_fd(), 4 << 10).unwrap();
    slow.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let started = Instant::now();
    let mut chunk = [0u8; 100];
    let closed = loop {
        if started.elapsed() > CUT_WITHIN {
            break false;
        }
        // A reset is seen at once this way; reads would first return what the small buffer
        // still holds, at this slow pace.
        if slow.take_error().ok().flatten().is_some() {
            break true;
        }
        match support::read_some(&mut slow, &mut chunk) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break true,
        }
        thread::sleep(Duration::from_millis(200));
    };
    assert!(closed, "slow reader still served after {:?}", started.elapsed());
    eprintln!("{arch}: slow reader cut after {:?}", started.elapsed());
    // A client reading at full speed gets the whole file.
    let mut conn = Conn::open(addr);
    assert!(conn.get("/big.bin", &[]).body == big);
});
