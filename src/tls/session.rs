//! One connection's TLS, sans I/O: the engine hands it the ciphertext it read and writes the
//! records it seals; `Conn` sees only plaintext.
//!
//! The ClientHello is read by rustls's `Acceptor` first, so that the generation's
//! `TlsContext::config_for` can pick the site's configuration (certificate by SNI, its
//! client-certificate policy) before the handshake goes on.
//!
//! The send path: `seal` encrypts `Conn`'s output where it lies — heads and cached bodies from
//! memory, file ranges read once with `pread` into the engine's buffer — into records that
//! `write_to` hands the socket in one `sendmsg`. Userspace TLS cannot use `sendfile`; kernel TLS
//! (`TCP_ULP` "tls") would let the file path go back to `sendfile` once the handshake is done
//! (docs/architecture.md, "TLS").
//!
//! Owns: the connection's rustls state. Must not touch: sockets beyond the writes the engine
//! asks for, HTTP.

use std::io::{self, BufRead, IoSlice, Write};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use ampd_sys::io as sysio;
use rustls::server::Acceptor;
use rustls::{HandshakeKind, ServerConnection};

use super::{client_certificate_of, TlsContext, TlsInfo, ALPN_ACME};

/// Where a session's plaintext goes: the connection behind it (`conn` implements this for
/// `Conn`). The session drives only this, so `tls` knows nothing of HTTP or of `conn`.
pub trait Plaintext {
    /// The handshake is done: what it settled.
    fn handshake_done(&mut self, info: TlsInfo);
    /// Decrypted bytes from the client.
    fn plaintext(&mut self, bytes: &[u8]);
    /// The client ended its stream (close_notify, or a close without it).
    fn end_of_stream(&mut self);
}

/// What a session seals: a queue of memory and file ranges in sending order (`conn`
/// implements this for its `Output`).
pub trait SealSource {
    /// Nothing is queued.
    fn is_empty(&self) -> bool;
    /// A file range is queued behind the memory at the front.
    fn file_follows_memory(&self) -> bool;
    /// The file range at the front: its descriptor and `[offset, end)`.
    fn front_file(&mut self) -> Option<(BorrowedFd<'_>, u64, u64)>;
    /// The memory at the front, up to the next file range.
    fn memory_slices(&mut self) -> Vec<IoSlice<'_>>;
    /// `count` bytes from the front were sealed.
    fn advance(&mut self, count: u64);
}

/// Plaintext sealed per call: four full records. Bounds what one connection holds in
/// ciphertext while its socket is full (the engine seals more only when it has written this).
pub const SEAL_BATCH: u64 = 64 << 10;

/// What became of the bytes handed to `receive`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// Taken; plaintext (if any) went to `Conn`.
    Taken,
    /// The connection must end once `wants_write` is false: an alert is queued (garbage, a
    /// protocol error, a name no certificate covers, a refused client certificate), or the
    /// plain-HTTP answer, or an `acme-tls/1` validation is done.
    Ending(Ending),
}

/// Why a TLS connection ends early (the error log's and the tests' vocabulary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// A plain HTTP request on a TLS port: answered `400` in plain HTTP, as nginx does.
    PlainHttp,
    /// Not TLS, not HTTP: an alert.
    NotTls,
    /// The handshake or a record failed (rustls's error): an alert.
    Failed,
    /// No certificate for the name asked for, and no default: `unrecognized_name`.
    NoCertificate,
    /// The TLS-ALPN-01 validation handshake is complete (RFC 8737 §3: no application data).
    AcmeValidated,
}

enum State {
    /// Reading the ClientHello.
    Hello(Box<Acceptor>),
    Open(Box<ServerConnection>),
    /// Nothing more is read; what is queued (`early`, or rustls's alert) goes out, then close.
    Ending(Ending),
}

/// A TLS connection from its first byte to its close.
pub struct TlsSession {
    context: Arc<TlsContext>,
    state: State,
    /// Bytes to write that rustls does not hold: the alert of a refused ClientHello, or the
    /// plain-HTTP answer. Written before anything else.
    early: Vec<u8>,
    /// An `Open` connection whose rustls state failed: its alert is in rustls's queue.
    failed: bool,
    /// The first byte has been seen (and was a handshake record's).
    started: bool,
}

impl std::fmt::Debug for TlsSession {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Hello(_) => "hello",
            State::Open(connection) if connection.is_handshaking() => "handshaking",
            State::Open(_) => "open",
            State::Ending(_) => "ending",
        };
        write!(formatter, "TlsSession({state})")
    }
}

/// The answer to a plain HTTP request on a TLS port (nginx answers the same way, with its
/// own wording), so that a user who typed `http://` sees why.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/plain\r\n\
Content-Length: 48\r\n\
Connection: close\r\n\
\r\n\
This port speaks HTTPS: use an https:// address\n";

/// TLS record type of a handshake message (RFC 8446 §5.1): every ClientHello starts with it.
const HANDSHAKE_RECORD: u8 = 22;

/// The most plaintext one TLS record carries (RFC 8446 §5.1).
pub(crate) const RECORD: usize = 16 << 10;

/// Copy the front of `output` into `buffer` until it is full or the queue is empty: memory as
/// it is, file ranges read with `pread`. Returns the bytes copied (and taken off the queue).
pub(crate) fn gather(output: &mut impl SealSource, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() && !output.is_empty() {
        let room = buffer.len() - filled;
        let copied = if let Some((file, offset, end)) = output.front_file() {
            let want = usize::try_from(end - offset)
                .unwrap_or(usize::MAX)
                .min(room);
            let read = sysio::pread(file, &mut buffer[filled..filled + want], offset)?;
            if read == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            read
        } else {
            let mut copied = 0;
            for slice in &output.memory_slices() {
                let part = slice.len().min(room - copied);
                buffer[filled + copied..filled + copied + part].copy_from_slice(&slice[..part]);
                copied += part;
                if copied == room {
                    break;
                }
            }
            copied
        };
        output.advance(copied as u64);
        filled += copied;
    }
    Ok(filled)
}

impl TlsSession {
    #[must_use]
    pub fn new(context: Arc<TlsContext>) -> TlsSession {
        TlsSession {
            context,
            state: State::Hello(Box::default()),
            early: Vec::new(),
            failed: false,
            started: false,
        }
    }

    /// The handshake is not over (a timeout for it applies: `[tls] handshake_timeout`).
    #[must_use]
    pub fn is_handshaking(&self) -> bool {
        match &self.state {
            State::Hello(_) => true,
            State::Open(connection) => connection.is_handshaking(),
            State::Ending(_) => false,
        }
    }

    /// Why the connection is ending, if it is.
    #[must_use]
    pub fn ending(&self) -> Option<Ending> {
        match &self.state {
            State::Ending(ending) => Some(*ending),
            State::Open(_) if self.failed => Some(Ending::Failed),
            _ => None,
        }
    }

    /// Ciphertext from the socket: decrypted, its plaintext handed to `conn` (once the
    /// handshake has told `conn` what it settled: `Conn::set_tls`). A close_notify ends the
    /// client's input as an end of stream would.
    pub fn receive(&mut self, mut ciphertext: &[u8], conn: &mut impl Plaintext) -> Received {
        if !self.started && !ciphertext.is_empty() {
            self.started = true;
            if let Some(ending) = self.refuse_non_tls(ciphertext) {
                return Received::Ending(ending);
            }
        }
        while !ciphertext.is_empty() {
            match &mut self.state {
                State::Hello(acceptor) => {
                    if acceptor.read_tls(&mut ciphertext).is_err() {
                        return self.end(Ending::Failed);
                    }
                    match acceptor.accept() {
                        Ok(None) => {}
                        Ok(Some(accepted)) => {
                            let Some(config) = self.context.config_for(&accepted.client_hello())
                            else {
                                self.early.extend_from_slice(&UNRECOGNIZED_NAME);
                                return self.end(Ending::NoCertificate);
                            };
                            match accepted.into_connection(config) {
                                Ok(mut connection) => {
                                    // `seal` bounds what is queued; rustls need not.
                                    connection.set_buffer_limit(None);
                                    self.state = State::Open(Box::new(connection));
                                    if let Some(ending) = self.process(conn) {
                                        return Received::Ending(ending);
                                    }
                                }
                                Err((_, mut alert)) => {
                                    let _ = alert.write_all(&mut self.early);
                                    return self.end(Ending::Failed);
                                }
                            }
                        }
                        Err((_, mut alert)) => {
                            let _ = alert.write_all(&mut self.early);
                            return self.end(Ending::Failed);
                        }
                    }
                }
                State::Open(connection) => {
                    if self.failed {
                        return Received::Ending(Ending::Failed);
                    }
                    if connection.read_tls(&mut ciphertext).is_err() {
                        self.failed = true;
                        return Received::Ending(Ending::Failed);
                    }
                    if let Some(ending) = self.process(conn) {
                        return Received::Ending(ending);
                    }
                }
                State::Ending(ending) => return Received::Ending(*ending),
            }
        }
        match self.ending() {
            Some(ending) => Received::Ending(ending),
            None => Received::Taken,
        }
    }

    /// The first bytes are not a handshake record: a plain HTTP request gets a plain `400`,
    /// anything else an alert.
    fn refuse_non_tls(&mut self, bytes: &[u8]) -> Option<Ending> {
        let first = *bytes.first()?;
        if first == HANDSHAKE_RECORD {
            return None;
        }
        if first.is_ascii_uppercase() {
            self.early.extend_from_slice(PLAIN_HTTP_ANSWER);
            self.state = State::Ending(Ending::PlainHttp);
            Some(Ending::PlainHttp)
        } else {
            self.early.extend_from_slice(&UNEXPECTED_MESSAGE);
            self.state = State::Ending(Ending::NotTls);
            Some(Ending::NotTls)
        }
    }

    fn end(&mut self, ending: Ending) -> Received {
        self.state = State::Ending(ending);
        Received::Ending(ending)
    }

    /// Process the records read: on the handshake's completion tell `conn` what it settled,
    /// then hand it the plaintext.
    fn process(&mut self, conn: &mut impl Plaintext) -> Option<Ending> {
        let State::Open(connection) = &mut self.state else {
            return None;
        };
        let was_handshaking = connection.is_handshaking();
        if connection.process_new_packets().is_err() {
            // rustls queued the alert; it goes out with `write_to`.
            self.failed = true;
            return Some(Ending::Failed);
        }
        if was_handshaking && !connection.is_handshaking() {
            if connection.alpn_protocol() == Some(ALPN_ACME) {
                connection.send_close_notify();
                self.state = State::Ending(Ending::AcmeValidated);
                return Some(Ending::AcmeValidated);
            }
            conn.handshake_done(info(connection));
        }
        let mut reader = connection.reader();
        loop {
            match reader.fill_buf() {
                Ok([]) => {
                    // The client's close_notify: no more requests.
                    conn.end_of_stream();
                    return None;
                }
                Ok(plaintext) => {
                    let count = plaintext.len();
                    conn.plaintext(plaintext);
                    reader.consume(count);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return None,
                // The peer closed without close_notify: an end of stream all the same.
                Err(_) => {
                    conn.end_of_stream();
                    return None;
                }
            }
        }
    }

    /// Encrypt up to `SEAL_BATCH` bytes of `output` into records (only once the handshake is
    /// done: `Conn` answers nothing before its first request anyway). Memory goes as it lies;
    /// a file range is read with `pread` into `scratch`. Returns the plaintext bytes taken.
    ///
    /// # Errors
    /// A file cannot be read, or is shorter than when its head was sent (`UnexpectedEof`:
    /// the response cannot be completed).
    pub fn seal(&mut self, output: &mut impl SealSource, scratch: &mut [u8]) -> io::Result<u64> {
        let State::Open(connection) = &mut self.state else {
            return Ok(0);
        };
        if self.failed || connection.is_handshaking() {
            return Ok(0);
        }
        let mut taken = 0u64;
        while taken < SEAL_BATCH && !output.is_empty() {
            if output.file_follows_memory() || output.front_file().is_some() {
                // File data ahead: each record is filled whole from whatever segments come,
                // memory copied and file ranges read, so an HTTP/1 head or an HTTP/2 DATA
                // frame header rides in the record of the bytes after it (h2o fills records
                // the same way; a record of its own would cost the client a decryption and
                // 22 bytes per frame).
                let room = usize::try_from(SEAL_BATCH - taken).unwrap_or(usize::MAX);
                let record = RECORD.min(room).min(scratch.len());
                let filled = gather(output, &mut scratch[..record])?;
                connection.writer().write_all(&scratch[..filled])?;
                taken += filled as u64;
            } else {
                // One vectored write: rustls fills each record from several slices, so a head
                // and its small body leave as one record, not two (one encryption and 22 bytes
                // less per response; docs/research/benchmarks.md, "Over TLS").
                let room = usize::try_from(SEAL_BATCH - taken).unwrap_or(usize::MAX);
                let slices = output.memory_slices();
                let total: usize = slices.iter().map(|slice| slice.len()).sum();
                let (written, sealed) = if total <= room {
                    (connection.writer().write_vectored(&slices)?, total)
                } else {
                    let mut parts = Vec::with_capacity(slices.len());
                    let mut sealed = 0usize;
                    for slice in &slices {
                        let part = &slice[..slice.len().min(room - sealed)];
                        parts.push(IoSlice::new(part));
                        sealed += part.len();
                        if sealed == room {
                            break;
                        }
                    }
                    (connection.writer().write_vectored(&parts)?, sealed)
                };
                drop(slices);
                output.advance(written as u64);
                taken += written as u64;
                if written < sealed {
                    // rustls took less than it was given (it does not, with no buffer limit).
                    break;
                }
            }
        }
        Ok(taken)
    }

    /// Ciphertext (or an early answer) waits to be written.
    #[must_use]
    pub fn wants_write(&self) -> bool {
        !self.early.is_empty()
            || matches!(&self.state, State::Open(connection) if connection.wants_write())
    }

    /// Write what waits to `fd` (`sendmsg`, one call per batch of records) until the socket is
    /// full or nothing waits. Returns the bytes written; `WouldBlock` when none could be.
    ///
    /// # Errors
    /// The socket's error.
    pub fn write_to(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let mut socket = Socket(fd);
        let mut written = 0;
        while !self.early.is_empty() {
            match socket.write(&self.early) {
                Ok(count) => {
                    self.early.drain(..count);
                    written += count;
                }
                Err(error) if written > 0 && error.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(written)
                }
                Err(error) => return Err(error),
            }
        }
        if let State::Open(connection) = &mut self.state {
            while connection.wants_write() {
                match connection.write_tls(&mut socket) {
                    Ok(count) => written += count,
                    Err(error) if written > 0 && error.kind() == io::ErrorKind::WouldBlock => {
                        return Ok(written)
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(written)
    }

    /// Move up to `max` bytes of what waits into `into` (the proactor submits its own buffers).
    pub fn take_ciphertext(&mut self, into: &mut Vec<u8>, max: usize) {
        let start = into.len();
        if !self.early.is_empty() {
            let count = self.early.len().min(max);
            into.extend(self.early.drain(..count));
        }
        if let State::Open(connection) = &mut self.state {
            while connection.wants_write() && into.len() - start < max {
                if connection.write_tls(into).is_err() {
                    break;
                }
            }
        }
    }

    /// The connection is closing cleanly: say so (close_notify, RFC 8446 §6.1) after the last
    /// response, so the client can tell a complete response from a truncated one.
    pub fn close(&mut self) {
        if let State::Open(connection) = &mut self.state {
            if !self.failed && !connection.is_handshaking() {
                connection.send_close_notify();
            }
        }
    }
}

/// A fatal `unexpected_message` alert (RFC 8446 §6: level 2, description 10), for bytes that
/// are no TLS record at all.
const UNEXPECTED_MESSAGE: [u8; 7] = [21, 3, 3, 0, 2, 2, 10];
/// A fatal `unrecognized_name` alert (RFC 6066 §3: description 112): no certificate for the
/// name the client asked for.
const UNRECOGNIZED_NAME: [u8; 7] = [21, 3, 3, 0, 2, 2, 112];

/// What the handshake settled, for `Conn`.
fn info(connection: &ServerConnection) -> TlsInfo {
    TlsInfo {
        protocol: match connection.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "TLS",
        },
        cipher: connection
            .negotiated_cipher_suite()
            .and_then(|suite| suite.suite().as_str())
            .unwrap_or("unknown"),
        server_name: connection
            .server_name()
            .map(|name| name.to_ascii_lowercase().into_boxed_str()),
        alpn: connection.alpn_protocol().map(Box::from),
        resumed: connection.handshake_kind() == Some(HandshakeKind::Resumed),
        client: connection
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(client_certificate_of)
            .map(Box::new),
    }
}

/// The socket as rustls writes to it: `sendmsg` without `SIGPIPE`.
struct Socket<'a>(BorrowedFd<'a>);

impl Write for Socket<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        sysio::send(self.0, bytes, sysio::MSG_NOSIGNAL)
    }

    fn write_vectored(&mut self, slices: &[IoSlice<'_>]) -> io::Result<usize> {
        sysio::send_vectored(self.0, slices, sysio::MSG_NOSIGNAL)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
