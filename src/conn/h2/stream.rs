//! One HTTP/2 stream as the server serves it: an inner `Conn` that sees the stream's request
//! as an HTTP/1 exchange, and what has been framed of its response.
//!
//! Owns: feeding the request body to the inner `Conn` (DATA payloads, re-framed as chunks when
//! the request has no `content-length`), and turning the inner `Conn`'s response (an HTTP/1
//! head, then body segments) into HEADERS and DATA frames under flow control.
//! Must not touch: the protocol state (`ampd_http::h2::Connection` decides windows and
//! states), other streams, the engine's Needs (`mod.rs` arbitrates jobs and upstream links).

use std::io::Write as _;

use ampd_http::h2::{Connection, Priority, StreamId};

use crate::conn::output::Output;
use crate::conn::upstream::Connect;
use crate::conn::Conn;
use crate::content::job::Job;
use crate::response::Head;

/// How DATA payloads reach the inner `Conn`'s body reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyFeed {
    /// As they come: the request said its length (or has no body).
    Plain,
    /// As chunks of the HTTP/1 chunked coding, ended by the last chunk at END_STREAM: the
    /// request said no length, and the inner `Conn`'s chunked reader then counts and limits it
    /// as it does for HTTP/1 (`max_body`, `413`).
    Chunked,
}

/// Where the response stands on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// Waiting for the inner `Conn`'s response head (after any `100 Continue`).
    Head,
    /// HEADERS sent; body bytes go out as DATA frames.
    Body,
    /// END_STREAM sent.
    Ended,
}

/// A Need of the stream's inner `Conn` the engine has not been handed yet (one job per
/// connection at a time; an upstream link per stream, up to `max_upstream_streams`: `mod.rs`).
#[derive(Debug)]
pub(super) enum Queued {
    Nothing,
    Job(Job),
    Connect(Connect),
}

#[derive(Debug)]
pub(super) struct Stream {
    pub id: StreamId,
    pub conn: Box<Conn>,
    pub feed: BodyFeed,
    pub framing: Framing,
    /// The client ended its side (END_STREAM, or the head alone).
    pub client_ended: bool,
    /// The inner `Conn` has answered: what is left in its output is all the response.
    pub answered: bool,
    /// Body bytes handed to the inner `Conn` whose flow-control credit is still owed.
    pub unreleased: usize,
    pub queued: Queued,
    /// The client reset the stream while a job for it was out: dropped when the job returns.
    pub cancelled: bool,
    /// When its response is framed beside others (`Session::frame`).
    pub priority: Priority,
}

impl Stream {
    pub(super) fn new(id: StreamId, conn: Box<Conn>, feed: BodyFeed, client_ended: bool) -> Stream {
        Stream {
            id,
            conn,
            feed,
            framing: Framing::Head,
            client_ended,
            answered: false,
            unreleased: 0,
            queued: Queued::Nothing,
            cancelled: false,
            priority: Priority::default(),
        }
    }

    /// Request body bytes from a DATA frame (`end`: its END_STREAM).
    pub(super) fn receive_body(&mut self, data: &[u8], end: bool) {
        self.unreleased += data.len();
        match self.feed {
            BodyFeed::Plain => {
                if !data.is_empty() {
                    self.conn.receive(data);
                }
            }
            BodyFeed::Chunked => {
                if !data.is_empty() {
                    // The chunk-size line, written where it stands: no allocation per frame.
                    let mut line = [0u8; 20];
                    let left = {
                        let mut rest = &mut line[..];
                        let _ = write!(rest, "{:x}\r\n", data.len());
                        rest.len()
                    };
                    let written = line.len() - left;
                    self.conn.receive(&line[..written]);
                    self.conn.receive(data);
                    self.conn.receive(b"\r\n");
                }
                if end {
                    self.conn.receive(b"0\r\n\r\n");
                }
            }
        }
        if end {
            self.client_ended = true;
        }
    }

    /// Credit owed to the client once the inner `Conn` has used every byte it was given.
    pub(super) fn take_credit(&mut self) -> usize {
        if self.unreleased > 0 && self.conn.buffered_input() == 0 {
            std::mem::take(&mut self.unreleased)
        } else {
            0
        }
    }

    /// Frame what the flow-control windows allow of this stream's response, at most `quantum`
    /// body bytes (the fairness share of one pass), into `output`. Returns the bytes queued.
    pub(super) fn frame(
        &mut self,
        connection: &mut Connection,
        head: &mut Head,
        output: &mut Output,
        quantum: u32,
    ) -> u64 {
        let before = output.pending();
        while self.framing == Framing::Head {
            let status = if self.conn.output.take_head(head) {
                let last = self.answered && self.conn.output.is_empty();
                connection.write_head(self.id, head, last, output_bytes(output));
                head.status
            } else {
                // A stream answered with nothing at all cannot happen (every path writes a
                // status); cut it rather than leave the client waiting.
                if self.answered && self.conn.output.is_empty() {
                    connection.reset_stream(self.id, ampd_http::h2::ErrorCode::InternalError);
                    self.framing = Framing::Ended;
                }
                return output.pending() - before;
            };
            let last = self.answered && self.conn.output.is_empty();
            let informational = (100..200).contains(&status);
            let end = last && !informational;
            if end {
                self.framing = Framing::Ended;
            } else if !informational {
                self.framing = Framing::Body;
            }
        }
        if self.framing != Framing::Body {
            return output.pending() - before;
        }
        let available = self.conn.output.pending();
        if available == 0 {
            if self.answered {
                let header = connection.data_frame(self.id, 0, true);
                output_bytes(output).extend_from_slice(&header);
                self.framing = Framing::Ended;
            }
            return output.pending() - before;
        }
        let allowed = connection
            .send_capacity(self.id)
            .min(connection.max_data_payload())
            .min(quantum);
        if allowed == 0 {
            return output.pending() - before;
        }
        let len = u32::try_from(available.min(u64::from(allowed))).unwrap_or(allowed);
        let end = self.answered && u64::from(len) == available;
        let header = connection.data_frame(self.id, len, end);
        output_bytes(output).extend_from_slice(&header);
        self.conn.output.move_front_into(output, u64::from(len));
        if end {
            self.framing = Framing::Ended;
        }
        output.pending() - before
    }

    /// Response bytes the inner `Conn` has queued and the windows hold back.
    pub(super) fn blocked(&self, connection: &Connection) -> bool {
        self.framing == Framing::Body
            && self.conn.output.pending() > 0
            && connection.send_capacity(self.id) == 0
    }
}

fn output_bytes(output: &mut Output) -> &mut Vec<u8> {
    use crate::content::sink::Sink as _;
    output.bytes()
}
