//! A small, strict HTTP/1.x client over raw sockets: writes exactly the bytes a test gives it and
//! parses responses one at a time off the stream (so pipelined responses can be split).
//! Owns: the wire format the tests expect. Must not touch: the server process (see `server.rs`).

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// Default bound on every socket read or write in the suite.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response head the reader accepts.
const MAX_HEAD: usize = 64 * 1024;

/// One parsed response.
#[derive(Clone, Debug)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Header fields in wire order, names as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the only field with this name (case-insensitive).
    ///
    /// # Panics
    /// If the field appears more than once: responses in this suite must not repeat fields.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut values = self
            .headers
            .iter()
            .filter(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str());
        let first = values.next();
        assert!(
            values.next().is_none(),
            "header {name} appears more than once in {:?}",
            self.headers
        );
        first
    }

    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn has_header(&self, name: &str) -> bool {
        self.headers_named(name).next().is_some()
    }

    /// True if a `Connection` field lists `token`.
    pub fn connection_has(&self, token: &str) -> bool {
        self.headers_named("connection")
            .flat_map(|value| value.split(','))
            .any(|item| item.trim().eq_ignore_ascii_case(token))
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// All header (name lowercased, value) pairs except `Date`, for HEAD-vs-GET comparisons.
    pub fn headers_without_date(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter(|(name, _)| !name.eq_ignore_ascii_case("date"))
            .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
            .collect()
    }

    /// Every response from ampd carries these.
    pub fn assert_common_headers(&self) {
        assert_eq!(self.header("server"), Some("ampd"), "{self:?}");
        assert!(self.has_header("date"), "no Date in {self:?}");
        if self.status != 204 && self.status != 304 && !(100..200).contains(&self.status) {
            assert!(
                self.has_header("content-length"),
                "no Content-Length in {self:?}"
            );
        }
    }
}

/// A client connection with its own read buffer.
pub struct Conn {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Conn {
    /// Connects with `IO_TIMEOUT` on reads and writes.
    ///
    /// # Panics
    /// If the connection cannot be made within the timeout.
    pub fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|error| panic!("connect {addr}: {error}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buffer: Vec::new(),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
    }

    /// Writes all bytes.
    ///
    /// # Errors
    /// Whatever the socket says (e.g. the server closed and reset the connection).
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// # Panics
    /// If the write fails.
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.try_send(bytes.as_ref())
            .unwrap_or_else(|error| panic!("write to server: {error}"));
    }

    /// Sends `GET path` with `Host`, plus `extra` header lines, and reads the response.
    pub fn get(&mut self, path: &str, extra: &[(&str, &str)]) -> Response {
        self.send(build_request("GET", path, extra));
        self.read_response("GET")
    }

    /// Reads one response to a request of method `method` (HEAD responses have no body).
    ///
    /// # Panics
    /// On a malformed response, a timeout, or EOF before a whole response.
    pub fn read_response(&mut self, method: &str) -> Response {
        self.try_read_response(method)
            .unwrap_or_else(|error| panic!("reading response: {error}"))
    }

    /// # Errors
    /// `UnexpectedEof` if the server closed before a whole response; timeouts; malformed input
    /// as `InvalidData`.
    pub fn try_read_response(&mut self, method: &str) -> io::Result<Response> {
        self.read_one(method, false)
    }

    /// Reads one response that may also be chunked (a proxied one): the body de-chunked, the
    /// `Transfer-Encoding` field left in `headers`.
    ///
    /// # Errors
    /// As `try_read_response`, and malformed chunked framing as `InvalidData`.
    pub fn try_read_proxied(&mut self, method: &str) -> io::Result<Response> {
        self.read_one(method, true)
    }

    /// # Panics
    /// As `read_response`.
    pub fn read_proxied(&mut self, method: &str) -> Response {
        self.try_read_proxied(method)
            .unwrap_or_else(|error| panic!("reading proxied response: {error}"))
    }

    fn read_one(&mut self, method: &str, allow_chunked: bool) -> io::Result<Response> {
        loop {
            let head_end = find(&self.buffer, b"\r\n\r\n");
            if let Some(end) = head_end {
                let head = self.buffer[..end].to_vec();
                let (version, status, reason, headers) = parse_head(&head)?;
                let after_head = end + 4;
                let mut response = Response {
                    version,
                    status,
                    reason,
                    headers,
                    body: Vec::new(),
                };
                if (100..200).contains(&status) {
                    self.buffer.drain(..after_head);
                    continue; // interim responses (100 Continue) are skipped
                }
                let body_len = body_length(&response, method, allow_chunked)?;
                match body_len {
                    BodyLength::Chunked => {
                        self.buffer.drain(..after_head);
                        response.body = self.read_chunked_body()?;
                    }
                    BodyLength::Exactly(len) => {
                        self.fill_to(after_head + len)?;
                        response.body = self.buffer[after_head..after_head + len].to_vec();
                        self.buffer.drain(..after_head + len);
                    }
                    BodyLength::UntilClose => {
                        self.buffer.drain(..after_head);
                        let rest = self.read_to_end()?;
                        response.body = rest;
                    }
                }
                return Ok(response);
            }
            if self.buffer.len() > MAX_HEAD {
                return Err(invalid("response head too large"));
            }
            if self.read_more()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "server closed after {} bytes of a response head: {:?}",
                        self.buffer.len(),
                        String::from_utf8_lossy(&self.buffer)
                    ),
                ));
            }
        }
    }

    /// Reads until EOF (bounded by the read timeout on each read), returning buffered + new bytes.
    ///
    /// # Errors
    /// A read error other than a reset (a reset counts as EOF).
    pub fn read_to_end(&mut self) -> io::Result<Vec<u8>> {
        loop {
            match self.read_more() {
                Ok(0) => break,
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::ConnectionReset => break,
                Err(error) => return Err(error),
            }
        }
        Ok(std::mem::take(&mut self.buffer))
    }

    /// True if the server closes the connection (EOF or reset) within `within`, having sent no
    /// further bytes. Stray bytes count as "not closed cleanly" and fail loudly.
    ///
    /// # Panics
    /// If the server sends more bytes instead of closing.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        if within.is_zero() {
            return false;
        }
        self.stream.set_read_timeout(Some(within)).unwrap();
        let mut chunk = [0u8; 4096];
        match super::read_some(&mut self.stream, &mut chunk) {
            Ok(0) => true,
            Ok(n) => {
                self.buffer.extend_from_slice(&chunk[..n]);
                // A 408 before the close is allowed by callers that read it first; here any
                // byte after the expected responses is a protocol error.
                panic!(
                    "expected close, got more bytes: {:?}",
                    String::from_utf8_lossy(&self.buffer)
                );
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                true
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                false
            }
            Err(error) => panic!("read while waiting for close: {error}"),
        }
    }

    /// Bytes received but not yet consumed by a parsed response.
    pub fn leftover(&self) -> &[u8] {
        &self.buffer
    }

    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// De-chunks a body at the front of the buffer (RFC 9112 §7.1), trailers skipped.
    fn read_chunked_body(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.take_line()?;
            let size_text = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| invalid(&format!("bad chunk size line {line:?}")))?;
            if size == 0 {
                while !self.take_line()?.is_empty() {}
                return Ok(body);
            }
            self.fill_to(size + 2)?;
            body.extend_from_slice(&self.buffer[..size]);
            if &self.buffer[size..size + 2] != b"\r\n" {
                return Err(invalid("chunk data not followed by CRLF"));
            }
            self.buffer.drain(..size + 2);
        }
    }

    fn take_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(end) = find(&self.buffer, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buffer[..end]).into_owned();
                self.buffer.drain(..end + 2);
                return Ok(line);
            }
            if self.buffer.len() > MAX_HEAD {
                return Err(invalid("chunk line too long"));
            }
            if self.read_more()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed inside a chunked body",
                ));
            }
        }
    }

    fn fill_to(&mut self, len: usize) -> io::Result<()> {
        while self.buffer.len() < len {
            if self.read_more()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("body cut short: have {} of {len} bytes", self.buffer.len()),
                ));
            }
        }
        Ok(())
    }

    fn read_more(&mut self) -> io::Result<usize> {
        let mut chunk = vec![0u8; 256 * 1024];
        let n = super::read_some(&mut self.stream, &mut chunk)?;
        self.buffer.extend_from_slice(&chunk[..n]);
        Ok(n)
    }
}

enum BodyLength {
    Exactly(usize),
    Chunked,
    UntilClose,
}

fn body_length(response: &Response, method: &str, allow_chunked: bool) -> io::Result<BodyLength> {
    if method.eq_ignore_ascii_case("HEAD") || response.status == 204 || response.status == 304 {
        return Ok(BodyLength::Exactly(0));
    }
    if allow_chunked && response.has_header("transfer-encoding") {
        if response.has_header("content-length") {
            return Err(invalid(
                "both Transfer-Encoding and Content-Length in a response",
            ));
        }
        let last = response
            .headers_named("transfer-encoding")
            .flat_map(|value| value.split(','))
            .last()
            .map(str::trim);
        if !last.is_some_and(|coding| coding.eq_ignore_ascii_case("chunked")) {
            return Err(invalid("Transfer-Encoding not ending in chunked"));
        }
        return Ok(BodyLength::Chunked);
    }
    if response.has_header("transfer-encoding") {
        return Err(invalid("static responses must not be chunked"));
    }
    let mut lengths = response.headers_named("content-length");
    match (lengths.next(), lengths.next()) {
        (Some(value), None) => value
            .trim()
            .parse::<usize>()
            .map(BodyLength::Exactly)
            .map_err(|_| invalid("bad Content-Length in response")),
        (Some(_), Some(_)) => Err(invalid("two Content-Length fields in response")),
        (None, _) => Ok(BodyLength::UntilClose),
    }
}

type Head = (String, u16, String, Vec<(String, String)>);

fn parse_head(head: &[u8]) -> io::Result<Head> {
    let text = std::str::from_utf8(head).map_err(|_| invalid("response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default().to_string();
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(invalid(&format!("bad status line {status_line:?}")));
    }
    let status = parts
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|code| (100..600).contains(code))
        .ok_or_else(|| invalid(&format!("bad status line {status_line:?}")))?;
    let reason = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(&format!("header line without colon: {line:?}")))?;
        if name.is_empty() || name.contains(|c: char| c.is_whitespace()) {
            return Err(invalid(&format!("bad header name in {line:?}")));
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    Ok((version, status, reason, headers))
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// An `Authorization` value for HTTP Basic (RFC 7617): `Basic base64(user:password)`.
pub fn basic_authorization(user: &str, password: &str) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{user}:{password}").into_bytes();
    let mut out = String::from("Basic ");
    for chunk in bytes.chunks(3) {
        let value = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for index in 0..4 {
            if index <= chunk.len() {
                out.push(TABLE[((value >> (18 - 6 * index)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `METHOD path HTTP/1.1` with `Host: test` and the given extra fields.
pub fn build_request(method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in extra {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.into_bytes()
}

/// Sends one request on a fresh connection and reads its response (no `Connection: close` is
/// added: the caller's headers decide).
pub fn request(addr: SocketAddr, method: &str, path: &str, extra: &[(&str, &str)]) -> Response {
    let mut conn = Conn::open(addr);
    conn.send(build_request(method, path, extra));
    conn.read_response(method)
}

/// `GET path` on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path, &[])
}

/// Writes `bytes` on a fresh connection, half-closes, and returns everything the server sends
/// until it closes (each read bounded by `IO_TIMEOUT`).
pub fn send_raw(addr: SocketAddr, bytes: impl AsRef<[u8]>) -> Vec<u8> {
    let mut conn = Conn::open(addr);
    // The server may close (and reset) before reading everything; that is not a test failure.
    let _ = conn.try_send(bytes.as_ref());
    conn.shutdown_write();
    conn.read_to_end()
        .unwrap_or_else(|error| panic!("read: {error}"))
}

/// Sends `bytes` and reads until the server closes, without closing our side first: for a
/// request that ends with `Connection: close` to a proxy location, where a client's half-close
/// while the response is awaited means it gave up (as nginx and Go's proxy read it).
pub fn send_raw_open(addr: SocketAddr, bytes: impl AsRef<[u8]>) -> Vec<u8> {
    let mut conn = Conn::open(addr);
    let _ = conn.try_send(bytes.as_ref());
    conn.read_to_end()
        .unwrap_or_else(|error| panic!("read: {error}"))
}

/// Parses every response in `bytes` (e.g. from `send_raw`) in order.
pub fn parse_all(bytes: &[u8], method: &str) -> Vec<Response> {
    let mut responses = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let end = find(rest, b"\r\n\r\n").expect("incomplete response head");
        let (version, status, reason, headers) =
            parse_head(&rest[..end]).expect("malformed response head");
        let mut response = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
        };
        let after = end + 4;
        let len = match body_length(&response, method, false).expect("body length") {
            BodyLength::Exactly(len) => len,
            BodyLength::Chunked => unreachable!("chunked is refused in parse_all"),
            BodyLength::UntilClose => rest.len() - after,
        };
        response.body = rest[after..after + len].to_vec();
        rest = &rest[after + len..];
        responses.push(response);
    }
    responses
}

/// Parses a `multipart/byteranges` body: each part's (Content-Type, Content-Range, bytes).
pub fn parse_multipart(body: &[u8], boundary: &str) -> Vec<(Option<String>, String, Vec<u8>)> {
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut position = find(body, delimiter.as_bytes()).expect("first boundary");
    loop {
        position += delimiter.len();
        if body[position..].starts_with(b"--") {
            break; // close-delimiter
        }
        assert!(
            body[position..].starts_with(b"\r\n"),
            "boundary not followed by CRLF"
        );
        position += 2;
        let head_end = position + find(&body[position..], b"\r\n\r\n").expect("part head end");
        let head = std::str::from_utf8(&body[position..head_end]).expect("part head utf-8");
        let mut content_type = None;
        let mut content_range = None;
        for line in head.split("\r\n") {
            let (name, value) = line.split_once(':').expect("part header");
            if name.eq_ignore_ascii_case("content-type") {
                content_type = Some(value.trim().to_string());
            } else if name.eq_ignore_ascii_case("content-range") {
                content_range = Some(value.trim().to_string());
            }
        }
        let content_range = content_range.expect("every part has Content-Range");
        let data_start = head_end + 4;
        let (first, last) = parse_content_range(&content_range).expect("part range");
        let data_end = data_start + (last - first + 1) as usize;
        parts.push((
            content_type,
            content_range,
            body[data_start..data_end].to_vec(),
        ));
        assert!(
            body[data_end..].starts_with(format!("\r\n{delimiter}").as_bytes()),
            "part data not followed by CRLF + boundary"
        );
        position = data_end + 2;
    }
    parts
}

/// `bytes FIRST-LAST/LEN` → (FIRST, LAST).
pub fn parse_content_range(value: &str) -> Option<(u64, u64)> {
    let spec = value.strip_prefix("bytes ")?;
    let (range, _len) = spec.split_once('/')?;
    let (first, last) = range.split_once('-')?;
    Some((first.parse().ok()?, last.parse().ok()?))
}

/// The `boundary=` parameter of a Content-Type value.
pub fn boundary_of(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|param| {
        let (name, value) = param.trim().split_once('=')?;
        name.eq_ignore_ascii_case("boundary")
            .then(|| value.trim_matches('"').to_string())
    })
}
