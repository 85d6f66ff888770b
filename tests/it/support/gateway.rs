//! Client side of the gateway tests (CGI, FastCGI, applications): request bodies streamed up
//! from the test pattern while the answer is read (a script that echoes as it reads would
//! otherwise deadlock against a client that writes everything first), and lines of a
//! `NAME=value` dump.
//! Owns: nothing long-lived. Must not touch: the server or the back ends.

use std::io::Write;
use std::net::SocketAddr;
use std::thread;

use super::bulk::{write_pattern, write_pattern_chunked};
use super::http::{Conn, Response};

/// How a pattern body is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length: LEN`.
    Length,
    /// `Transfer-Encoding: chunked`, chunks of this many bytes.
    Chunked(usize),
}

/// POSTs `len` bytes of the test pattern to `path` (with `extra` fields) on a fresh connection,
/// writing from a thread while the response is read; the response may be chunked.
///
/// # Panics
/// If the write fails or the response is malformed.
pub fn post_pattern(
    addr: SocketAddr,
    path: &str,
    len: u64,
    framing: Framing,
    extra: &[(&str, &str)],
) -> Response {
    post_framed(
        addr,
        path,
        framing,
        extra,
        Some(len),
        move |out| match framing {
            Framing::Length => write_pattern(out, len),
            Framing::Chunked(chunk) => write_pattern_chunked(out, len, chunk),
        },
    )
}

/// POSTs `prefix`, `len` bytes of the pattern and `suffix` as one body of known length (a
/// multipart form around a file): the same as `post_pattern` otherwise.
pub fn post_wrapped_pattern(
    addr: SocketAddr,
    path: &str,
    prefix: Vec<u8>,
    len: u64,
    suffix: Vec<u8>,
    extra: &[(&str, &str)],
) -> Response {
    let total = prefix.len() as u64 + len + suffix.len() as u64;
    post_framed(
        addr,
        path,
        Framing::Length,
        extra,
        Some(total),
        move |out| {
            out.write_all(&prefix)?;
            write_pattern(out, len)?;
            out.write_all(&suffix)
        },
    )
}

fn post_framed(
    addr: SocketAddr,
    path: &str,
    framing: Framing,
    extra: &[(&str, &str)],
    length: Option<u64>,
    body: impl FnOnce(&mut std::net::TcpStream) -> std::io::Result<()> + Send + 'static,
) -> Response {
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match (framing, length) {
        (Framing::Length, Some(len)) => head.push_str(&format!("Content-Length: {len}\r\n")),
        _ => head.push_str("Transfer-Encoding: chunked\r\n"),
    }
    head.push_str("\r\n");
    let mut conn = Conn::open(addr);
    conn.send(head.as_bytes());
    let mut writer = conn.stream().try_clone().expect("clone the client socket");
    let upload = thread::spawn(move || body(&mut writer).and_then(|()| writer.flush()));
    let response = conn.read_proxied("POST");
    upload
        .join()
        .expect("upload thread")
        .unwrap_or_else(|error| panic!("uploading to {path}: {error}"));
    response
}

/// The value of `NAME=value` line `name` in a dump (env.py, index.php), if any.
pub fn dump_value<'a>(dump: &'a str, name: &str) -> Option<&'a str> {
    dump.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
}

/// One request on a fresh connection; the response may be chunked (a script's answer without a
/// length is).
pub fn fetch(addr: SocketAddr, method: &str, path: &str, extra: &[(&str, &str)]) -> Response {
    let mut conn = Conn::open(addr);
    conn.send(super::http::build_request(method, path, extra));
    conn.read_proxied(method)
}
