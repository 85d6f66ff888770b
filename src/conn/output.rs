//! The bytes a connection owes its client, in order: heads and small bodies in one buffer,
//! shared file-cache bodies by reference, large bodies as file ranges for `sendfile`.
//!
//! Owns: the send queue and what has been sent of it. Pipelined responses queue up behind each
//! other so the engine can send them in one `writev` (AFPA's batching, without copies).
//! Must not touch: sockets — the engine asks `memory_slices` / `front_file` and reports
//! progress with `advance`.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::{Arc, LazyLock};

use memchr::memmem::Finder;

use crate::content::file::OpenFile;
use crate::content::sink::Sink;

/// The blank line that ends a head, its searcher built once: `memmem::find` builds one per
/// call, which was 5 % of a cached response's instructions (callgrind).
static HEAD_END: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));

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
}

impl Segment {
    fn len(&self) -> u64 {
        match self {
            Segment::Buffer { start, end } | Segment::Shared { start, end, .. } => {
                (end - start) as u64
            }
            Segment::File { start, end, .. } => end - start,
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
}

/// Where the queue stood before a response was written (see `Output::written_since`).
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    pending: u64,
    buffer_len: usize,
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
            buffer_len: self.buffer.len(),
        }
    }

    /// The bytes of the response written since `mark`, head and body.
    #[must_use]
    pub fn written_total_since(&self, mark: Mark) -> u64 {
        self.pending().saturating_sub(mark.pending)
    }

    /// `(head bytes, body bytes)` of the response written since `mark`: every response starts
    /// with its head in the buffer, ended by the first blank line. Valid until the engine
    /// next sends (nothing is sent between a mark and this call).
    #[must_use]
    pub fn written_since(&self, mark: Mark) -> (u64, u64) {
        let total = self.written_total_since(mark);
        let written = self.buffer.get(mark.buffer_len..).unwrap_or_default();
        let head = HEAD_END.find(written).map_or(written.len(), |at| at + 4) as u64;
        let head = head.min(total);
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
        self.pending = 0;
        self.sealed = 0;
    }

    /// Free the buffer's memory if nothing is queued.
    pub fn shed(&mut self) {
        if self.is_empty() {
            self.buffer = Vec::new();
            self.segments = VecDeque::new();
            self.sealed = 0;
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
            let len = front.len();
            if sent < len {
                match front {
                    Segment::Buffer { start, .. } | Segment::Shared { start, .. } => {
                        *start += usize::try_from(sent).unwrap_or(usize::MAX);
                    }
                    Segment::File { start, .. } => *start += sent,
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

    /// Move the response head at the front of the queue (up to and including its blank line)
    /// into `head`, replacing what it held. `false`, and nothing moved, when the front does
    /// not hold a complete head in memory (HTTP/2 turns the head into a HEADERS frame).
    pub fn take_head(&mut self, head: &mut Vec<u8>) -> bool {
        self.seal();
        head.clear();
        let mut found = None;
        for segment in &self.segments {
            let bytes = match segment {
                Segment::Buffer { start, end } => &self.buffer[*start..*end],
                Segment::Shared { data, start, end } => &data[*start..*end],
                Segment::File { .. } => break,
            };
            let before = head.len();
            head.extend_from_slice(bytes);
            // The blank line may straddle two segments: look from just before this one.
            let from = before.saturating_sub(3);
            if let Some(at) = HEAD_END.find(&head[from..]) {
                found = Some(from + at + 4);
                break;
            }
        }
        match found {
            Some(len) => {
                head.truncate(len);
                self.advance(len as u64);
                true
            }
            None => {
                head.clear();
                false
            }
        }
    }

    /// Move up to `max` bytes from the front of the queue to the back of `into`, by reference
    /// where they are shared data or file ranges (HTTP/2 puts a stream's body behind a DATA
    /// frame header in the connection's queue). Returns the bytes moved.
    pub fn move_front_into(&mut self, into: &mut Output, max: u64) -> u64 {
        self.seal();
        let mut moved = 0;
        for segment in &self.segments {
            if moved == max {
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

    #[test]
    fn a_head_is_taken_whole_and_the_body_moves_by_reference() {
        let mut output = Output::default();
        output
            .bytes()
            .extend_from_slice(b"HTTP/1.1 200 OK\r\nA: b\r\n\r");
        let data: Arc<[u8]> = Arc::from(&b"\nbody"[..]);
        output.shared(data, 0, 5);
        let mut head = Vec::new();
        assert!(output.take_head(&mut head));
        assert_eq!(head, b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n");
        let mut into = Output::default();
        assert_eq!(output.move_front_into(&mut into, 3), 3);
        assert_eq!(output.move_front_into(&mut into, 100), 1);
        assert!(output.is_empty());
        let sent: Vec<u8> = into
            .memory_slices()
            .iter()
            .flat_map(|slice| slice.to_vec())
            .collect();
        assert_eq!(sent, b"body");

        let mut partial = Output::default();
        partial.bytes().extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        assert!(!partial.take_head(&mut head));
        assert_eq!(partial.pending(), 17);
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
