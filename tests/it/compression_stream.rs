//! On-the-fly compression of streamed bodies (docs/config.md "Compression on the fly"): what a
//! proxy, FastCGI or CGI location with `compress = true` sends. A scripted upstream of its own
//! (`TextUpstream`: a 100 KiB JSON with its length or chunked, an upstream-gzipped body, a
//! `no-transform` one, a body that pauses until the test lets it go on, a generated 100 MiB
//! text) behind ampd; clients that decode as browsers do: curl `--compressed`, Python's
//! `http.client` with the `gzip`, `brotli` and `zstandard` decoders, and raw sockets decoding
//! with the codecs' crates. The body decoded is the upstream's, the head says chunked (or
//! close-delimited to HTTP/1.0, DATA frames over h2c) with `Vary` and no length; what must not
//! be compressed passes byte for byte; a paused upstream's first part arrives decodable before
//! its end (judged by order); 100 MiB pass with ampd's resident memory growing less than 16 MiB.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::h2::PYTHON;
use support::http::{find, send_raw_open, Conn};
use support::phpfpm::PhpFpm;
use support::*;

const WAIT: Duration = Duration::from_secs(20);

/// A 100 KiB JSON document (compressible, as an API's answer is).
fn json_body() -> Vec<u8> {
    let mut text = String::from("{\"items\":[");
    let mut id = 0;
    while text.len() < (100 << 10) - 100 {
        if id > 0 {
            text.push(',');
        }
        text.push_str(&format!(
            "{{\"id\":{id},\"name\":\"item {id}\",\"price\":{}.{:02},\"tags\":[\"red\",\"blue\"]}}",
            id * 7 % 1000,
            id % 100
        ));
        id += 1;
    }
    text.push_str("]}");
    text.into_bytes()
}

/// The generated text of `/big/N`: numbered lines, so it compresses well but not to nothing.
fn big_line(number: u64) -> String {
    format!(
        "line {number:012}: the quick brown fox jumps over the lazy dog {}\n",
        number % 97
    )
}

const FIRST_PART: &str = "the first part, sent before the upstream pauses\n";
const SECOND_PART: &str = "the second part, sent once the test has seen the first\n";

/// An HTTP/1.1 upstream answering by path (keep-alive; one thread per connection):
/// `/len` the JSON with its length and a strong ETag, `/chunked` the same chunked, `/gzipped`
/// a body of its own `Content-Encoding: gzip`, `/no-transform` the JSON with
/// `Cache-Control: no-transform`, `/paused` a chunked text whose second part waits for
/// `release`, `/big/N` N bytes of generated text with their length.
struct TextUpstream {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    release: Arc<(Mutex<bool>, Condvar)>,
}

impl TextUpstream {
    fn start() -> TextUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let release = Arc::new((Mutex::new(false), Condvar::new()));
        let (flag, gate) = (stop.clone(), release.clone());
        thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (flag, gate) = (flag.clone(), gate.clone());
                        thread::spawn(move || serve(stream, &flag, &gate));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        TextUpstream {
            addr,
            stop,
            release,
        }
    }

    /// Let `/paused` send its second part.
    fn release(&self) {
        let (released, wake) = &*self.release;
        *released.lock().unwrap() = true;
        wake.notify_all();
    }
}

impl Drop for TextUpstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.release();
    }
}

fn serve(mut stream: TcpStream, stop: &AtomicBool, release: &(Mutex<bool>, Condvar)) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::Acquire) {
        let Some(end) = find(&buffer, b"\r\n\r\n") else {
            match stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return,
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
        buffer.drain(..end + 4);
        let mut words = head.split_whitespace();
        let method = words.next().unwrap_or_default().to_owned();
        let path = words.next().unwrap_or_default().to_owned();
        if answer(&mut stream, &method, &path, release).is_err() {
            return;
        }
    }
}

fn answer(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    release: &(Mutex<bool>, Condvar),
) -> std::io::Result<()> {
    let head_only = method == "HEAD";
    let with_length = |stream: &mut TcpStream, fields: &str, body: &[u8]| {
        let head = format!(
            "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes())?;
        if !head_only {
            stream.write_all(body)?;
        }
        Ok::<(), std::io::Error>(())
    };
    let name = path.rsplit('/').next().unwrap_or_default();
    if path.ends_with("/len") {
        return with_length(
            stream,
            "Content-Type: application/json\r\nETag: \"v1\"\r\n",
            &json_body(),
        );
    }
    if path.ends_with("/no-transform") {
        return with_length(
            stream,
            "Content-Type: application/json\r\nCache-Control: no-transform\r\n",
            &json_body(),
        );
    }
    if path.ends_with("/gzipped") {
        return with_length(
            stream,
            "Content-Type: text/plain\r\nContent-Encoding: gzip\r\n",
            &gzipped_body(),
        );
    }
    if path.ends_with("/chunked") || path.ends_with("/paused") {
        let fields = if path.ends_with("/chunked") {
            "application/json"
        } else {
            "text/plain"
        };
        stream.write_all(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {fields}\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            .as_bytes(),
        )?;
        if head_only {
            return Ok(());
        }
        if path.ends_with("/chunked") {
            for piece in json_body().chunks(4000) {
                write_chunk(stream, piece)?;
            }
        } else {
            write_chunk(stream, FIRST_PART.repeat(20).as_bytes())?;
            let (released, wake) = release;
            let deadline = Instant::now() + WAIT;
            let mut open = released.lock().unwrap();
            while !*open && Instant::now() < deadline {
                open = wake
                    .wait_timeout(open, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
            drop(open);
            write_chunk(stream, SECOND_PART.repeat(20).as_bytes())?;
        }
        return stream.write_all(b"0\r\n\r\n");
    }
    if let (true, Ok(length)) = (path.contains("/big/"), name.parse::<u64>()) {
        stream.write_all(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {length}\r\n\r\n"
            )
            .as_bytes(),
        )?;
        let mut sent = 0u64;
        let mut number = 0u64;
        let mut block = Vec::with_capacity(70 << 10);
        while sent < length {
            block.clear();
            while block.len() < 64 << 10 {
                block.extend_from_slice(big_line(number).as_bytes());
                number += 1;
            }
            let take = block.len().min((length - sent) as usize);
            stream.write_all(&block[..take])?;
            sent += take as u64;
        }
        return Ok(());
    }
    with_length(stream, "Content-Type: text/plain\r\n", b"not found\n")
}

fn write_chunk(stream: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
    stream.write_all(data)?;
    stream.write_all(b"\r\n")
}

/// What `/gzipped` sends: bytes an upstream compressed itself (passed on as they are).
fn gzipped_body() -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&json_body()).unwrap();
    encoder.finish().unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a whole gzip stream");
    out
}

/// `/api/` compressed (`compress = true`), `/plain/` the same upstream with compression left
/// at its default for a proxy (off); `top` server-wide sections, `more` further locations.
/// One listener, `h2c`: it speaks HTTP/1.1 too.
fn start(root: &TempRoot, arch: &str, upstream: &TextUpstream, top: &str, more: &str) -> Server {
    let head =
        config_head(arch).replace("listen = \"127.0.0.1:0\"", "listen = \"127.0.0.1:0 h2c\"");
    let text = format!(
        "{head}{top}{}\n[[site]]\nroot = \"www\"\n\n{}\ncompress = true\n{}\n{more}\n",
        support::proxy::pool("text", &[upstream.addr], "keepalive = 4"),
        support::proxy::location("/api/", "text", ""),
        support::proxy::location("/plain/", "text", ""),
    );
    let path = root.outside_dir().join("ampd.toml");
    std::fs::write(&path, text).unwrap();
    Server::start(Options::config_file(&path))
}

/// Asserts `response` is compressed with `coding` and framed chunked, as HTTP/1.1 gets it.
fn assert_compressed_head(response: &Response, coding: &str) {
    assert_eq!(response.status, 200, "{:?}", response.headers);
    assert_eq!(
        response.header("content-encoding"),
        Some(coding),
        "{:?}",
        response.headers
    );
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    assert!(
        !response.has_header("content-length"),
        "{:?}",
        response.headers
    );
    assert_eq!(response.header("vary"), Some("Accept-Encoding"));
}

for_each_arch!(fn proxied_json_is_compressed_chunked(arch) {
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let server = start(&root, arch, &upstream, "", "");
    let mut conn = Conn::open(server.addr());
    // Two on one connection: the chunked framing ends each, the connection stays.
    for path in ["/api/len", "/api/chunked"] {
        conn.send(http::build_request("GET", path, &[("Accept-Encoding", "gzip")]));
        let response = conn.read_proxied("GET");
        assert_compressed_head(&response, "gzip");
        assert!(response.body.len() < 50 << 10, "{} bytes", response.body.len());
        assert_eq!(gunzip(&response.body), json_body(), "{path}");
    }
    drop(conn);
    // The strong validator is weakened: the compressed bytes are not the ones it names.
    let mut conn = Conn::open(server.addr());
    conn.send(http::build_request("GET", "/api/len", &[("Accept-Encoding", "br")]));
    let response = conn.read_proxied("GET");
    assert_compressed_head(&response, "br");
    assert_eq!(response.header("etag"), Some("W/\"v1\""));
    let mut decoded = Vec::new();
    brotli::Decompressor::new(&response.body[..], 4096)
        .read_to_end(&mut decoded)
        .unwrap();
    assert_eq!(decoded, json_body());
});

default_arch!(fn what_is_not_compressed_passes_untouched(arch) {
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let server = start(&root, arch, &upstream, "", "");
    let mut conn = Conn::open(server.addr());
    let gzip = [("Accept-Encoding", "gzip, br, zstd")];

    // Off by default on a proxy location: the upstream's bytes and length, no Vary.
    let plain = conn.get("/plain/len", &gzip);
    assert_eq!(plain.body, json_body());
    assert!(plain.header("content-encoding").is_none(), "{:?}", plain.headers);
    assert!(plain.header("vary").is_none(), "{:?}", plain.headers);
    assert_eq!(plain.header("etag"), Some("\"v1\""));
    let chunked = conn.read_chunked_get("/plain/chunked", &gzip);
    assert!(chunked.header("content-encoding").is_none(), "{:?}", chunked.headers);
    assert_eq!(chunked.body, json_body());

    // An upstream's own coding is passed on as it is (not compressed twice).
    let coded = conn.get("/api/gzipped", &gzip);
    assert_eq!(coded.header("content-encoding"), Some("gzip"));
    assert_eq!(coded.body, gzipped_body());

    // `Cache-Control: no-transform` (RFC 9110 §7.7).
    let kept = conn.get("/api/no-transform", &gzip);
    assert!(kept.header("content-encoding").is_none(), "{:?}", kept.headers);
    assert_eq!(kept.body, json_body());

    // A range request gets identity (the upstream ignored the range: the whole body), with
    // Vary since the same URL does compress.
    let ranged = conn.get("/api/len", &[("Accept-Encoding", "gzip"), ("Range", "bytes=0-99")]);
    assert!(ranged.header("content-encoding").is_none(), "{:?}", ranged.headers);
    assert_eq!(ranged.header("vary"), Some("Accept-Encoding"));
    assert_eq!(ranged.body, json_body());

    // No Accept-Encoding: identity.
    let identity = conn.get("/api/len", &[]);
    assert!(identity.header("content-encoding").is_none(), "{:?}", identity.headers);
    assert_eq!(identity.body, json_body());

    // HEAD: the head GET would have (its coding, no length), and no body; the connection goes
    // on with the next response right after it.
    for path in ["/api/len", "/api/chunked"] {
        conn.send(http::build_request("HEAD", path, &[("Accept-Encoding", "gzip")]));
        let head = conn.read_proxied("HEAD");
        assert_eq!(head.header("content-encoding"), Some("gzip"), "{path}: {:?}", head.headers);
        assert!(!head.has_header("content-length"), "{path}: {:?}", head.headers);
        assert!(head.body.is_empty());
    }
    conn.send(http::build_request("GET", "/api/chunked", &[("Accept-Encoding", "gzip")]));
    let after = conn.read_proxied("GET");
    assert_eq!(gunzip(&after.body), json_body());
});

trait ChunkedGet {
    fn read_chunked_get(&mut self, path: &str, extra: &[(&str, &str)]) -> Response;
}

impl ChunkedGet for Conn {
    fn read_chunked_get(&mut self, path: &str, extra: &[(&str, &str)]) -> Response {
        self.send(http::build_request("GET", path, extra));
        self.read_proxied("GET")
    }
}

default_arch!(fn an_http10_client_gets_a_compressed_body_ended_by_the_close(arch) {
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let server = start(&root, arch, &upstream, "", "");
    for path in ["/api/len", "/api/chunked"] {
        let raw = send_raw_open(
            server.addr(),
            format!("GET {path} HTTP/1.0\r\nHost: test\r\nAccept-Encoding: gzip\r\n\r\n"),
        );
        let end = find(&raw, b"\r\n\r\n").expect("a head");
        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
        assert!(head.contains("content-encoding: gzip"), "{head}");
        assert!(!head.contains("content-length"), "{head}");
        assert!(!head.contains("transfer-encoding"), "{head}");
        assert_eq!(gunzip(&raw[end + 4..]), json_body(), "{path}");
    }
});

default_arch!(fn curl_and_python_decode_what_they_asked_for(arch) {
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let server = start(&root, arch, &upstream, "", "");
    let addr = server.addr();
    let expected = support::bulk::sha256(&json_body());

    // curl offers every coding it decodes; the server's order picks zstd.
    for (path, version) in [("/api/len", "--http1.1"), ("/api/chunked", "--http2-prior-knowledge")] {
        let out = curl([
            "-sS", "--compressed", version, "-D", "-", &format!("http://{addr}{path}"),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let end = find(&out.stdout, b"\r\n\r\n").expect("a head");
        let head = String::from_utf8_lossy(&out.stdout[..end]).to_ascii_lowercase();
        assert!(head.contains("content-encoding: zstd"), "{head}");
        assert!(!head.contains("content-length"), "{head}");
        assert!(head.contains("vary: accept-encoding"), "{head}");
        if version == "--http1.1" {
            assert!(head.contains("transfer-encoding: chunked"), "{head}");
        } else {
            assert!(head.starts_with("http/2 200"), "{head}");
        }
        assert_eq!(support::bulk::sha256(&out.stdout[end + 4..]), expected, "{path} {version}");
    }

    // Python's http.client, decoding each coding with its library.
    let script = r#"
import gzip, hashlib, http.client, json, sys
import brotli, zstandard
port = int(sys.argv[1])
decode = {
    "gzip": gzip.decompress,
    "br": brotli.decompress,
    "zstd": lambda raw: zstandard.ZstdDecompressor().decompressobj().decompress(raw),
}
answers = []
for path in ("/api/len", "/api/chunked"):
    for coding in ("gzip", "br", "zstd"):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        connection.request("GET", path, headers={"Accept-Encoding": coding})
        response = connection.getresponse()
        raw = response.read()
        answers.append({
            "path": path, "asked": coding, "status": response.status,
            "coding": response.getheader("Content-Encoding"),
            "framing": response.getheader("Transfer-Encoding"),
            "length": response.getheader("Content-Length"),
            "sha256": hashlib.sha256(decode[coding](raw)).hexdigest(),
        })
        connection.close()
print(json.dumps(answers))
"#;
    let out = std::process::Command::new(PYTHON)
        .args(["-c", script, &addr.port().to_string()])
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 6);
    for answer in answers {
        assert_eq!(answer["status"], 200, "{answer}");
        assert_eq!(answer["coding"], answer["asked"], "{answer}");
        assert_eq!(answer["framing"], "chunked", "{answer}");
        assert!(answer["length"].is_null(), "{answer}");
        assert_eq!(answer["sha256"], expected.as_str(), "{answer}");
    }
});

/// Reads a chunked response's head and then its chunks as they come, decoding gzip on the way.
struct StreamingReader {
    stream: TcpStream,
    buffer: Vec<u8>,
    decoder: flate2::write::GzDecoder<Vec<u8>>,
    ended: bool,
}

impl StreamingReader {
    fn get(addr: SocketAddr, path: &str) -> (StreamingReader, String) {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: test\r\nAccept-Encoding: gzip\r\n\r\n")
                    .as_bytes(),
            )
            .unwrap();
        let mut reader = StreamingReader {
            stream,
            buffer: Vec::new(),
            decoder: flate2::write::GzDecoder::new(Vec::new()),
            ended: false,
        };
        let end = loop {
            if let Some(end) = find(&reader.buffer, b"\r\n\r\n") {
                break end;
            }
            assert!(reader.read_more() > 0, "closed before the head");
        };
        let head = String::from_utf8_lossy(&reader.buffer[..end]).to_ascii_lowercase();
        reader.buffer.drain(..end + 4);
        (reader, head)
    }

    fn read_more(&mut self) -> usize {
        let mut chunk = [0u8; 64 << 10];
        let n = support::read_some(&mut self.stream, &mut chunk)
            .unwrap_or_else(|error| panic!("read: {error}"));
        self.buffer.extend_from_slice(&chunk[..n]);
        n
    }

    /// Decodes the whole chunks received; false once the last chunk has come.
    fn decode_buffered(&mut self) {
        while let Some(line_end) = find(&self.buffer, b"\r\n") {
            let size = usize::from_str_radix(
                std::str::from_utf8(&self.buffer[..line_end])
                    .unwrap()
                    .trim(),
                16,
            )
            .unwrap();
            if size == 0 {
                self.ended = true;
                return;
            }
            let start = line_end + 2;
            if self.buffer.len() < start + size + 2 {
                return;
            }
            self.decoder
                .write_all(&self.buffer[start..start + size])
                .unwrap();
            self.buffer.drain(..start + size + 2);
        }
    }

    /// Reads until `done` holds of the decoded text, or the body ends.
    fn read_until(&mut self, done: impl Fn(&[u8]) -> bool) {
        loop {
            self.decode_buffered();
            self.decoder.flush().unwrap();
            if done(self.decoder.get_ref()) || self.ended {
                return;
            }
            assert!(self.read_more() > 0, "closed before the end of the body");
        }
    }

    fn decoded(&self) -> &[u8] {
        self.decoder.get_ref()
    }
}

default_arch!(fn a_paused_upstream_s_first_part_arrives_before_its_end(arch) {
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let server = start(&root, arch, &upstream, "", "");
    let (mut reader, head) = StreamingReader::get(server.addr(), "/api/paused");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    // The upstream holds its second part until the first is decoded here: without a flush
    // when it paused, the first part would wait in the encoder and this read time out.
    let first = FIRST_PART.repeat(20);
    reader.read_until(|decoded| decoded.len() >= first.len());
    assert!(!reader.ended, "the body ended before the upstream went on");
    assert_eq!(reader.decoded(), first.as_bytes());
    upstream.release();
    reader.read_until(|_| false);
    assert!(reader.ended);
    let mut whole = first;
    whole.push_str(&SECOND_PART.repeat(20));
    assert_eq!(String::from_utf8_lossy(reader.decoded()), whole);
});

/// `VmRSS` of `pid`, in KiB.
fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

default_arch!(fn a_100_mib_stream_is_compressed_in_bounded_memory(arch) {
    const LENGTH: u64 = 100 << 20;
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let server = start(&root, arch, &upstream, "", "");
    // Warm up: the codec's code and the connection's buffers are in memory before measuring.
    let (mut warm, _) = StreamingReader::get(server.addr(), "/api/big/200000");
    warm.read_until(|_| false);
    assert_eq!(warm.decoded().len(), 200_000);
    let before = resident_kib(server.pid());
    let mut peak = before;
    let (mut reader, head) = StreamingReader::get(server.addr(), &format!("/api/big/{LENGTH}"));
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let started = Instant::now();
    let mut received = 0u64;
    let mut last_line = Vec::new();
    while !reader.ended {
        assert!(started.elapsed() < Duration::from_secs(60), "too slow");
        assert!(reader.read_more() > 0, "closed before the end");
        reader.decode_buffered();
        // The decoded text is counted and dropped as it comes (the client holds none of it).
        let decoded = reader.decoder.get_mut();
        received += decoded.len() as u64;
        if let Some(start) = decoded.iter().rposition(|&byte| byte == b'l') {
            last_line = decoded[start..].to_vec();
        }
        decoded.clear();
        peak = peak.max(resident_kib(server.pid()));
    }
    reader.decoder.try_finish().unwrap();
    received += reader.decoder.get_ref().len() as u64;
    assert_eq!(received, LENGTH);
    assert!(!last_line.is_empty());
    let growth = peak.saturating_sub(before);
    eprintln!(
        "100 MiB compressed in {:?}: ampd's VmRSS {before} KiB before, {peak} KiB at most",
        started.elapsed()
    );
    assert!(growth < 16 << 10, "ampd grew by {growth} KiB while streaming 100 MiB");
});

default_arch!(fn fastcgi_and_cgi_pages_are_compressed(arch) {
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let page = "<p>a page written by a program, compressed on its way out</p>\n".repeat(400);
    root.file(
        "page.php",
        "<?php header('Content-Type: text/html; charset=utf-8');\n\
         echo str_repeat(\"<p>a page written by a program, compressed on its way out</p>\\n\", 400);\n",
    );
    write_executable(
        &root.dir("cgi-bin").join("page.py"),
        "#!/usr/bin/python3\nimport sys\nsys.stdout.write('Content-Type: text/html\\r\\n\\r\\n')\n\
         sys.stdout.write('<p>a page written by a program, compressed on its way out</p>\\n' * 400)\n",
    );
    let fpm = PhpFpm::start(&root.outside_dir().join("fpm"));
    let more = format!(
        "[[site.location]]\nextension = \".php\"\nfastcgi_pass = \"{}\"\ncompress = true\n\n\
         [[site.location]]\npath = \"/cgi-bin/\"\nhandler = \"cgi\"\ncompress = true\n",
        fpm.address()
    );
    let server = start(&root, arch, &upstream, "", &more);
    let mut conn = Conn::open(server.addr());
    for path in ["/page.php", "/cgi-bin/page.py"] {
        conn.send(http::build_request("GET", path, &[("Accept-Encoding", "gzip")]));
        let response = conn.read_proxied("GET");
        assert_compressed_head(&response, "gzip");
        assert_eq!(String::from_utf8_lossy(&gunzip(&response.body)), page, "{path}");
    }
});

default_arch!(fn the_access_log_counts_the_compressed_bytes_sent(arch) {
    let root = TempRoot::new();
    let upstream = TextUpstream::start();
    let log = root.outside_dir().join("access.log");
    let server = start(&root, arch, &upstream, "[log]\naccess = \"access.log\"\nformat = \"combined\"\n", "");
    let mut conn = Conn::open(server.addr());
    conn.send(http::build_request("GET", "/api/chunked", &[("Accept-Encoding", "gzip")]));
    let response = conn.read_proxied("GET");
    assert_compressed_head(&response, "gzip");
    let sent = response.body.len().to_string();
    let deadline = Instant::now() + WAIT;
    let line = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.contains("/api/chunked")) {
            break line.to_owned();
        }
        assert!(Instant::now() < deadline, "no log line for /api/chunked: {text}");
        thread::sleep(Duration::from_millis(20));
    };
    // `"GET /api/chunked HTTP/1.1" 200 BYTES`: the body bytes as sent, compressed.
    let after_request = &line[line.find("HTTP/1.1\" ").expect("the request line") + 10..];
    let mut fields = after_request.split_whitespace();
    assert_eq!(fields.next(), Some("200"), "{line}");
    assert_eq!(fields.next(), Some(sent.as_str()), "{line}");
});
