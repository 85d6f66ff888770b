//! One active health check: `GET path` to one server over a blocking socket, within the
//! check's timeout, and the status it answers.
//!
//! Owns: the check's request and reading its status line, and the blocking socket, deadline
//! and error kinds that `fastcgi`'s `FCGI_GET_VALUES` exchange shares. Must not touch: the
//! verdict's effect on the server (`health`), scheduling checks (`checks`).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ampd_http::fastcgi::FastCgiError;

use crate::config::{ActiveHealth, UpstreamAddress};

/// Why a check got no status.
#[derive(Debug)]
pub(super) enum ProbeError {
    Connect(io::Error),
    Send(io::Error),
    Receive(io::Error),
    /// The whole check took longer than `timeout`.
    TimedOut,
    /// The server closed the connection before a status line.
    Closed,
    /// What came back does not start with an HTTP/1 status line.
    Malformed,
    /// A FastCGI application's records broke the protocol (or something else answered).
    FastCgi(FastCgiError),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::Connect(error) => write!(formatter, "connect: {error}"),
            ProbeError::Send(error) => write!(formatter, "send: {error}"),
            ProbeError::Receive(error) => write!(formatter, "receive: {error}"),
            ProbeError::TimedOut => formatter.write_str("timed out"),
            ProbeError::Closed => formatter.write_str("closed before answering"),
            ProbeError::Malformed => formatter.write_str("not an HTTP/1 status line"),
            ProbeError::FastCgi(error) => write!(formatter, "FastCGI: {error}"),
        }
    }
}

/// The most read while looking for the end of the status line (a status line is short; a
/// server that sends this much without one is not answering HTTP).
const STATUS_LINE_LIMIT: usize = 1024;

/// A connected check socket, TCP or unix.
pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(super) fn connect(address: &UpstreamAddress, timeout: Duration) -> io::Result<Stream> {
        Ok(match address {
            UpstreamAddress::Tcp(address) => {
                Stream::Tcp(TcpStream::connect_timeout(address, timeout)?)
            }
            // A unix connect answers at once unless the listener's backlog is full; `checks`
            // counts a check still blocked there after its timeout as failed.
            UpstreamAddress::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
        })
    }

    pub(super) fn set_timeouts(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => {
                stream.set_read_timeout(Some(timeout))?;
                stream.set_write_timeout(Some(timeout))
            }
            Stream::Unix(stream) => {
                stream.set_read_timeout(Some(timeout))?;
                stream.set_write_timeout(Some(timeout))
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.read(buffer),
            Stream::Unix(stream) => stream.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.write(bytes),
            Stream::Unix(stream) => stream.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Time left before `deadline`; none left is a timeout.
pub(super) fn remaining(deadline: Instant) -> Result<Duration, ProbeError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ProbeError::TimedOut);
    }
    Ok(left)
}

/// A socket timeout shows as `WouldBlock` (or `TimedOut`) from a blocking read or write.
pub(super) fn classify(error: io::Error, wrap: fn(io::Error) -> ProbeError) -> ProbeError {
    match error.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ProbeError::TimedOut,
        _ => wrap(error),
    }
}

/// The request: `Host` is the server's address as a client would name it (`localhost` for a
/// unix socket, as `proxy_host = "upstream"` sends); `Connection: close`, so the server ends the
/// exchange and no connection is left idle on it.
fn request(address: &UpstreamAddress, path: &str) -> String {
    let host = match address {
        UpstreamAddress::Tcp(address) => address.to_string(),
        UpstreamAddress::Unix(_) => "localhost".to_string(),
    };
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ampd-health-check\r\nConnection: close\r\n\r\n"
    )
}

/// The status code of `HTTP/1.x NNN ...` (RFC 9112 §4), once a whole line has arrived.
fn status_of(line: &[u8]) -> Result<u16, ProbeError> {
    match line {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor, b' ', a, b, c, rest @ ..]
            if minor.is_ascii_digit()
                && [a, b, c].iter().all(|digit| digit.is_ascii_digit())
                && matches!(rest.first(), Some(b' ' | b'\r')) =>
        {
            Ok([a, b, c]
                .iter()
                .fold(0, |status, digit| status * 10 + u16::from(**digit - b'0')))
        }
        _ => Err(ProbeError::Malformed),
    }
}

/// Ask `address` for `check.path`; its status, or why there is none.
pub(super) fn probe(address: &UpstreamAddress, check: &ActiveHealth) -> Result<u16, ProbeError> {
    let deadline = Instant::now() + check.timeout;
    let mut stream = Stream::connect(address, check.timeout)
        .map_err(|error| classify(error, ProbeError::Connect))?;
    stream
        .set_timeouts(remaining(deadline)?)
        .map_err(ProbeError::Send)?;
    stream
        .write_all(request(address, &check.path).as_bytes())
        .map_err(|error| classify(error, ProbeError::Send))?;
    let mut received = Vec::with_capacity(256);
    let mut buffer = [0u8; 256];
    loop {
        stream
            .set_timeouts(remaining(deadline)?)
            .map_err(ProbeError::Receive)?;
        let count = match stream.read(&mut buffer) {
            // A signal to this thread (a child's end, under the CGI launcher) is no answer.
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            read => read.map_err(|error| classify(error, ProbeError::Receive))?,
        };
        if count == 0 {
            return Err(ProbeError::Closed);
        }
        received.extend_from_slice(&buffer[..count]);
        if let Some(end) = received.windows(2).position(|pair| pair == b"\r\n") {
            return status_of(&received[..end + 2]);
        }
        if received.len() > STATUS_LINE_LIMIT {
            return Err(ProbeError::Malformed);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::net::{SocketAddr, TcpListener};
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU16, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::Duration;

    /// A test upstream on 127.0.0.1 (or a unix socket): answers every request with the status
    /// it is set to (0: reads the request and says nothing), and keeps the request heads.
    pub(in crate::upstream) struct TestServer {
        pub address: UpstreamAddress,
        pub status: Arc<AtomicU16>,
        pub heads: Arc<Mutex<Vec<String>>>,
    }

    fn answer<S: Read + Write>(mut stream: S, status: &AtomicU16, heads: &Mutex<Vec<String>>) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        heads
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&head).into_owned());
        match status.load(Ordering::Relaxed) {
            0 => thread::sleep(Duration::from_secs(3)),
            code => {
                let _ = write!(
                    stream,
                    "HTTP/1.1 {code} Whatever\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        }
    }

    impl TestServer {
        pub fn tcp(status: u16) -> TestServer {
            TestServer::tcp_on(TcpListener::bind("127.0.0.1:0").unwrap(), status)
        }

        pub fn tcp_on(listener: TcpListener, status: u16) -> TestServer {
            let address = UpstreamAddress::Tcp(listener.local_addr().unwrap());
            let server = TestServer {
                address,
                status: Arc::new(AtomicU16::new(status)),
                heads: Arc::default(),
            };
            let (status, heads) = (server.status.clone(), server.heads.clone());
            thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let (status, heads) = (status.clone(), heads.clone());
                    thread::spawn(move || answer(stream, &status, &heads));
                }
            });
            server
        }

        pub fn unix(path: PathBuf, status: u16) -> TestServer {
            let _ = std::fs::remove_file(&path);
            let listener = UnixListener::bind(&path).unwrap();
            let server = TestServer {
                address: UpstreamAddress::Unix(path),
                status: Arc::new(AtomicU16::new(status)),
                heads: Arc::default(),
            };
            let (status, heads) = (server.status.clone(), server.heads.clone());
            thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let (status, heads) = (status.clone(), heads.clone());
                    thread::spawn(move || answer(stream, &status, &heads));
                }
            });
            server
        }
    }

    /// An address where nothing listens (bound, then closed).
    pub(in crate::upstream) fn closed_address() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    pub(in crate::upstream) fn check(timeout: Duration) -> ActiveHealth {
        ActiveHealth {
            path: "/health?deep=1".into(),
            interval: Duration::from_millis(20),
            timeout,
            expect: 200,
            rise: 2,
            fall: 2,
        }
    }

    #[test]
    fn a_tcp_server_answers_its_status_to_a_get_with_host() {
        let server = TestServer::tcp(200);
        let status = probe(&server.address, &check(Duration::from_secs(5))).unwrap();
        assert_eq!(status, 200);
        server.status.store(503, Ordering::Relaxed);
        assert_eq!(
            probe(&server.address, &check(Duration::from_secs(5))).unwrap(),
            503
        );
        let heads = server.heads.lock().unwrap();
        let expected_start = format!(
            "GET /health?deep=1 HTTP/1.1\r\nHost: {}\r\n",
            server.address
        );
        assert!(heads[0].starts_with(&expected_start), "{:?}", heads[0]);
        assert!(
            heads[0].contains("\r\nConnection: close\r\n"),
            "{:?}",
            heads[0]
        );
    }

    #[test]
    fn a_unix_socket_server_is_checked_with_host_localhost() {
        let path = std::env::temp_dir().join(format!("ampd-probe-{}.sock", std::process::id()));
        let server = TestServer::unix(path.clone(), 204);
        assert_eq!(
            probe(&server.address, &check(Duration::from_secs(5))).unwrap(),
            204
        );
        assert!(server.heads.lock().unwrap()[0].contains("\r\nHost: localhost\r\n"));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_closed_port_is_a_connect_error() {
        let address = UpstreamAddress::Tcp(closed_address());
        let error = probe(&address, &check(Duration::from_secs(5))).unwrap_err();
        assert!(matches!(error, ProbeError::Connect(_)), "{error}");
    }

    #[test]
    fn a_silent_server_times_out_within_the_timeout() {
        let server = TestServer::tcp(0);
        let started = Instant::now();
        let error = probe(&server.address, &check(Duration::from_millis(300))).unwrap_err();
        assert!(matches!(error, ProbeError::TimedOut), "{error}");
        assert!(started.elapsed() < Duration::from_millis(2_000));
    }

    #[test]
    fn garbage_and_early_close_are_failures() {
        for (reply, expect_closed) in [(&b"SSH-2.0-OpenSSH\r\n"[..], false), (b"HTTP/1.1 2", true)]
        {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let address = UpstreamAddress::Tcp(listener.local_addr().unwrap());
            let reply = reply.to_vec();
            thread::spawn(move || {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buffer = [0u8; 512];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(&reply);
            });
            let error = probe(&address, &check(Duration::from_secs(5))).unwrap_err();
            if expect_closed {
                assert!(matches!(error, ProbeError::Closed), "{error}");
            } else {
                assert!(matches!(error, ProbeError::Malformed), "{error}");
            }
        }
    }
}
