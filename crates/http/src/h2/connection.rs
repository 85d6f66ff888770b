//! One HTTP/2 connection, server side, sans I/O (RFC 9113 §3-§6).
//!
//! Owns: the client preface and the SETTINGS exchange, frame validation (sizes, stream ids,
//! the order HEADERS/CONTINUATION must keep), the stream states of §5.1 (and which closed
//! streams to remember), flow control both ways (§5.2, §6.9), PING, GOAWAY (graceful: the last
//! stream processed; on error: the code), RST_STREAM, PRIORITY accepted and ignored (RFC 9113
//! §5.3.2 deprecates the tree), the flood budgets (`flood.rs`), and HPACK's two directions.
//! Must not touch: I/O, clocks (`now` is passed in), what a request is answered with — the
//! caller turns `Event`s into responses and hands back `write_headers` / `data_frame`.
//!
//! Every error RFC 9113 names is classified here: a connection error queues GOAWAY with its
//! code and the connection stops reading (`is_closing`); a stream error queues RST_STREAM and
//! the connection goes on.

use std::time::{Duration, Instant};

use super::error::ErrorCode;
use super::fields::ResponseFields;
use crate::request::RequestHead;

/// A stream identifier (31 bits; client streams are odd).
pub type StreamId = u32;

/// What the server advertises and enforces. The defaults are safe for a public server; each
/// is a key of the `[http2]` configuration section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams a client may have open at once; one past it
    /// is refused (RST_STREAM REFUSED_STREAM, §5.1.2).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may send before we credit
    /// more.
    pub initial_window_size: u32,
    /// The connection's receive window, raised from 65,535 by a WINDOW_UPDATE after the
    /// preface.
    pub connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload we accept.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a request whose decoded fields pass it is answered 431
    /// (the block is still decoded to keep HPACK in step).
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: our HPACK decoder's dynamic table.
    pub header_table_size: u32,
    /// Bytes of one header block (HEADERS + CONTINUATION frames, compressed) before we stop
    /// assembling it: GOAWAY ENHANCE_YOUR_CALM (the CONTINUATION flood of 2024).
    pub max_header_block: u32,
    /// The window over which the budgets below are counted.
    pub budget_window: Duration,
    /// RST_STREAM frames received, plus streams we had to refuse, per window (rapid reset,
    /// CVE-2023-44487).
    pub max_resets: u32,
    /// SETTINGS frames received per window.
    pub max_settings: u32,
    /// PING frames received per window.
    pub max_pings: u32,
    /// Frames that carry nothing (DATA with no payload and no END_STREAM, CONTINUATION with
    /// an empty block, PRIORITY, WINDOW_UPDATE increments on closed streams, unknown types) per
    /// window.
    pub max_empty_frames: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_concurrent_streams: 128,
            initial_window_size: 65_535,
            connection_window_size: 1 << 20,
            max_frame_size: super::frame::DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: 64 << 10,
            header_table_size: 4_096,
            max_header_block: 64 << 10,
            budget_window: Duration::from_secs(10),
            max_resets: 200,
            max_settings: 100,
            max_pings: 100,
            max_empty_frames: 1_000,
        }
    }
}

/// What the client's frames mean for the server.
#[derive(Debug)]
pub enum Event<'a> {
    /// A stream opened with a complete, valid request head. `end_stream`: no body follows.
    Request {
        stream: StreamId,
        head: RequestHead,
        end_stream: bool,
    },
    /// A stream opened with a head the server must answer itself rather than reset: its
    /// fields passed `max_header_list_size` (431) or it asked for CONNECT (405).
    Refused { stream: StreamId, status: u16 },
    /// Request body bytes (padding removed; its flow-control credit is already returned).
    /// The credit for `data` goes back when the caller calls `release_body`. `end_stream`
    /// with empty `data` also reports trailers, which are validated and dropped.
    Data {
        stream: StreamId,
        data: &'a [u8],
        end_stream: bool,
    },
    /// The client reset the stream (or the connection reset it for a stream error): drop its
    /// work, send nothing more on it.
    Reset { stream: StreamId, code: ErrorCode },
    /// The client's receive window grew (WINDOW_UPDATE, or a larger
    /// SETTINGS_INITIAL_WINDOW_SIZE): streams blocked on flow control may send.
    WindowOpened,
    /// The client sent GOAWAY: it opens no more streams.
    GoAway { code: ErrorCode },
}

/// One connection's HTTP/2 state.
#[derive(Debug)]
pub struct Connection {}

impl Connection {
    /// A connection whose server preface (our SETTINGS, then the connection WINDOW_UPDATE) is
    /// queued for `write_control`.
    #[must_use]
    pub fn new(limits: &Limits) -> Connection {
        let _ = limits;
        todo!("frames helper")
    }

    /// Read the frames complete in `input` (the client preface first), pushing what they mean
    /// onto `events`. Returns the bytes used; a partial frame is left for the next call. After
    /// a connection error GOAWAY is queued, nothing more is read (`is_closing`).
    pub fn receive<'a>(
        &mut self,
        input: &'a [u8],
        now: Instant,
        events: &mut Vec<Event<'a>>,
    ) -> usize {
        let _ = (input, now, events);
        todo!("frames helper")
    }

    /// Append the control frames queued (SETTINGS and their ACKs, PING ACKs, WINDOW_UPDATEs,
    /// RST_STREAMs, GOAWAY) to `out`. They go before any response bytes queued after them.
    pub fn write_control(&mut self, out: &mut Vec<u8>) {
        let _ = out;
        todo!("frames helper")
    }

    /// Whether control frames wait for `write_control`.
    #[must_use]
    pub fn has_control(&self) -> bool {
        todo!("frames helper")
    }

    /// Append a HEADERS frame (and CONTINUATIONs, at the client's SETTINGS_MAX_FRAME_SIZE)
    /// with `response`'s `:status` and fields, HPACK-encoded. `end_stream`: no body follows
    /// (a HEAD, a 304, an empty body). A 1xx response is sent with `end_stream` false and
    /// another `write_headers` follows.
    pub fn write_headers(
        &mut self,
        stream: StreamId,
        response: &ResponseFields,
        end_stream: bool,
        out: &mut Vec<u8>,
    ) {
        let _ = (stream, response, end_stream, out);
        todo!("frames helper")
    }

    /// Body bytes `stream` may send now: the smaller of its window and the connection's (0
    /// when blocked, or when the stream is not open for sending).
    #[must_use]
    pub fn send_capacity(&self, stream: StreamId) -> u32 {
        let _ = stream;
        todo!("frames helper")
    }

    /// The largest DATA payload the client accepts (its SETTINGS_MAX_FRAME_SIZE).
    #[must_use]
    pub fn max_data_payload(&self) -> u32 {
        todo!("frames helper")
    }

    /// The header of a DATA frame of `len` bytes on `stream` (`len` ≤ `send_capacity` and ≤
    /// `max_data_payload`), taking `len` from both windows; the caller queues the payload
    /// right behind it. `end_stream` ends our side of the stream.
    pub fn data_frame(
        &mut self,
        stream: StreamId,
        len: u32,
        end_stream: bool,
    ) -> [u8; super::frame::HEADER_LEN] {
        let _ = (stream, len, end_stream);
        todo!("frames helper")
    }

    /// `len` bytes of `stream`'s body (as `Event::Data` gave them) have been used: credit
    /// returns to the client (WINDOW_UPDATEs for the stream and the connection, batched once
    /// half a window is owed).
    pub fn release_body(&mut self, stream: StreamId, len: usize) {
        let _ = (stream, len);
        todo!("frames helper")
    }

    /// Reset `stream` from our side (RST_STREAM with `code`): the response was cut short
    /// (`InternalError`, `Cancel`), or it is complete while the client is still sending a
    /// body we will not read (`NoError`, §8.1).
    pub fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        let _ = (stream, code);
        todo!("frames helper")
    }

    /// Send GOAWAY: `NoError` for a graceful stop (streams up to the last one accepted are
    /// finished, new ones refused), another code for a connection error.
    pub fn go_away(&mut self, code: ErrorCode) {
        let _ = code;
        todo!("frames helper")
    }

    /// Streams open or half-closed: the client still waits on them.
    #[must_use]
    pub fn active_streams(&self) -> usize {
        todo!("frames helper")
    }

    /// GOAWAY has been queued: accept no new streams.
    #[must_use]
    pub fn is_going_away(&self) -> bool {
        todo!("frames helper")
    }

    /// A connection error was found (its GOAWAY is queued): write what is queued and close.
    #[must_use]
    pub fn is_closing(&self) -> bool {
        todo!("frames helper")
    }

    /// The client preface has not been read in full yet.
    #[must_use]
    pub fn awaiting_preface(&self) -> bool {
        todo!("frames helper")
    }
}
