//! `RawUpstream`: a raw-socket upstream for the reverse-proxy tests. It records exactly the bytes
//! that arrive on each connection (so a test can assert what the proxy forwarded: the
//! re-serialised head, the stripped hop-by-hop fields, `X-Forwarded-For`, one framing), parses
//! the requests in them strictly (counting every request, so a smuggled second one shows), and
//! answers each with a scripted `Reply`: fixed bytes (malformed responses included), a close or a
//! reset mid-body, a delay, no answer at all, the same bytes over and over (interim responses
//! that never end), or a large body generated as it is sent.
//! Owns: its listener, its connection threads (all stopped on Drop). Must not touch: ampd.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How often a connection thread looks at the stop flag while it waits for bytes.
const POLL: Duration = Duration::from_millis(50);
/// Raw bytes kept per connection, and body bytes kept per request (the rest is only counted).
const KEEP_BYTES: usize = 4 << 20;
/// Largest request head the upstream parses.
const MAX_HEAD: usize = 64 << 10;

/// One request as the upstream parsed it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Which accepted connection (0, 1, …) carried it.
    pub connection: usize,
    pub method: String,
    pub target: String,
    pub version: String,
    /// Fields in wire order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body's first `KEEP_BYTES` bytes (de-chunked).
    pub body: Vec<u8>,
    pub body_len: u64,
    /// `Transfer-Encoding: chunked` framed it.
    pub chunked: bool,
}

impl Seen {
    /// Every value of fields with this name (case-insensitive), in order.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
            .collect()
    }

    /// The value of the only field with this name.
    ///
    /// # Panics
    /// If the field appears more than once.
    pub fn header(&self, name: &str) -> Option<&str> {
        let values = self.values(name);
        assert!(values.len() <= 1, "{name} repeated in {:?}", self.headers);
        values.first().copied()
    }
}

/// What the upstream does with one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Write these bytes; the connection stays open for the next request.
    Bytes(Vec<u8>),
    /// Write these bytes, then close (FIN).
    BytesThenClose(Vec<u8>),
    /// Write these bytes, then reset the connection (RST: `SO_LINGER` 0).
    BytesThenReset(Vec<u8>),
    /// Wait, then do the inner reply.
    Delay(Duration, Box<Reply>),
    /// Never answer: hold the connection until the peer closes it or the upstream stops.
    Never,
    /// Write these bytes every `every`, for ever: until the peer closes or the upstream stops
    /// (an interim response that never ends in a final one).
    Repeat { bytes: Vec<u8>, every: Duration },
    /// `200` with `Content-Length: N` and `N` bytes of `pattern(offset)`, produced as they are
    /// written (nothing of it held); the connection stays open.
    Generated(u64),
    /// `200` with `Content-Length: declared` but only `sent` bytes of the pattern, then a close
    /// (FIN): a server that dies mid-body.
    Truncated { declared: u64, sent: u64 },
}

impl Reply {
    /// `200 OK` with this body and its `Content-Length`, plus `X-Upstream: name`.
    pub fn ok(name: &str, body: &str) -> Reply {
        Reply::Bytes(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Upstream: {name}\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    }

    /// A response of this status, with a short body naming it.
    pub fn status(status: u16) -> Reply {
        let body = format!("status {status}\n");
        Reply::Bytes(
            format!(
                "HTTP/1.1 {status} Scripted\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    }

    /// Fixed bytes, whatever they are (for malformed responses).
    pub fn raw(bytes: impl AsRef<[u8]>) -> Reply {
        Reply::Bytes(bytes.as_ref().to_vec())
    }
}

/// The byte at `offset` of every generated body: a 251-byte cycle (a prime, so a shifted or
/// repeated block shows).
pub fn pattern(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// Fills `buffer` with `pattern` starting at `offset`.
pub fn fill_pattern(offset: u64, buffer: &mut [u8]) {
    for (index, byte) in buffer.iter_mut().enumerate() {
        *byte = pattern(offset + index as u64);
    }
}

type Script = dyn Fn(&Seen) -> Reply + Send + Sync;

struct Shared {
    stop: AtomicBool,
    accepted: AtomicUsize,
    /// Raw bytes received, per connection (the first `KEEP_BYTES`).
    raw: Mutex<Vec<Vec<u8>>>,
    seen: Mutex<Vec<Seen>>,
    /// Bytes that could not be parsed as a request, per connection that sent them.
    malformed: Mutex<Vec<(usize, String)>>,
    /// Connections whose peer has closed (or that the upstream closed).
    closed: AtomicUsize,
    script: Box<Script>,
}

/// A scripted upstream on `127.0.0.1:0`. Stopped on Drop (the listener closed, every connection
/// shut down).
pub struct RawUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    workers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl RawUpstream {
    /// Starts an upstream that answers every request with `script(request)`.
    pub fn start(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            raw: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
            malformed: Mutex::new(Vec::new()),
            closed: AtomicUsize::new(0),
            script: Box::new(script),
        });
        let workers = Arc::new(Mutex::new(Vec::new()));
        let acceptor = {
            let shared = Arc::clone(&shared);
            let workers = Arc::clone(&workers);
            thread::spawn(move || accept_loop(&listener, &shared, &workers))
        };
        RawUpstream {
            addr,
            shared,
            acceptor: Some(acceptor),
            workers,
        }
    }

    /// An upstream that answers every request `200` with `body`, naming itself `name` in
    /// `X-Upstream`.
    pub fn answering(name: &'static str, body: &'static str) -> RawUpstream {
        RawUpstream::start(move |_| Reply::ok(name, body))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections that have ended (closed by the peer, or by a scripted close or reset).
    pub fn connections_closed(&self) -> usize {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Every request parsed so far, in arrival order.
    pub fn requests(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The raw bytes connection `index` carried so far.
    pub fn raw(&self, index: usize) -> Vec<u8> {
        self.shared
            .raw
            .lock()
            .unwrap()
            .get(index)
            .cloned()
            .unwrap_or_default()
    }

    /// Every connection's raw bytes, concatenated in connection order.
    pub fn all_raw(&self) -> Vec<u8> {
        self.shared.raw.lock().unwrap().concat()
    }

    /// Bytes that arrived and did not parse as a request: (connection, what was wrong).
    pub fn malformed(&self) -> Vec<(usize, String)> {
        self.shared.malformed.lock().unwrap().clone()
    }

    /// Waits (bounded) until `count` requests have been parsed; the requests.
    ///
    /// # Panics
    /// If they do not arrive within `within`.
    pub fn wait_requests(&self, count: usize, within: Duration) -> Vec<Seen> {
        let deadline = Instant::now() + within;
        loop {
            let seen = self.requests();
            if seen.len() >= count {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "{count} requests did not reach the upstream within {within:?}: {seen:?}"
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits (bounded) until `count` connections have ended; false if they did not.
    pub fn wait_closed(&self, count: usize, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.connections_closed() >= count {
                return true;
            }
            thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Stops listening and shuts every connection down; later connects are refused.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let workers: Vec<_> = self.workers.lock().unwrap().drain(..).collect();
        for worker in workers {
            let _ = worker.join();
        }
    }
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, workers: &Mutex<Vec<JoinHandle<()>>>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let index = shared.accepted.fetch_add(1, Ordering::SeqCst);
        shared.raw.lock().unwrap().push(Vec::new());
        let shared = Arc::clone(shared);
        let handle = thread::spawn(move || {
            let _ = serve_connection(stream, index, &shared);
            shared.closed.fetch_add(1, Ordering::SeqCst);
        });
        workers.lock().unwrap().push(handle);
    }
}

/// The reading side of one connection: bytes received and not yet parsed.
struct Wire {
    stream: TcpStream,
    buffer: Vec<u8>,
    index: usize,
    peer_closed: bool,
}

impl Wire {
    /// Reads more bytes (bounded by the stop flag); Ok(0) on EOF or stop.
    fn fill(&mut self, shared: &Shared) -> io::Result<usize> {
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            if shared.stop.load(Ordering::SeqCst) {
                return Ok(0);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.peer_closed = true;
                    return Ok(0);
                }
                Ok(n) => {
                    let mut raw = shared.raw.lock().unwrap();
                    let kept = &mut raw[self.index];
                    let room = KEEP_BYTES.saturating_sub(kept.len()).min(n);
                    kept.extend_from_slice(&chunk[..room]);
                    drop(raw);
                    self.buffer.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(error) => return Err(error),
            }
        }
    }
}

fn serve_connection(stream: TcpStream, index: usize, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(POLL))?;
    stream.set_nodelay(true)?;
    let mut wire = Wire {
        stream,
        buffer: Vec::new(),
        index,
        peer_closed: false,
    };
    loop {
        let seen = match read_request(&mut wire, shared) {
            Ok(Some(seen)) => seen,
            Ok(None) => return Ok(()),
            Err(problem) => {
                shared.malformed.lock().unwrap().push((index, problem));
                return Ok(());
            }
        };
        shared.seen.lock().unwrap().push(seen.clone());
        let reply = (shared.script)(&seen);
        if !perform(&mut wire, shared, reply)? {
            return Ok(());
        }
    }
}

/// Carries out `reply`; false when the connection is finished with.
fn perform(wire: &mut Wire, shared: &Shared, reply: Reply) -> io::Result<bool> {
    match reply {
        Reply::Bytes(bytes) => {
            send(wire, shared, &bytes)?;
            Ok(true)
        }
        Reply::BytesThenClose(bytes) => {
            send(wire, shared, &bytes)?;
            let _ = wire.stream.shutdown(Shutdown::Both);
            Ok(false)
        }
        Reply::BytesThenReset(bytes) => {
            send(wire, shared, &bytes)?;
            ampd_sys::socket::set_linger(wire.stream.as_fd(), Some(Duration::ZERO))?;
            Ok(false)
        }
        Reply::Delay(wait, inner) => {
            let deadline = Instant::now() + wait;
            while Instant::now() < deadline {
                if shared.stop.load(Ordering::SeqCst) {
                    return Ok(false);
                }
                thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
            }
            perform(wire, shared, *inner)
        }
        Reply::Never => {
            // Keep reading (and recording) until the peer goes or the upstream stops.
            while wire.fill(shared)? > 0 {}
            Ok(false)
        }
        Reply::Repeat { bytes, every } => {
            // `send` fails once the peer has gone (EPIPE, reset) or the upstream stops.
            loop {
                send(wire, shared, &bytes)?;
                thread::sleep(every);
            }
        }
        Reply::Generated(len) => {
            send_generated(wire, shared, len, len)?;
            Ok(true)
        }
        Reply::Truncated { declared, sent } => {
            send_generated(wire, shared, declared, sent)?;
            let _ = wire.stream.shutdown(Shutdown::Both);
            Ok(false)
        }
    }
}

/// A `200` head declaring `declared` bytes, then the first `sent` bytes of the pattern.
fn send_generated(wire: &mut Wire, shared: &Shared, declared: u64, sent: u64) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {declared}\r\n\r\n"
    );
    send(wire, shared, head.as_bytes())?;
    let mut block = vec![0u8; 64 << 10];
    let mut done = 0u64;
    while done < sent {
        let take = (sent - done).min(block.len() as u64) as usize;
        fill_pattern(done, &mut block[..take]);
        send(wire, shared, &block[..take])?;
        done += take as u64;
    }
    Ok(())
}

/// Writes all of `bytes`, waiting as long as the peer takes them (a slow reader is what some
/// tests make), but giving up when the upstream stops.
fn send(wire: &mut Wire, shared: &Shared, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        if shared.stop.load(Ordering::SeqCst) {
            return Err(io::Error::other("upstream stopped"));
        }
        match wire.stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Parses the next request off the wire: `Ok(None)` when the peer closed (or the upstream
/// stopped) between requests, `Err` naming what was malformed.
fn read_request(wire: &mut Wire, shared: &Shared) -> Result<Option<Seen>, String> {
    let head_end = loop {
        if let Some(end) = super::http::find(&wire.buffer, b"\r\n\r\n") {
            break end;
        }
        if wire.buffer.len() > MAX_HEAD {
            return Err("request head too large".into());
        }
        match wire.fill(shared) {
            Ok(0) if wire.buffer.is_empty() => return Ok(None),
            Ok(0) => return Err(format!("closed inside a head: {:?}", lossy(&wire.buffer))),
            Ok(_) => {}
            Err(error) => return Err(format!("read: {error}")),
        }
    };
    let head = std::str::from_utf8(&wire.buffer[..head_end])
        .map_err(|_| "head is not UTF-8".to_string())?
        .to_string();
    wire.buffer.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(format!("bad request line {request_line:?}"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("bad version in {request_line:?}"));
    }
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("header without colon: {line:?}"))?;
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(format!("bad field name in {line:?}"));
        }
        if value.contains(|c: char| c.is_control() && c != '\t') {
            return Err(format!("control character in {line:?}"));
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    let mut seen = Seen {
        connection: wire.index,
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        body: Vec::new(),
        body_len: 0,
        chunked: false,
    };
    let lengths = seen.values("content-length");
    let encodings = seen.values("transfer-encoding");
    if !encodings.is_empty() && !lengths.is_empty() {
        return Err("both Transfer-Encoding and Content-Length".into());
    }
    if lengths.len() > 1 {
        return Err(format!("{} Content-Length fields", lengths.len()));
    }
    if encodings.len() > 1
        || encodings
            .first()
            .is_some_and(|te| !te.eq_ignore_ascii_case("chunked"))
    {
        return Err(format!("Transfer-Encoding {encodings:?}"));
    }
    let expects_continue = seen
        .header("expect")
        .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"));
    if let Some(length) = lengths.first() {
        let length: u64 = length
            .parse()
            .map_err(|_| format!("bad Content-Length {length:?}"))?;
        if expects_continue && length > 0 && wire.buffer.is_empty() {
            let _ = wire.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        read_exactly(wire, shared, &mut seen, length)?;
    } else if !encodings.is_empty() {
        seen.chunked = true;
        if expects_continue && wire.buffer.is_empty() {
            let _ = wire.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        read_chunked(wire, shared, &mut seen)?;
    }
    Ok(Some(seen))
}

fn read_exactly(
    wire: &mut Wire,
    shared: &Shared,
    seen: &mut Seen,
    length: u64,
) -> Result<(), String> {
    let mut left = length;
    while left > 0 {
        if wire.buffer.is_empty() {
            match wire.fill(shared) {
                Ok(0) => return Err(format!("closed with {left} body bytes missing")),
                Ok(_) => {}
                Err(error) => return Err(format!("read: {error}")),
            }
        }
        let take = (left.min(wire.buffer.len() as u64)) as usize;
        let room = KEEP_BYTES.saturating_sub(seen.body.len()).min(take);
        seen.body.extend_from_slice(&wire.buffer[..room]);
        wire.buffer.drain(..take);
        seen.body_len += take as u64;
        left -= take as u64;
    }
    Ok(())
}

fn read_line(wire: &mut Wire, shared: &Shared) -> Result<String, String> {
    loop {
        if let Some(end) = super::http::find(&wire.buffer, b"\r\n") {
            let line = lossy(&wire.buffer[..end]);
            wire.buffer.drain(..end + 2);
            return Ok(line);
        }
        if wire.buffer.len() > 4096 {
            return Err("chunk line too long".into());
        }
        match wire.fill(shared) {
            Ok(0) => return Err("closed inside chunked framing".into()),
            Ok(_) => {}
            Err(error) => return Err(format!("read: {error}")),
        }
    }
}

fn read_chunked(wire: &mut Wire, shared: &Shared, seen: &mut Seen) -> Result<(), String> {
    loop {
        let line = read_line(wire, shared)?;
        let size_text = line.split(';').next().unwrap_or_default();
        let size = u64::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size line {line:?}"))?;
        if size == 0 {
            // Trailer fields, up to the empty line.
            while !read_line(wire, shared)?.is_empty() {}
            return Ok(());
        }
        read_exactly(wire, shared, seen, size)?;
        if !read_line(wire, shared)?.is_empty() {
            return Err("chunk data not followed by CRLF".into());
        }
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
