//! The bytes a connection owes its client, in order: heads and small bodies in one buffer,
//! shared file-cache bodies by reference, large bodies as file ranges for `sendfile`.
//!
//! Owns: the send queue and what has been sent of it, and how a response head enters it: a
//! handler fills a `Head` (`begin_head`) and queues it (`end_head`); an HTTP/1 connection
//! serialises it into the buffer there, once; an HTTP/2 stream's queue keeps it as data
//! (`structured_heads`) for the stream to HPACK-encode (`take_head`). Either way the queue
//! counts head bytes apart from body bytes (`written_since`, for the access log). Pipelined
//! responses queue up behind each other so the engine can send them in one `writev` (AFPA's
//! batching, without copies).
//! Must not touch: sockets — the engine asks `memory_slices` / `front_file` and reports
//! progress with `advance`.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::Arc;

use super::answer_as::AnswerAs;
use crate::config::header_rules::HeaderRules;
use crate::content::file::OpenFile;
use crate::content::sink::Sink;
use crate::response::{write_http1_head, Head, Http1Framing};

#[derive(Debug)]
enum Segment {
    /// `buffer[start..end]`.
    Buffer { start: usize, end: usize },
    Shared {
        data: Arc<[u8]>,
        start: usize,
        end: usize,
    },
    File {
        file: Arc<OpenFile>,
        start: u64,
        end: u64,
    },
    /// The front of `Output::heads` (a structured queue's, `structured_heads`): no bytes.
    Head,
}

impl Segment {
    fn len(&self) -> u64 {
        match self {
            Segment::Buffer { start, end } | Segment::Shared { start, end, .. } => {
                (end - start) as u64
            }
            Segment::File { start, end, .. } => end - start,
            Segment::Head => 0,
        }
    }
}

/// A file range to send next: `(file, offset, end)`.
pub struct FileRange<'a> {
    pub file: &'a Arc<OpenFile>,
    pub offset: u64,
    pub end: u64,
}

#[derive(Debug, Default)]
pub struct Output {
    buffer: Vec<u8>,
    segments: VecDeque<Segment>,
    /// Bytes of `segments` not yet sent.
    pending: u64,
    /// `buffer[..sealed]` is covered by segments (or already sent).
    sealed: usize,
    /// Heads stay data until the protocol encodes them (an HTTP/2 stream's queue), instead of
    /// being serialised as HTTP/1 by `end_head`.
    structured: bool,
    /// The head a handler fills between `begin_head` and `end_head` (kept for its memory).
    building: Head,
    /// Structured heads queued, in the order of their `Segment::Head`s.
    heads: VecDeque<Head>,
    /// Heads taken, kept for their memory.
    spare_heads: Vec<Head>,
    /// Bytes of every head queued so far: as serialised, or for a structured head as HTTP/1
    /// would have had them (status line, fields, blank line).
    head_bytes: u64,
    /// Where a pre-serialised head began in `buffer` (`http1_head`).
    raw_head_start: usize,
    /// The header rules of the location whose response is being written (`set_header_rules`).
    rules: Option<Arc<HeaderRules>>,
    /// The status an error page's response goes out with (`set_answer_as`).
    answer_as: Option<Box<AnswerAs>>,
}

/// Where the queue stood before a response was written (see `Output::written_since`).
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    pending: u64,
    head_bytes: u64,
}

/// Sent bytes at the front of the buffer past which it is compacted (`compact`).
const COMPACT_AFTER: usize = 64 << 10;

/// Most iovecs handed to one `writev` (Linux's `IOV_MAX` is 1024).
const MAX_SLICES: usize = 64;

impl Output {
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.buffer.len() == self.sealed
    }

    /// Remember where the queue stands, before writing a response.
    #[must_use]
    pub fn mark(&self) -> Mark {
        Mark {
            pending: self.pending(),
            head_bytes: self.head_bytes,
        }
    }

    /// Keep heads as data for the protocol to encode (an HTTP/2 stream), or serialise them as
    /// HTTP/1 as they are queued (the default).
    pub fn set_structured_heads(&mut self, structured: bool) {
        self.structured = structured;
    }

    /// Whether heads are kept as data (`set_structured_heads`).
    #[must_use]
    pub fn structured_heads(&self) -> bool {
        self.structured
    }

    /// The header rules every head queued from now on is committed under: the location's
    /// that answers (`None` for an answer no location gave, or a location without rules).
    pub fn set_header_rules(&mut self, rules: Option<&Arc<HeaderRules>>) {
        match (rules, &self.rules) {
            (None, None) => {}
            (Some(rules), Some(held)) if Arc::ptr_eq(rules, held) => {}
            _ => self.rules = rules.cloned(),
        }
    }

    /// While an error page's request is served: the status (and fields) every final head
    /// queued is committed with (`conn::error_pages`); `None` once the request is answered.
    pub fn set_answer_as(&mut self, answer_as: Option<Box<AnswerAs>>) {
        self.answer_as = answer_as;
    }

    #[must_use]
    pub fn answer_as(&self) -> Option<&AnswerAs> {
        self.answer_as.as_deref()
    }

    pub fn answer_as_mut(&mut self) -> Option<&mut AnswerAs> {
        self.answer_as.as_deref_mut()
    }

    /// Swap the queue's memory with `other` (the event loop's buffer loan) while each keeps
    /// its header rules: they belong to the connection's response, not to the memory, which
    /// may pass to another connection between turns (a rule lent with it would shape that
    /// connection's answers; one lent away would be lost during a disk job).
    pub fn trade_memory(&mut self, other: &mut Output) {
        std::mem::swap(self, other);
        std::mem::swap(&mut self.rules, &mut other.rules);
        std::mem::swap(&mut self.answer_as, &mut other.answer_as);
    }

    /// Start a response head with `status`: the handler adds its fields to what this returns,
    /// then calls `end_head`.
    pub fn begin_head(&mut self, status: u16) -> &mut Head {
        self.building.reset(status);
        &mut self.building
    }

    /// Queue the head begun with `begin_head`, before any body bytes written after this:
    /// serialised for HTTP/1 with the fields `framing` calls for, or kept as data.
    pub fn end_head(&mut self, framing: Http1Framing) {
        self.end_head_shaped(|_| framing);
    }

    /// `end_head`, with `shape` run on the head after the header rules and before it is
    /// queued: the response stage's body transform chooses there, on the fields as they
    /// will go out, and returns the framing its choice calls for.
    pub fn end_head_shaped(&mut self, shape: impl FnOnce(&mut Head) -> Http1Framing) {
        // The commit point: every head but the fast path's passes here once, filled.
        if let Some(answer_as) = &self.answer_as {
            answer_as.apply(&mut self.building);
        }
        if let Some(rules) = &self.rules {
            rules.apply(&mut self.building);
        }
        let framing = shape(&mut self.building);
        if self.structured {
            self.seal();
            let spare = self.spare_heads.pop().unwrap_or_default();
            let head = std::mem::replace(&mut self.building, spare);
            self.head_bytes += head.http1_len() as u64 + 2;
            self.heads.push_back(head);
            self.segments.push_back(Segment::Head);
        } else {
            let written = write_http1_head(&self.building, framing, &mut self.buffer);
            self.head_bytes += written as u64;
        }
    }

    /// The buffer to write an already serialised HTTP/1 head into (the header cache's `200`),
    /// `None` when heads are kept as data, or when header rules apply: the writer then fills
    /// a `Head` and `end_head` applies them.
    pub fn http1_head(&mut self) -> Option<&mut Vec<u8>> {
        // A location with rules takes the structured path rather than rules baked into the
        // cached bytes: the header cache is keyed by file, not location (one file served by
        // two locations shares its head), so baking would split its entries per location for
        // the few that opt in, while the fallback costs those alone one `Head` fill per
        // request and leaves every other location's fast path exactly as it was.
        if self.structured || self.rules.is_some() || self.answer_as.is_some() {
            return None;
        }
        self.raw_head_start = self.buffer.len();
        Some(&mut self.buffer)
    }

    /// The head written into `http1_head`'s buffer is complete.
    pub fn end_http1_head(&mut self) {
        self.head_bytes += (self.buffer.len() - self.raw_head_start) as u64;
    }

    /// Move the structured head at the front of the queue into `into`, replacing what it
    /// held. `false`, and nothing moved, when the front is not one.
    pub fn take_head(&mut self, into: &mut Head) -> bool {
        self.seal();
        if !matches!(self.segments.front(), Some(Segment::Head)) {
            return false;
        }
        self.segments.pop_front();
        let Some(head) = self.heads.pop_front() else {
            return false;
        };
        let old = std::mem::replace(into, head);
        self.spare_heads.push(old);
        true
    }

    /// The bytes of the response written since `mark`, head and body.
    #[must_use]
    pub fn written_total_since(&self, mark: Mark) -> u64 {
        let queued = self.pending().saturating_sub(mark.pending);
        if self.structured {
            // Structured heads are not in the byte count.
            queued + (self.head_bytes - mark.head_bytes)
        } else {
            queued
        }
    }

    /// `(head bytes, body bytes)` of the response written since `mark`. Valid until the
    /// engine next sends (nothing is sent between a mark and this call).
    #[must_use]
    pub fn written_since(&self, mark: Mark) -> (u64, u64) {
        let total = self.written_total_since(mark);
        let head = (self.head_bytes - mark.head_bytes).min(total);
        (head, total - head)
    }

    /// Whether the queue owns heap memory (empty or not).
    #[must_use]
    pub fn holds_memory(&self) -> bool {
        self.buffer.capacity() > 0 || self.segments.capacity() > 0
    }

    /// The buffer's capacity in bytes.
    #[must_use]
    pub fn buffer_capacity(&self) -> usize {
        self.buffer.capacity()
    }

    /// Drop what is queued, keeping the memory (a `Conn` made anew for the next HTTP/2 stream).
    pub fn clear(&mut self) {
        self.buffer.clear();
        self.segments.clear();
        self.spare_heads.extend(self.heads.drain(..));
        self.pending = 0;
        self.sealed = 0;
        self.answer_as = None;
    }

    /// Free the buffer's memory if nothing is queued.
    pub fn shed(&mut self) {
        if self.is_empty() {
            self.buffer = Vec::new();
            self.segments = VecDeque::new();
            self.sealed = 0;
            self.building = Head::default();
            self.heads = VecDeque::new();
            self.spare_heads = Vec::new();
        }
    }

    /// Bytes queued and not yet sent.
    #[must_use]
    pub fn pending(&self) -> u64 {
        self.pending + (self.buffer.len() - self.sealed) as u64
    }

    /// Turn bytes appended to the buffer since the last call into a segment, so they keep
    /// their place in the queue relative to shared and file segments pushed after them.
    fn seal(&mut self) {
        let len = self.buffer.len();
        if len == self.sealed {
            return;
        }
        match self.segments.back_mut() {
            Some(Segment::Buffer { end, .. }) if *end == self.sealed => *end = len,
            _ => self.segments.push_back(Segment::Buffer {
                start: self.sealed,
                end: len,
            }),
        }
        self.pending += (len - self.sealed) as u64;
        self.sealed = len;
    }

    /// The memory at the front of the queue, as slices for one `writev`; empty if the front is
    /// a file range.
    pub fn memory_slices(&mut self) -> Vec<IoSlice<'_>> {
        self.seal();
        let mut slices = Vec::with_capacity(self.segments.len().min(MAX_SLICES));
        for segment in &self.segments {
            if slices.len() == MAX_SLICES {
                break;
            }
            match segment {
                Segment::Buffer { start, end } => {
                    slices.push(IoSlice::new(&self.buffer[*start..*end]))
                }
                Segment::Shared { data, start, end } => {
                    slices.push(IoSlice::new(&data[*start..*end]))
                }
                Segment::File { .. } => break,
                Segment::Head => {}
            }
        }
        slices
    }

    /// Whether a file range waits right behind the memory at the front of the queue (the head
    /// of a `sendfile` response): the engine then tells the kernel more is coming.
    #[must_use]
    pub fn file_follows_memory(&self) -> bool {
        self.segments
            .iter()
            .any(|segment| matches!(segment, Segment::File { .. }))
    }

    /// The file range at the front of the queue, if the front is one.
    pub fn front_file(&mut self) -> Option<FileRange<'_>> {
        self.seal();
        match self.segments.front() {
            Some(Segment::File { file, start, end }) => Some(FileRange {
                file,
                offset: *start,
                end: *end,
            }),
            _ => None,
        }
    }

    /// Record that `sent` bytes from the front were written.
    pub fn advance(&mut self, mut sent: u64) {
        self.pending -= sent.min(self.pending);
        while sent > 0 {
            let Some(front) = self.segments.front_mut() else {
                break;
            };
            if matches!(front, Segment::Head) {
                // Taken by `take_head`, never sent as bytes.
                break;
            }
            let len = front.len();
            if sent < len {
                match front {
                    Segment::Buffer { start, .. } | Segment::Shared { start, .. } => {
                        *start += usize::try_from(sent).unwrap_or(usize::MAX);
                    }
                    Segment::File { start, .. } => *start += sent,
                    Segment::Head => {}
                }
                break;
            }
            sent -= len;
            self.segments.pop_front();
        }
        if self.segments.is_empty() && self.sealed == self.buffer.len() {
            self.buffer.clear();
            self.sealed = 0;
        } else {
            self.compact();
        }
    }

    /// Move up to `max` bytes from the front of the queue to the back of `into`, by reference
    /// where they are shared data or file ranges (HTTP/2 puts a stream's body behind a DATA
    /// frame header in the connection's queue). Returns the bytes moved.
    pub fn move_front_into(&mut self, into: &mut Output, max: u64) -> u64 {
        self.seal();
        let mut moved = 0;
        for segment in &self.segments {
            if moved == max || matches!(segment, Segment::Head) {
                break;
            }
            let take = segment.len().min(max - moved);
            match segment {
                Segment::Buffer { start, .. } => {
                    let start = *start;
                    into.bytes()
                        .extend_from_slice(&self.buffer[start..start + take as usize]);
                }
                Segment::Shared { data, start, .. } => {
                    into.shared(data.clone(), *start, *start + take as usize);
                }
                Segment::File { file, start, .. } => {
                    into.file(file.clone(), *start, *start + take);
                }
                Segment::Head => {}
            }
            moved += take;
        }
        self.advance(moved);
        moved
    }

    /// Reclaim the sent front of the buffer once it is most of it: a response streamed from
    /// an upstream appends while earlier bytes are still going out, so the buffer would
    /// otherwise never empty and grow with the whole body.
    fn compact(&mut self) {
        let Some(Segment::Buffer { start: sent, .. }) = self.segments.front() else {
            return;
        };
        let sent = *sent;
        if sent < COMPACT_AFTER || sent * 2 < self.buffer.len() {
            return;
        }
        self.buffer.drain(..sent);
        self.sealed -= sent;
        for segment in &mut self.segments {
            if let Segment::Buffer { start, end } = segment {
                *start -= sent;
                *end -= sent;
            }
        }
    }
}

impl Sink for Output {
    fn begin_head(&mut self, status: u16) -> &mut Head {
        Output::begin_head(self, status)
    }

    fn end_head(&mut self, framing: Http1Framing) {
        Output::end_head(self, framing);
    }

    fn http1_head(&mut self) -> Option<&mut Vec<u8>> {
        Output::http1_head(self)
    }

    fn end_http1_head(&mut self) {
        Output::end_http1_head(self);
    }

    fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.buffer
    }

    fn shared(&mut self, data: Arc<[u8]>, start: usize, end: usize) {
        self.seal();
        if end > start {
            self.pending += (end - start) as u64;
            self.segments
                .push_back(Segment::Shared { data, start, end });
        }
    }

    fn file(&mut self, file: Arc<OpenFile>, start: u64, end: u64) {
        self.seal();
        if end > start {
            self.pending += end - start;
            self.segments.push_back(Segment::File { file, start, end });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_response(output: &mut Output) {
        let head = output.begin_head(200);
        head.push("Content-Type", b"text/plain");
        head.push_decimal("Content-Length", 4);
        output.end_head(Http1Framing::delimited(crate::response::Persistence::Close));
        output.bytes().extend_from_slice(b"body");
    }

    #[test]
    fn an_http1_queue_serialises_the_head_once_and_counts_it_apart_from_the_body() {
        let mut output = Output::default();
        let mark = output.mark();
        queue_response(&mut output);
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\
                     Connection: close\r\n\r\n";
        assert_eq!(output.written_since(mark), (head.len() as u64, 4));
        let sent: Vec<u8> = output
            .memory_slices()
            .iter()
            .flat_map(|s| s.to_vec())
            .collect();
        assert_eq!(&sent[..head.len()], head);
        assert_eq!(&sent[head.len()..], b"body");
    }

    #[test]
    fn a_structured_queue_keeps_the_head_as_data_in_front_of_its_body() {
        let mut output = Output::default();
        output.set_structured_heads(true);
        let mark = output.mark();
        queue_response(&mut output);
        // Counted as HTTP/1 would have it, without the connection's own fields.
        let http1 = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\n";
        assert_eq!(output.written_since(mark), (http1.len() as u64, 4));
        assert_eq!(output.pending(), 4, "the head is no bytes of the queue");
        let mut into = Output::default();
        assert_eq!(
            output.move_front_into(&mut into, 100),
            0,
            "the head goes first"
        );
        let mut head = Head::default();
        assert!(output.take_head(&mut head));
        assert_eq!(head.status, 200);
        assert_eq!(head.get("content-length"), Some(&b"4"[..]));
        assert!(head.get("connection").is_none());
        assert!(!output.take_head(&mut head));
        assert_eq!(output.move_front_into(&mut into, 100), 4);
        assert!(output.is_empty());
    }

    #[test]
    fn a_buffer_appended_to_while_it_drains_stays_bounded_and_keeps_every_byte_in_order() {
        let mut output = Output::default();
        let mut sent = Vec::new();
        let mut expected = Vec::new();
        for round in 0..200u32 {
            let piece: Vec<u8> = (0..10_000u32).map(|at| (at + round) as u8).collect();
            output.bytes().extend_from_slice(&piece);
            expected.extend_from_slice(&piece);
            // The reader takes a little less than was written each round: never empty.
            let slices = output.memory_slices();
            let mut take = 9_000;
            let mut moved = 0;
            for slice in &slices {
                let part = &slice[..slice.len().min(take)];
                sent.extend_from_slice(part);
                take -= part.len();
                moved += part.len();
            }
            drop(slices);
            output.advance(moved as u64);
            assert!(
                output.buffer.len() < 512 << 10,
                "round {round}: {}",
                output.buffer.len()
            );
        }
        while !output.is_empty() {
            let slices = output.memory_slices();
            let moved: usize = slices.iter().map(|slice| slice.len()).sum();
            for slice in &slices {
                sent.extend_from_slice(slice);
            }
            drop(slices);
            output.advance(moved as u64);
        }
        assert_eq!(sent, expected);
    }
}
