//! A graceful stop closes a keep-alive connection as soon as the response it was sending when
//! the stop began is complete: the client gets the whole body, then EOF (a FIN, not a reset),
//! and the server exits long before its grace period, under every engine.

use crate::support;

use std::io::ErrorKind;
use std::thread;
use std::time::{Duration, Instant};
use support::*;

const GRACE: Duration = Duration::from_secs(20);

for_each_arch!(fn a_response_finished_while_draining_closes_its_connection(arch) {
    let root = TempRoot::new();
    let big = support::root::pattern_bytes(4 << 20, 11);
    root.file("big.bin", &big);
    let config = write_config(
        &root,
        arch,
        &format!("grace_period = \"{}s\"\n\n[[site]]\nroot = \"www\"\n", GRACE.as_secs()),
    );
    let mut server = Server::start(Options::config_file(&config));
    let mut conn = Conn::open(server.addr());
    // A keep-alive request: its head goes out before the stop, without `Connection: close`.
    conn.send(support::http::build_request("GET", "/big.bin", &[]));
    let mut stream = conn.stream();
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut signalled = None;
    let started = Instant::now();
    // Read about 1.3 MB/s, so the response is still in flight for a few seconds after the stop.
    let body = loop {
        assert!(started.elapsed() < Duration::from_secs(20), "download too slow");
        let read = support::read_some(&mut stream, &mut chunk).expect("read the response");
        assert!(read > 0, "closed after {} bytes", received.len());
        received.extend_from_slice(&chunk[..read]);
        if signalled.is_none() && started.elapsed() >= Duration::from_millis(500) {
            server.signal("TERM");
            signalled = Some(Instant::now());
        }
        if let Some(end) = support::http::find(&received, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&received[..end]).to_string();
            assert!(!head.contains("Connection: close"), "{head}");
            if received.len() >= end + 4 + big.len() {
                break received[end + 4..].to_vec();
            }
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert!(signalled.is_some(), "the response ended before the stop");
    assert!(body == big, "body differs ({} of {} bytes)", body.len(), big.len());
    // Then EOF at once: a FIN after the last byte, not a reset at the end of the grace period.
    stream.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    match support::read_some(&mut stream, &mut chunk) {
        Ok(0) => {}
        Ok(count) => panic!("{count} bytes after the response"),
        Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("connection still open {:?} after the response", Duration::from_secs(3))
        }
        Err(error) => panic!("not a clean close: {error}"),
    }
    assert_eq!(server.wait_exit(Duration::from_secs(5)), Some(0), "{}", server.stderr());
    assert!(
        signalled.unwrap().elapsed() < GRACE / 2,
        "the stop took {:?}",
        signalled.unwrap().elapsed()
    );
});
