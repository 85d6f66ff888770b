//! The access log: Common, Combined or JSON lines, formatted on the loop into a buffer and
//! written to disk by a log thread, so request handling never waits on the disk (Abyss's
//! double buffers).
//!
//! Owns: `AccessLog` (one per loop: the buffer being filled) and `LogThread` (the writer, which
//! owns the file, reopens it on `SIGUSR1` and hands emptied buffers back for reuse). A full or
//! periodic flush swaps the loop's buffer for a spare and sends the full one, so the loop goes
//! on at once; the thread writes lines in the order each loop sent them. No line is dropped:
//! `LogThread::stop` writes everything sent before it.
//! Must not touch: sockets, HTTP decisions (the caller says what happened in an `Entry`).

use std::fs::File;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::clock::Clock;
use super::file::{is_standard_stream, open};
use crate::config::{Level, LogFormat};

/// A loop hands its buffer over once it holds this much.
const FLUSH_AT: usize = 64 << 10;
/// Emptied buffers kept for reuse.
const SPARES: usize = 16;

/// What happened to one request, borrowed from the connection for as long as it takes to
/// format the line.
#[derive(Debug)]
pub struct Entry<'a> {
    pub peer: IpAddr,
    pub user: Option<&'a str>,
    /// `(method, target, version)`; `None` when no request line could be read.
    pub request: Option<(&'a [u8], &'a [u8], &'a str)>,
    pub status: u16,
    /// Body bytes (CLF `%b`).
    pub body_bytes: u64,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    pub host: Option<&'a [u8]>,
    /// From the end of the request head to the response queued.
    pub duration: Duration,
    /// What the connection's TLS handshake settled; `None` over plain HTTP.
    pub tls: Option<TlsEntry<'a>>,
}

/// The TLS facts a line carries (nginx's `$ssl_protocol`, `$ssl_cipher`, `$ssl_client_s_dn`).
#[derive(Clone, Copy, Debug)]
pub struct TlsEntry<'a> {
    /// `TLSv1.3`.
    pub protocol: &'a str,
    /// The IANA name: `TLS13_AES_128_GCM_SHA256`.
    pub cipher: &'a str,
    /// The client certificate's subject, RFC 2253 (`CN=alice,O=Example`), when one was sent.
    pub client_subject: Option<&'a str>,
}

enum Message {
    Lines(Vec<u8>),
    Reopen,
    Open(Option<PathBuf>),
    Sync(Sender<()>),
    Stop,
}

type Spares = Arc<Mutex<Vec<Vec<u8>>>>;

/// The writer thread of the access log.
pub struct LogThread {
    sender: Sender<Message>,
    spares: Spares,
    thread: Option<JoinHandle<()>>,
}

/// One loop's end of the access log.
pub struct AccessLog {
    format: Option<LogFormat>,
    buffer: Vec<u8>,
    sender: Sender<Message>,
    spares: Spares,
}

/// The access log's file, opened but not yet written: opened before privileges are dropped
/// (the file may be writable by root only), and, under `mp`, before workers are forked, so
/// each worker's log thread writes the same open file (`O_APPEND`: every write lands at the end,
/// whole, and each write is a whole number of lines).
#[derive(Debug)]
pub struct LogFile(Option<(File, PathBuf)>);

impl LogFile {
    /// `None`: no access log.
    ///
    /// # Errors
    /// The file cannot be opened for appending.
    pub fn open(path: Option<&Path>) -> io::Result<LogFile> {
        Ok(LogFile(match path {
            Some(path) => Some((open(path)?, path.to_path_buf())),
            None => None,
        }))
    }

    /// Another handle on the same open file (for a forked worker).
    ///
    /// # Errors
    /// Descriptors run out.
    pub fn try_clone(&self) -> io::Result<LogFile> {
        Ok(LogFile(match &self.0 {
            Some((file, path)) => Some((file.try_clone()?, path.clone())),
            None => None,
        }))
    }
}

impl LogThread {
    /// Start the writer of `file`.
    ///
    /// # Errors
    /// The thread cannot start.
    pub fn start(file: LogFile) -> io::Result<LogThread> {
        let file = file.0;
        let (sender, receiver) = mpsc::channel();
        let spares: Spares = Arc::new(Mutex::new(Vec::new()));
        let thread_spares = spares.clone();
        let thread = std::thread::Builder::new()
            .name("access-log".to_owned())
            .spawn(move || write_lines(&receiver, file, &thread_spares))?;
        Ok(LogThread {
            sender,
            spares,
            thread: Some(thread),
        })
    }

    /// A loop's handle; `format` `None` logs nothing.
    #[must_use]
    pub fn handle(&self, format: Option<LogFormat>) -> AccessLog {
        AccessLog {
            format,
            buffer: Vec::new(),
            sender: self.sender.clone(),
            spares: self.spares.clone(),
        }
    }

    /// Close and reopen the file at the same path (after logrotate renamed it).
    pub fn reopen(&self) {
        let _ = self.sender.send(Message::Reopen);
    }

    /// Switch to another file (a reload changed `log.access`); `None` stops writing.
    pub fn open(&self, path: Option<PathBuf>) {
        let _ = self.sender.send(Message::Open(path));
    }

    /// Wait (at most `limit`) until everything sent so far is written.
    pub fn sync(&self, limit: Duration) {
        let (done, wait) = mpsc::channel();
        if self.sender.send(Message::Sync(done)).is_ok() {
            let _ = wait.recv_timeout(limit);
        }
    }

    /// Write everything sent so far, close the file, end the thread.
    pub fn stop(mut self) {
        let _ = self.sender.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn write_lines(receiver: &Receiver<Message>, mut file: Option<(File, PathBuf)>, spares: &Spares) {
    let mut failed = false;
    while let Ok(message) = receiver.recv() {
        match message {
            Message::Lines(mut lines) => {
                if let Some((out, path)) = file.as_mut() {
                    if let Err(error) = out.write_all(&lines) {
                        // Report once per failure streak, not once per buffer.
                        if !failed {
                            super::error::log(
                                Level::Error,
                                format_args!("access log {}: {error}", path.display()),
                            );
                        }
                        failed = true;
                    } else {
                        failed = false;
                    }
                }
                lines.clear();
                let mut spares = spares.lock().unwrap_or_else(PoisonError::into_inner);
                if spares.len() < SPARES {
                    spares.push(lines);
                }
            }
            Message::Reopen => {
                if let Some((out, path)) =
                    file.as_mut().filter(|(_, path)| !is_standard_stream(path))
                {
                    match open(path) {
                        Ok(fresh) => *out = fresh,
                        Err(error) => super::error::log(
                            Level::Error,
                            format_args!("cannot reopen access log {}: {error}", path.display()),
                        ),
                    }
                }
            }
            Message::Open(path) => match path {
                None => file = None,
                Some(path) => match open(&path) {
                    Ok(fresh) => file = Some((fresh, path)),
                    Err(error) => super::error::log(
                        Level::Error,
                        format_args!("cannot open access log {}: {error}", path.display()),
                    ),
                },
            },
            Message::Sync(done) => {
                let _ = done.send(());
            }
            Message::Stop => return,
        }
    }
}

impl AccessLog {
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.format.is_some()
    }

    /// Whether no line waits in the buffer.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    pub fn set_format(&mut self, format: Option<LogFormat>) {
        self.format = format;
    }

    /// Format one line into the loop's buffer; hand the buffer over when it is full.
    pub fn record(&mut self, entry: &Entry<'_>, clock: &Clock) {
        let Some(format) = self.format else {
            return;
        };
        match format {
            LogFormat::Common | LogFormat::Combined => {
                format_clf(
                    &mut self.buffer,
                    entry,
                    clock,
                    format == LogFormat::Combined,
                );
            }
            LogFormat::Json => format_json(&mut self.buffer, entry, clock),
        }
        if self.buffer.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Hand what is buffered to the log thread (the loop calls it a few times a second and
    /// before it exits).
    pub fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let spare = self
            .spares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(FLUSH_AT + 1024));
        let full = std::mem::replace(&mut self.buffer, spare);
        let _ = self.sender.send(Message::Lines(full));
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

fn push_number(out: &mut Vec<u8>, number: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut left = number;
    loop {
        at -= 1;
        digits[at] = b'0' + (left % 10) as u8;
        left /= 10;
        if left == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Bytes inside a quoted CLF field: `"` and `\\` escaped, control and non-ASCII bytes as
/// `\\xHH` (as nginx does), so a line can neither be split nor forged. Most fields need no
/// escaping and are copied whole.
fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let plain = |byte: u8| (0x20..=0x7e).contains(&byte) && byte != b'"' && byte != b'\\';
    if bytes.iter().all(|&byte| plain(byte)) {
        out.extend_from_slice(bytes);
        return;
    }
    for &byte in bytes {
        if plain(byte) {
            out.push(byte);
        } else if byte == b'"' || byte == b'\\' {
            out.push(b'\\');
            out.push(byte);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 15)],
            ]);
        }
    }
}

/// The client address; IPv4 (the common case) without the formatting machinery.
fn push_address(out: &mut Vec<u8>, address: IpAddr) {
    let address = match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    };
    match address {
        IpAddr::V4(v4) => {
            for (index, octet) in v4.octets().into_iter().enumerate() {
                if index > 0 {
                    out.push(b'.');
                }
                push_number(out, u64::from(octet));
            }
        }
        IpAddr::V6(v6) => {
            use std::io::Write as _;
            let _ = write!(out, "{v6}");
        }
    }
}

fn format_clf(out: &mut Vec<u8>, entry: &Entry<'_>, clock: &Clock, combined: bool) {
    push_address(out, entry.peer);
    out.extend_from_slice(b" - ");
    match entry.user {
        Some(user) => push_escaped(out, user.as_bytes()),
        None => out.push(b'-'),
    }
    out.extend_from_slice(b" [");
    out.extend_from_slice(clock.log_time());
    out.extend_from_slice(b"] \"");
    match entry.request {
        Some((method, target, version)) => {
            push_escaped(out, method);
            out.push(b' ');
            push_escaped(out, target);
            out.push(b' ');
            out.extend_from_slice(version.as_bytes());
        }
        None => out.push(b'-'),
    }
    out.extend_from_slice(b"\" ");
    push_number(out, u64::from(entry.status));
    out.push(b' ');
    if entry.body_bytes == 0 {
        out.push(b'-');
    } else {
        push_number(out, entry.body_bytes);
    }
    if combined {
        for field in [entry.referer, entry.user_agent] {
            out.extend_from_slice(b" \"");
            match field {
                Some(value) => push_escaped(out, value),
                None => out.push(b'-'),
            }
            out.push(b'"');
        }
    }
    out.push(b'\n');
}

/// A JSON string: quotes, backslashes and control bytes escaped; bytes that are not UTF-8
/// become `\u00XX` of each byte, so the line always parses.
fn push_json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    let text = String::from_utf8_lossy(bytes);
    for character in text.chars() {
        match character {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{0}'..='\u{1f}' | '\u{7f}' => {
                use std::io::Write as _;
                let _ = write!(out, "\\u{:04x}", u32::from(character));
            }
            _ => {
                let mut utf8 = [0u8; 4];
                out.extend_from_slice(character.encode_utf8(&mut utf8).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn format_json(out: &mut Vec<u8>, entry: &Entry<'_>, clock: &Clock) {
    out.extend_from_slice(b"{\"time\":\"");
    out.extend_from_slice(clock.iso());
    out.extend_from_slice(b"\",\"remote\":\"");
    push_address(out, entry.peer);
    out.extend_from_slice(b"\",\"user\":");
    match entry.user {
        Some(user) => push_json_string(out, user.as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    match entry.request {
        Some((method, target, version)) => {
            out.extend_from_slice(b",\"method\":");
            push_json_string(out, method);
            out.extend_from_slice(b",\"uri\":");
            push_json_string(out, target);
            out.extend_from_slice(b",\"protocol\":");
            push_json_string(out, version.as_bytes());
        }
        None => out.extend_from_slice(b",\"method\":null,\"uri\":null,\"protocol\":null"),
    }
    out.extend_from_slice(b",\"status\":");
    push_number(out, u64::from(entry.status));
    out.extend_from_slice(b",\"bytes\":");
    push_number(out, entry.body_bytes);
    for (name, value) in [
        (&b",\"host\":"[..], entry.host),
        (b",\"referer\":", entry.referer),
        (b",\"user_agent\":", entry.user_agent),
    ] {
        out.extend_from_slice(name);
        match value {
            Some(value) => push_json_string(out, value),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b",\"duration_us\":");
    push_number(
        out,
        u64::try_from(entry.duration.as_micros()).unwrap_or(u64::MAX),
    );
    let tls = entry.tls.as_ref();
    for (name, value) in [
        (&b",\"tls_protocol\":"[..], tls.map(|tls| tls.protocol)),
        (b",\"tls_cipher\":", tls.map(|tls| tls.cipher)),
        (
            b",\"tls_client_subject\":",
            tls.and_then(|tls| tls.client_subject),
        ),
    ] {
        out.extend_from_slice(name);
        match value {
            Some(value) => push_json_string(out, value.as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry<'static> {
        Entry {
            peer: "127.0.0.1".parse().unwrap(),
            user: Some("frank"),
            request: Some((b"GET", b"/apache_pb.gif", "HTTP/1.0")),
            status: 200,
            body_bytes: 2326,
            referer: Some(b"http://www.example.com/start.html"),
            user_agent: Some(b"Mozilla/4.08 [en] (Win98; I ;Nav)"),
            host: None,
            duration: Duration::from_micros(15),
            tls: None,
        }
    }

    #[test]
    fn common_and_combined_match_apache_documentation() {
        let clock = Clock::at(971_186_136);
        let mut out = Vec::new();
        format_clf(&mut out, &entry(), &clock, false);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "127.0.0.1 - frank [10/Oct/2000:13:55:36 +0000] \"GET /apache_pb.gif HTTP/1.0\" 200 2326\n"
        );
        out.clear();
        format_clf(&mut out, &entry(), &clock, true);
        assert!(String::from_utf8(out).unwrap().ends_with(
            "2326 \"http://www.example.com/start.html\" \"Mozilla/4.08 [en] (Win98; I ;Nav)\"\n"
        ));
    }

    #[test]
    fn hostile_bytes_cannot_split_or_forge_a_line() {
        let clock = Clock::at(0);
        let mut hostile = entry();
        hostile.request = Some((b"GET", b"/a\"b\n127.0.0.1 - -", "HTTP/1.1"));
        let mut out = Vec::new();
        format_clf(&mut out, &hostile, &clock, true);
        format_json(&mut out, &hostile, &clock);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains("/a\\\"b\\x0A127"));
        assert!(text.contains("\"uri\":\"/a\\\"b\\u000a127.0.0.1 - -\""));
    }

    #[test]
    fn lines_reach_the_file_through_the_thread() {
        let dir = std::env::temp_dir().join(format!("ampd-access-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let _ = std::fs::remove_file(&path);
        let thread = LogThread::start(LogFile::open(Some(&path)).unwrap()).unwrap();
        let mut log = thread.handle(Some(LogFormat::Common));
        let clock = Clock::at(0);
        for _ in 0..2000 {
            log.record(&entry(), &clock);
        }
        drop(log);
        thread.stop();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
