//! A minimal WebSocket client (RFC 6455) for the tests: the opening handshake with the RFC's own
//! sample key (so the expected `Sec-WebSocket-Accept` is the RFC's sample answer and no SHA-1 is
//! needed here), masked client frames, and unmasked server frames read back.
//! Owns: one TCP connection. Must not touch: the server process.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};

use super::http::{find, IO_TIMEOUT};

/// RFC 6455 §1.3's sample nonce and the accept value a conforming server derives from it.
pub const SAMPLE_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
pub const SAMPLE_ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

pub const TEXT: u8 = 0x1;
pub const BINARY: u8 = 0x2;
pub const CLOSE: u8 = 0x8;
pub const PING: u8 = 0x9;
pub const PONG: u8 = 0xA;

/// The server's answer to the opening handshake.
pub enum Handshake {
    /// `101` with the right `Sec-WebSocket-Accept`: frames may flow.
    Open(WsClient),
    /// Anything else: the status and the whole head, as text.
    Refused(u16, String),
}

/// An open WebSocket connection.
pub struct WsClient {
    stream: TcpStream,
    /// Bytes read past the handshake or the last frame.
    buffer: Vec<u8>,
    mask_seed: u32,
}

/// One frame from the server.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    pub fin: bool,
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// Connects to `addr` and asks to upgrade `path` (with `Host: test`).
///
/// # Panics
/// If the connection fails or the answer is not an HTTP response head within `IO_TIMEOUT`.
pub fn connect(addr: SocketAddr, path: &str) -> Handshake {
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_nodelay(true).unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {SAMPLE_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .expect("send handshake");
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end;
        }
        let n = super::read_some(&mut stream, &mut chunk).expect("read handshake answer");
        assert!(
            n > 0,
            "closed during the handshake: {:?}",
            String::from_utf8_lossy(&buffer)
        );
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
    buffer.drain(..end + 4);
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not a response head: {head:?}"));
    let accept = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("sec-websocket-accept")
            .then(|| value.trim().to_string())
    });
    if status != 101 || accept.as_deref() != Some(SAMPLE_ACCEPT) {
        return Handshake::Refused(status, head);
    }
    Handshake::Open(WsClient {
        stream,
        buffer,
        mask_seed: 0x9e37_79b9,
    })
}

impl WsClient {
    /// Sends one masked frame (RFC 6455 §5.2, §5.3).
    pub fn send(&mut self, fin: bool, opcode: u8, payload: &[u8]) -> io::Result<()> {
        self.mask_seed = self
            .mask_seed
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        let mask = self.mask_seed.to_be_bytes();
        let mut frame = vec![if fin { 0x80 } else { 0 } | opcode];
        match payload.len() {
            len if len < 126 => frame.push(0x80 | len as u8),
            len if len < 65_536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(
            payload
                .iter()
                .enumerate()
                .map(|(i, byte)| byte ^ mask[i % 4]),
        );
        self.stream.write_all(&frame)
    }

    /// Reads one server frame. Server frames must not be masked (RFC 6455 §5.1).
    ///
    /// # Errors
    /// EOF before a whole frame, a timeout, or a masked frame (`InvalidData`).
    pub fn receive(&mut self) -> io::Result<Frame> {
        self.fill(2)?;
        let fin = self.buffer[0] & 0x80 != 0;
        let opcode = self.buffer[0] & 0x0F;
        if self.buffer[1] & 0x80 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "masked server frame",
            ));
        }
        let (len, header) = match self.buffer[1] & 0x7F {
            126 => {
                self.fill(4)?;
                (
                    u64::from(u16::from_be_bytes([self.buffer[2], self.buffer[3]])),
                    4,
                )
            }
            127 => {
                self.fill(10)?;
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&self.buffer[2..10]);
                (u64::from_be_bytes(bytes), 10)
            }
            len => (u64::from(len), 2),
        };
        let total = header + usize::try_from(len).expect("frame length");
        self.fill(total)?;
        let payload = self.buffer[header..total].to_vec();
        self.buffer.drain(..total);
        Ok(Frame {
            fin,
            opcode,
            payload,
        })
    }

    /// Sends a text frame and expects the same text back.
    ///
    /// # Panics
    /// If the echo does not come back identical.
    pub fn echo(&mut self, opcode: u8, payload: &[u8]) {
        self.send(true, opcode, payload).expect("send frame");
        let frame = self.receive().expect("echoed frame");
        assert_eq!(
            frame,
            Frame {
                fin: true,
                opcode,
                payload: payload.to_vec()
            }
        );
    }

    /// Sends close (1000) and expects the close echoed back, then the end of the stream.
    pub fn close(mut self) {
        self.send(true, CLOSE, &1000u16.to_be_bytes())
            .expect("send close");
        let frame = self.receive().expect("close answer");
        assert_eq!(frame.opcode, CLOSE, "{frame:?}");
        assert_eq!(frame.payload, 1000u16.to_be_bytes());
    }

    fn fill(&mut self, len: usize) -> io::Result<()> {
        let mut chunk = [0u8; 16 << 10];
        while self.buffer.len() < len {
            let n = super::read_some(&mut self.stream, &mut chunk)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
        Ok(())
    }
}
