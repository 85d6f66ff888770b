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
//!
//! This file holds the types, the public API and the bookkeeping the frame handlers share; the
//! handlers are in `connection/`: `receive.rs` (the dispatch, DATA, HEADERS, CONTINUATION),
//! `control.rs` (PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE) and `closing.rs`
//! (stream errors, refusals, closing streams, connection errors).

use std::time::{Duration, Instant};

use super::error::ErrorCode;
use super::fields::ResponseFields;
use super::flood::Budgets;
use super::frame::{self, setting, FrameHeader, HEADER_LEN, MAX_WINDOW};
use super::head_block;
use super::hpack::{Decoder, Encoder};
use super::stream::{Closure, RecentlyClosed, RecvState, SendState, Streams};
use super::PREFACE;
use crate::request::RequestHead;
use crate::response_head::Head;

mod closing;
mod control;
mod receive;

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

/// Where the connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the 24 bytes of the client preface (§3.4).
    Preface,
    /// The preface is read; the client's first frame must be SETTINGS (§3.4).
    FirstSettings,
    /// Reading frames.
    Frames,
    /// A connection error was found (or the server ended the connection with an error code):
    /// GOAWAY is queued, nothing more is read.
    Closing,
}

/// What a header block is decoded for, decided when its HEADERS frame arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockUse {
    /// It opens a new stream; `self_dependent` streams are refused once decoded (§5.3.1).
    Request { self_dependent: bool },
    /// The trailers of an open stream (§8.1): validated and dropped.
    Trailers,
    /// Decoded only to keep HPACK in step, then dropped: a stream we reset or ignore (after
    /// our GOAWAY, §6.8).
    Discard,
    /// Decoded, then a stream error with this code.
    StreamError(ErrorCode),
}

/// A header block whose HEADERS frame lacked END_HEADERS: CONTINUATIONs of `stream` follow,
/// and nothing else may come between them (§6.10).
#[derive(Clone, Copy, Debug)]
struct PendingBlock {
    stream: StreamId,
    end_stream: bool,
    use_: BlockUse,
}

/// The client's window before any SETTINGS (§6.5.2, §6.9.2).
const DEFAULT_WINDOW: u32 = 65_535;

/// The client's SETTINGS_HEADER_TABLE_SIZE before it says otherwise.
const DEFAULT_HEADER_TABLE: u32 = 4_096;

/// One connection's HTTP/2 state.
#[derive(Debug)]
pub struct Connection {
    limits: Limits,
    phase: Phase,
    /// Control frames queued for `write_control`.
    control: Vec<u8>,
    decoder: Decoder,
    encoder: Encoder,
    /// The last head's block, for `write_head`.
    blocks: head_block::Blocks,
    streams: Streams,
    closed: RecentlyClosed,
    /// The highest client stream id opened (or refused, or ignored): ids above it are idle.
    highest: StreamId,
    pending: Option<PendingBlock>,
    /// A header block being assembled from HEADERS + CONTINUATION (kept for its capacity).
    block: Vec<u8>,
    /// The connection's receive window as the client sees it, and what is owed back to it.
    recv_window: i64,
    recv_owed: u32,
    /// The connection receive window we keep crediting the client up to.
    recv_target: u32,
    /// What a new stream's receive window is: the default until the client acknowledges our
    /// SETTINGS, whichever of it and ours is larger (the client may open streams before it
    /// reads our SETTINGS), ours after.
    recv_initial: u32,
    settings_acked: bool,
    /// The connection send window (the client's receive window).
    send_window: i64,
    /// The client's SETTINGS: INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, HEADER_TABLE_SIZE.
    peer_initial_window: u32,
    peer_max_frame: u32,
    peer_header_table: u32,
    going_away: bool,
    budgets: Budgets,
}

impl Connection {
    /// A connection whose server preface (our SETTINGS, then the connection WINDOW_UPDATE) is
    /// queued for `write_control`.
    #[must_use]
    pub fn new(limits: &Limits) -> Connection {
        let mut limits = limits.clone();
        limits.max_frame_size = limits
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_FRAME_SIZE_LIMIT);
        limits.initial_window_size = limits.initial_window_size.min(MAX_WINDOW);
        let recv_target = limits
            .connection_window_size
            .clamp(DEFAULT_WINDOW, MAX_WINDOW);

        let mut control = Vec::with_capacity(256);
        let mut params = [(0, 0); 6];
        let mut count = 0;
        let mut add = |id, value| {
            params[count] = (id, value);
            count += 1;
        };
        add(
            setting::MAX_CONCURRENT_STREAMS,
            limits.max_concurrent_streams,
        );
        add(setting::INITIAL_WINDOW_SIZE, limits.initial_window_size);
        add(setting::MAX_FRAME_SIZE, limits.max_frame_size);
        add(setting::MAX_HEADER_LIST_SIZE, limits.max_header_list_size);
        if limits.header_table_size != DEFAULT_HEADER_TABLE {
            add(setting::HEADER_TABLE_SIZE, limits.header_table_size);
        }
        add(setting::ENABLE_PUSH, 0);
        frame::write_settings(&mut control, &params[..count]);
        if recv_target > DEFAULT_WINDOW {
            frame::write_window_update(&mut control, 0, recv_target - DEFAULT_WINDOW);
        }

        // Enough to classify the frames a client may still have in flight for the streams it
        // just closed or we just reset (a few round trips of a full set of streams).
        let remembered = (limits.max_concurrent_streams as usize)
            .saturating_mul(2)
            .clamp(32, 1024);
        Connection {
            phase: Phase::Preface,
            control,
            decoder: Decoder::new(limits.header_table_size as usize),
            encoder: Encoder::new(),
            blocks: head_block::Blocks::default(),
            streams: Streams::default(),
            closed: RecentlyClosed::new(remembered),
            highest: 0,
            pending: None,
            block: Vec::new(),
            recv_window: i64::from(recv_target),
            recv_owed: 0,
            recv_target,
            recv_initial: limits.initial_window_size.max(DEFAULT_WINDOW),
            settings_acked: false,
            send_window: i64::from(DEFAULT_WINDOW),
            peer_initial_window: DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            peer_header_table: DEFAULT_HEADER_TABLE,
            going_away: false,
            budgets: Budgets::new(&limits),
            limits,
        }
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
        let mut used = 0;
        if self.phase == Phase::Preface {
            let seen = input.len().min(PREFACE.len());
            if input[..seen] != PREFACE[..seen] {
                // Not HTTP/2 (§3.4): GOAWAY PROTOCOL_ERROR, then close.
                self.connection_error(ErrorCode::ProtocolError);
                return 0;
            }
            if seen < PREFACE.len() {
                return 0;
            }
            used = PREFACE.len();
            self.phase = Phase::FirstSettings;
        }
        while self.phase != Phase::Closing {
            let rest = &input[used..];
            let Some((head, after)) = rest.split_first_chunk::<HEADER_LEN>() else {
                break;
            };
            let header = FrameHeader::parse(head);
            // Judged on the header alone: a client announcing a frame past our
            // SETTINGS_MAX_FRAME_SIZE is not waited for (§4.2).
            if header.length > self.limits.max_frame_size {
                self.connection_error(ErrorCode::FrameSizeError);
                break;
            }
            let Some(payload) = after.get(..header.length as usize) else {
                break;
            };
            used += HEADER_LEN + payload.len();
            if let Err(code) = self.frame(header, payload, now, events) {
                self.connection_error(code);
            }
        }
        used
    }

    /// Append the control frames queued (SETTINGS and their ACKs, PING ACKs, WINDOW_UPDATEs,
    /// RST_STREAMs, GOAWAY) to `out`. They go before any response bytes queued after them.
    pub fn write_control(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.control);
        self.control.clear();
    }

    /// Whether control frames wait for `write_control`.
    #[must_use]
    pub fn has_control(&self) -> bool {
        !self.control.is_empty()
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
        if !self.may_send(stream) {
            return;
        }
        out.extend_from_slice(&[0; HEADER_LEN]);
        let block_start = out.len();
        head_block::encode(&mut self.encoder, response, out);
        self.finish_headers(stream, block_start, end_stream, out);
    }

    /// Append the HEADERS frame (and CONTINUATIONs, at the client's SETTINGS_MAX_FRAME_SIZE)
    /// of `head`. `last`: nothing follows it, so END_STREAM is set unless the status is
    /// informational (1xx, after which the final head follows). A head repeated on the
    /// connection is sent from the block remembered for it (`head_block.rs`).
    pub fn write_head(&mut self, stream: StreamId, head: &Head, last: bool, out: &mut Vec<u8>) {
        if !self.may_send(stream) {
            return;
        }
        out.extend_from_slice(&[0; HEADER_LEN]);
        let block_start = out.len();
        self.blocks.encode(&mut self.encoder, head, out);
        let end_stream = last && !(100..200).contains(&head.status);
        self.finish_headers(stream, block_start, end_stream, out);
    }

    /// Whether `stream` may still send: reset meanwhile (or already ended), nothing may be
    /// sent on it (§5.1).
    fn may_send(&self, stream: StreamId) -> bool {
        self.streams
            .get(stream)
            .is_some_and(|open| open.send == SendState::Open)
    }

    fn finish_headers(
        &mut self,
        stream: StreamId,
        block_start: usize,
        end_stream: bool,
        out: &mut Vec<u8>,
    ) {
        frame::frame_header_block(out, block_start, stream, end_stream, self.peer_max_frame);
        if end_stream {
            self.end_sending(stream);
        }
    }

    /// Body bytes `stream` may send now: the smaller of its window and the connection's (0
    /// when blocked, or when the stream is not open for sending).
    #[must_use]
    pub fn send_capacity(&self, stream: StreamId) -> u32 {
        match self.streams.get(stream) {
            Some(open) if open.send == SendState::Open => {
                let window = open.send_window.min(self.send_window).max(0);
                u32::try_from(window).unwrap_or(MAX_WINDOW)
            }
            _ => 0,
        }
    }

    /// The largest DATA payload the client accepts (its SETTINGS_MAX_FRAME_SIZE).
    #[must_use]
    pub fn max_data_payload(&self) -> u32 {
        self.peer_max_frame
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
        debug_assert!(len <= self.send_capacity(stream) && len <= self.peer_max_frame);
        self.send_window -= i64::from(len);
        self.budgets.window_updates.earn();
        if let Some(open) = self.streams.get_mut(stream) {
            open.send_window -= i64::from(len);
        }
        if end_stream {
            self.end_sending(stream);
        }
        frame::data_header(stream, len, end_stream)
    }

    /// `len` bytes of `stream`'s body (as `Event::Data` gave them) have been used: credit
    /// returns to the client (WINDOW_UPDATEs for the stream and the connection, batched once
    /// half a window is owed).
    pub fn release_body(&mut self, stream: StreamId, len: usize) {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        self.credit_connection(len);
        let half = (self.recv_initial / 2).max(1);
        if let Some(open) = self.streams.get_mut(stream) {
            // A stream the client has ended needs no more credit.
            if open.recv == RecvState::Open {
                open.recv_owed = open.recv_owed.saturating_add(len);
                if open.recv_owed >= half {
                    // Never past 2^31-1, even if the caller releases more than it was given.
                    let room = i64::from(MAX_WINDOW) - open.recv_window;
                    let owed = open.recv_owed.min(u32::try_from(room.max(0)).unwrap_or(0));
                    open.recv_owed = 0;
                    if owed == 0 {
                        return;
                    }
                    open.recv_window += i64::from(owed);
                    frame::write_window_update(&mut self.control, stream, owed);
                }
            }
        }
    }

    /// Reset `stream` from our side (RST_STREAM with `code`): the response was cut short
    /// (`InternalError`, `Cancel`), or it is complete while the client is still sending a
    /// body we will not read (`NoError`, §8.1).
    pub fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        if self.streams.remove(stream).is_some() {
            frame::write_rst_stream(&mut self.control, stream, code);
            self.closed.push(stream, Closure::ResetByUs);
        }
    }

    /// Send GOAWAY: `NoError` for a graceful stop (streams up to the last one accepted are
    /// finished, new ones refused), another code for a connection error.
    pub fn go_away(&mut self, code: ErrorCode) {
        if self.phase == Phase::Closing || (self.going_away && code == ErrorCode::NoError) {
            return;
        }
        frame::write_go_away(&mut self.control, self.highest, code);
        self.going_away = true;
        if code != ErrorCode::NoError {
            self.phase = Phase::Closing;
        }
    }

    /// Streams open or half-closed: the client still waits on them.
    #[must_use]
    pub fn active_streams(&self) -> usize {
        self.streams.len()
    }

    /// GOAWAY has been queued: accept no new streams.
    #[must_use]
    pub fn is_going_away(&self) -> bool {
        self.going_away
    }

    /// A connection error was found (its GOAWAY is queued): write what is queued and close.
    #[must_use]
    pub fn is_closing(&self) -> bool {
        self.phase == Phase::Closing
    }

    /// The client preface has not been read in full yet.
    #[must_use]
    pub fn awaiting_preface(&self) -> bool {
        self.phase == Phase::Preface
    }
}

/// Bookkeeping every frame handler shares.
impl Connection {
    /// Return `len` bytes of the connection window to the client, batched.
    fn credit_connection(&mut self, len: u32) {
        self.recv_owed = self.recv_owed.saturating_add(len);
        if self.recv_owed >= self.recv_target / 2 {
            let room = i64::from(self.recv_target) - self.recv_window;
            let owed = self.recv_owed.min(u32::try_from(room.max(0)).unwrap_or(0));
            self.recv_owed = 0;
            if owed == 0 {
                return;
            }
            self.recv_window += i64::from(owed);
            frame::write_window_update(&mut self.control, 0, owed);
        }
    }

    /// A stream id the client has not used yet: above the highest it opened, or even (we
    /// push no streams).
    fn is_idle(&self, id: StreamId) -> bool {
        id > self.highest || id.is_multiple_of(2)
    }

    fn spend_empty(&mut self, now: Instant) -> Result<(), ErrorCode> {
        if self.budgets.empty_frames.spend(now) {
            Ok(())
        } else {
            Err(ErrorCode::EnhanceYourCalm)
        }
    }
}

/// The invariants the fuzz target checks after every call (`crate::fuzz::h2_connection`).
impl Connection {
    /// # Panics
    /// When a window passed 2^31-1 or more streams are open than we allow.
    pub(crate) fn assert_invariants(&self) {
        let max = i64::from(MAX_WINDOW);
        assert!(self.send_window <= max, "send window {}", self.send_window);
        assert!(
            self.recv_window <= max,
            "receive window {}",
            self.recv_window
        );
        assert!(
            self.streams.len() <= self.limits.max_concurrent_streams as usize,
            "{} streams open",
            self.streams.len()
        );
        for stream in self.streams.iter() {
            assert!(
                stream.send_window <= max,
                "stream send window {}",
                stream.send_window
            );
            assert!(
                stream.recv_window <= max,
                "stream receive window {}",
                stream.recv_window
            );
            assert!(stream.id % 2 == 1 && stream.id <= self.highest);
        }
    }
}

#[cfg(test)]
mod tests;
