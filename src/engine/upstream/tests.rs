//! The pump, `open` and `release` against real sockets (loopback TCP and unix), with a
//! recording endpoint in place of `Conn`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use ampd_sys::poll;

use super::*;

/// What the engine told the endpoint, and what the endpoint asks for.
#[derive(Default)]
struct Recorder {
    opened: Option<Opened>,
    connected: bool,
    /// Bytes for the upstream: `out[sent..]`.
    out: Vec<u8>,
    sent: usize,
    /// Upstream input wanted until this many bytes arrived (backpressure beyond).
    want_up_to: usize,
    input: Vec<u8>,
    finished: bool,
    failed: Option<io::Error>,
    release: Option<Release>,
    /// No more output after `out` (half-close once written).
    output_ended: bool,
}

impl Endpoint for Recorder {
    fn upstream_opened(&mut self, _: LinkId, opened: Opened) {
        self.opened = Some(opened);
    }
    fn upstream_connected(&mut self, _: LinkId) {
        self.connected = true;
    }
    fn upstream_output(&self, _: LinkId) -> &[u8] {
        &self.out[self.sent..]
    }
    fn upstream_sent(&mut self, _: LinkId, count: usize) {
        self.sent += count;
    }
    fn upstream_output_ended(&self, _: LinkId) -> bool {
        self.output_ended
    }
    fn upstream_wants_input(&self, _: LinkId) -> bool {
        self.input.len() < self.want_up_to
    }
    fn upstream_receive(&mut self, _: LinkId, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }
    fn upstream_finished(&mut self, _: LinkId) {
        self.finished = true;
    }
    fn upstream_failed(&mut self, _: LinkId, error: &io::Error) {
        self.failed = Some(io::Error::new(error.kind(), error.to_string()));
    }
    fn take_upstream_release(&mut self) -> Option<(LinkId, Release)> {
        self.release.take().map(|release| (LinkId::FIRST, release))
    }
}

fn tcp_connect(address: SocketAddr, reuse: bool) -> Connect {
    Connect::Server {
        address: UpstreamAddress::Tcp(address),
        reuse,
    }
}

/// Wait (bounded) for what the socket wants, as a blocking engine would, and pump.
fn wait_and_pump(upstream: &mut Upstream, endpoint: &mut Recorder, scratch: &mut [u8]) -> bool {
    let wants = upstream.wants(endpoint);
    if wants.any() {
        let ready = poll::poll_one(
            upstream.fd.as_fd(),
            wants.read,
            wants.write,
            Some(Duration::from_secs(5)),
        )
        .unwrap()
        .expect("the socket became ready within 5 s");
        upstream.ready(ready.readable, ready.writable, ready.hangup);
    }
    pump(upstream, endpoint, scratch)
}

fn pump_until(upstream: &mut Upstream, endpoint: &mut Recorder, done: impl Fn(&Recorder) -> bool) {
    let mut scratch = vec![0u8; 16 << 10];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(endpoint) {
        assert!(Instant::now() < deadline, "the exchange did not finish");
        wait_and_pump(upstream, endpoint, &mut scratch);
    }
}

#[test]
fn a_fresh_connection_connects_writes_the_request_reads_the_response_and_sees_the_end() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut pool = IdlePool::default();
    let mut endpoint = Recorder {
        out: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        want_up_to: usize::MAX,
        ..Recorder::default()
    };
    let connect = tcp_connect(listener.local_addr().unwrap(), true);
    let mut upstream = open(&connect, LinkId::FIRST, &mut endpoint, &mut pool).expect("a socket");
    assert_eq!(endpoint.opened, Some(Opened::Fresh), "the pool was empty");
    assert!(socket::nodelay(upstream.fd.as_fd()).unwrap(), "TCP_NODELAY");
    pump_until(&mut upstream, &mut endpoint, |endpoint| {
        endpoint.sent == endpoint.out.len()
    });
    assert!(endpoint.connected);
    let (mut theirs, _) = listener.accept().unwrap();
    let mut request = vec![0u8; endpoint.out.len()];
    theirs.read_exact(&mut request).unwrap();
    assert_eq!(request, endpoint.out);
    theirs.write_all(b"HTTP/1.1 200 OK\r\n\r\nhello").unwrap();
    drop(theirs);
    pump_until(&mut upstream, &mut endpoint, |endpoint| endpoint.finished);
    assert_eq!(endpoint.input, b"HTTP/1.1 200 OK\r\n\r\nhello");
    assert!(endpoint.failed.is_none());
    assert!(
        !pump(&mut upstream, &mut endpoint, &mut [0u8; 64]),
        "nothing more"
    );
    assert!(!upstream.wants(&endpoint).any());
}

#[test]
fn a_refused_connect_is_reported_to_the_endpoint() {
    let address = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mut endpoint = Recorder {
        out: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        ..Recorder::default()
    };
    let mut pool = IdlePool::default();
    if let Some(mut upstream) = open(
        &tcp_connect(address, false),
        LinkId::FIRST,
        &mut endpoint,
        &mut pool,
    ) {
        pump_until(&mut upstream, &mut endpoint, |endpoint| {
            endpoint.failed.is_some()
        });
        assert!(
            !upstream.wants(&endpoint).any(),
            "a broken socket wants nothing"
        );
    }
    let failed = endpoint.failed.expect("the refusal");
    assert_eq!(failed.kind(), io::ErrorKind::ConnectionRefused);
    assert!(!endpoint.connected);
}

#[test]
fn a_slow_upstream_and_a_slow_client_apply_backpressure_both_ways() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut pool = IdlePool::default();
    // 32 MiB for the upstream: more than loopback buffers hold while it reads nothing.
    let body: Vec<u8> = (0..32 << 20)
        .map(|index: usize| (index % 251) as u8)
        .collect();
    let mut endpoint = Recorder {
        out: body.clone(),
        want_up_to: 0,
        ..Recorder::default()
    };
    let connect = tcp_connect(listener.local_addr().unwrap(), false);
    let mut upstream = open(&connect, LinkId::FIRST, &mut endpoint, &mut pool).unwrap();
    let (mut theirs, _) = listener.accept().unwrap();
    let mut scratch = vec![0u8; 16 << 10];
    // Write until the socket is full: the pump stops at EAGAIN and waits for writability.
    let deadline = Instant::now() + Duration::from_secs(10);
    while upstream.can_move(&endpoint) || upstream.connecting {
        assert!(Instant::now() < deadline);
        wait_and_pump(&mut upstream, &mut endpoint, &mut scratch);
    }
    assert!(
        endpoint.sent > 0 && endpoint.sent < body.len(),
        "a slow upstream"
    );
    assert_eq!(
        upstream.wants(&endpoint),
        Wants {
            read: false,
            write: true
        }
    );
    // The upstream answers while it reads; the endpoint does not want input (its client is
    // slow): nothing is read.
    theirs.write_all(b"0123456789").unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        while got.len() < 32 << 20 {
            let count = theirs.read(&mut buf).unwrap();
            assert!(count > 0, "end of stream before the whole body");
            got.extend_from_slice(&buf[..count]);
        }
        (theirs, got)
    });
    pump_until(&mut upstream, &mut endpoint, |endpoint| {
        endpoint.sent == endpoint.out.len()
    });
    let (_theirs, got) = reader.join().unwrap();
    assert!(got == body, "every byte in order");
    // An engine that watches both directions (edge-triggered epoll) reports the bytes
    // readable: still nothing is read while none is wanted.
    upstream.ready(true, true, false);
    assert!(!pump(&mut upstream, &mut endpoint, &mut scratch));
    assert!(endpoint.input.is_empty(), "no input while none is wanted");
    assert!(!upstream.can_move(&endpoint));
    assert!(!upstream.wants(&endpoint).read);
    endpoint.want_up_to = 4;
    pump_until(&mut upstream, &mut endpoint, |endpoint| {
        endpoint.input.len() >= 4
    });
    endpoint.want_up_to = 10;
    pump_until(&mut upstream, &mut endpoint, |endpoint| {
        endpoint.input.len() >= 10
    });
    assert_eq!(endpoint.input, b"0123456789");
}

#[test]
fn a_kept_connection_is_reused_and_a_closed_or_finished_one_is_not() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut pool = IdlePool::default();
    let connect = tcp_connect(listener.local_addr().unwrap(), true);
    let keep = Release::Keep {
        keepalive: 4,
        timeout: Duration::from_secs(60),
    };
    let mut endpoint = Recorder::default();
    let upstream = open(&connect, LinkId::FIRST, &mut endpoint, &mut pool).unwrap();
    let mut attached = vec![upstream];
    pump_until(&mut attached[0], &mut endpoint, |endpoint| {
        endpoint.connected
    });
    let (mut theirs, _) = listener.accept().unwrap();
    let number = attached[0].fd.as_raw_fd();
    // No release asked for: nothing happens.
    release(&mut endpoint, &mut attached, &mut pool, |_| {});
    assert_eq!(attached.len(), 1);
    endpoint.release = Some(keep);
    let mut pooled = 0;
    release(&mut endpoint, &mut attached, &mut pool, |_| pooled += 1);
    assert!(attached.is_empty());
    assert_eq!((pooled, pool.len()), (1, 1));

    // The next exchange to the same address takes it, already connected.
    let mut next = Recorder::default();
    let mut attached: Vec<Upstream> = open(&connect, LinkId::FIRST, &mut next, &mut pool)
        .into_iter()
        .collect();
    assert_eq!(next.opened, Some(Opened::Reused));
    assert_eq!(attached[0].fd.as_raw_fd(), number);
    assert!(!attached[0].connecting);
    assert!(pool.is_empty());

    // Closed, not pooled: the upstream sees the end of stream.
    next.release = Some(Release::Close);
    release(&mut next, &mut attached, &mut pool, |_| {
        panic!("not pooled")
    });
    assert!(pool.is_empty());
    theirs
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(theirs.read(&mut [0u8; 8]).unwrap(), 0);

    // Keep after the upstream closed its side: closed all the same.
    let mut third = Recorder {
        want_up_to: usize::MAX,
        ..Recorder::default()
    };
    let mut attached: Vec<Upstream> = open(&connect, LinkId::FIRST, &mut third, &mut pool)
        .into_iter()
        .collect();
    let (theirs, _) = listener.accept().unwrap();
    drop(theirs);
    pump_until(&mut attached[0], &mut third, |third| third.finished);
    third.release = Some(keep);
    release(&mut third, &mut attached, &mut pool, |_| {
        panic!("not pooled")
    });
    assert!(pool.is_empty() && attached.is_empty());
}

#[test]
fn unix_sockets_connect_at_once_and_a_missing_one_fails() {
    let dir = std::env::temp_dir().join(format!("ampd-upstream-unix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("app.sock");
    let _ = std::fs::remove_file(&path);
    let connect = Connect::Server {
        address: UpstreamAddress::Unix(path.clone()),
        reuse: true,
    };
    let mut pool = IdlePool::default();
    let mut missing = Recorder::default();
    assert!(open(&connect, LinkId::FIRST, &mut missing, &mut pool).is_none());
    assert_eq!(
        missing.failed.as_ref().map(io::Error::kind),
        Some(io::ErrorKind::NotFound)
    );
    assert_eq!(missing.opened, None);

    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut endpoint = Recorder {
        out: b"ping".to_vec(),
        want_up_to: usize::MAX,
        ..Recorder::default()
    };
    let mut upstream = open(&connect, LinkId::FIRST, &mut endpoint, &mut pool).unwrap();
    assert_eq!(endpoint.opened, Some(Opened::Fresh));
    assert!(endpoint.connected, "a unix connect completes at once");
    pump_until(&mut upstream, &mut endpoint, |endpoint| endpoint.sent == 4);
    let (mut theirs, _) = listener.accept().unwrap();
    let mut got = [0u8; 4];
    theirs.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
    theirs.write_all(b"pong").unwrap();
    pump_until(&mut upstream, &mut endpoint, |endpoint| {
        endpoint.input.len() == 4
    });
    assert_eq!(endpoint.input, b"pong");
    drop(listener);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_idle_connection_the_upstream_closed_is_skipped_for_a_fresh_one() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let mut pool = IdlePool::default();
    let stale = TcpStream::connect(address).unwrap();
    stale.set_nonblocking(true).unwrap();
    let (theirs, _) = listener.accept().unwrap();
    pool.put(
        &UpstreamAddress::Tcp(address),
        stale.into(),
        4,
        Duration::from_secs(60),
        Instant::now(),
    );
    drop(theirs);
    let mut endpoint = Recorder::default();
    let deadline = Instant::now() + Duration::from_secs(5);
    // The FIN is on its way over loopback; until it arrives the peek cannot see it.
    loop {
        let mut attached: Vec<Upstream> = open(
            &tcp_connect(address, true),
            LinkId::FIRST,
            &mut endpoint,
            &mut pool,
        )
        .into_iter()
        .collect();
        if endpoint.opened == Some(Opened::Fresh) {
            assert!(pool.is_empty(), "the closed one was dropped");
            break;
        }
        assert!(Instant::now() < deadline);
        // Reused before the FIN arrived: back to the pool, and look again.
        endpoint.release = Some(Release::Keep {
            keepalive: 4,
            timeout: Duration::from_secs(60),
        });
        release(&mut endpoint, &mut attached, &mut pool, |_| {});
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_end_of_stream_that_arrived_while_no_input_was_wanted_is_read_once_it_is() {
    // Edge-triggered epoll reports the upstream's last bytes and its FIN once; if `Conn` wanted
    // no input then (its client was behind), the pump must still reach the end later, with no
    // further event: a short read is not proof that nothing follows once a hang-up was seen.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut pool = IdlePool::default();
    let mut endpoint = Recorder::default();
    let connect = tcp_connect(listener.local_addr().unwrap(), false);
    let mut upstream = open(&connect, LinkId::FIRST, &mut endpoint, &mut pool).unwrap();
    pump_until(&mut upstream, &mut endpoint, |endpoint| endpoint.connected);
    let (mut theirs, _) = listener.accept().unwrap();
    theirs.write_all(b"tail").unwrap();
    drop(theirs);
    // Both have arrived once poll says readable with a hang-up.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let ready = poll::poll_one(
            upstream.fd.as_fd(),
            true,
            false,
            Some(Duration::from_secs(5)),
        )
        .unwrap()
        .expect("readable within 5 s");
        if ready.hangup {
            break;
        }
        assert!(Instant::now() < deadline, "no hang-up");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The one edge: readable and hung up, while no input is wanted.
    upstream.ready(true, false, true);
    let mut scratch = vec![0u8; 16 << 10];
    assert!(!pump(&mut upstream, &mut endpoint, &mut scratch));
    endpoint.want_up_to = usize::MAX;
    for _ in 0..3 {
        pump(&mut upstream, &mut endpoint, &mut scratch);
    }
    assert_eq!(endpoint.input, b"tail");
    assert!(endpoint.finished, "the end of stream was never read");
}

#[test]
fn a_program_gets_one_end_of_a_pair_reads_its_input_to_the_end_and_is_never_pooled() {
    let (started, program) = std::sync::mpsc::channel();
    let connect = Connect::Program(ProgramStart::new(move |stdio| {
        // A program that reads standard input to its end, then answers (as `cat | wc -c`).
        let handle = std::thread::spawn(move || {
            let mut stdio = std::os::unix::net::UnixStream::from(stdio);
            let mut input = Vec::new();
            stdio.read_to_end(&mut input).unwrap();
            write!(stdio, "read {}", input.len()).unwrap();
        });
        started.send(handle).unwrap();
    }));
    let mut pool = IdlePool::default();
    let mut endpoint = Recorder {
        out: b"hello".to_vec(),
        want_up_to: usize::MAX,
        output_ended: true,
        ..Recorder::default()
    };
    let mut upstream =
        open(&connect, LinkId::FIRST, &mut endpoint, &mut pool).expect("a socket pair");
    assert_eq!(endpoint.opened, Some(Opened::Fresh));
    assert!(endpoint.connected, "a pair is connected at once");
    pump_until(&mut upstream, &mut endpoint, |endpoint| endpoint.finished);
    assert_eq!(endpoint.input, b"read 5", "the half-close ended its input");
    program.recv().unwrap().join().unwrap();
    endpoint.release = Some(Release::Keep {
        keepalive: 8,
        timeout: Duration::from_secs(60),
    });
    let mut attached = vec![upstream];
    release(&mut endpoint, &mut attached, &mut pool, |_| {});
    assert!(attached.is_empty());
    assert_eq!(pool.len(), 0, "a program's socket is closed, never pooled");
}
