//! The streams of one connection (RFC 9113 §5.1): the open ones, keyed by id, with their
//! flow-control windows both ways, and a bounded memory of the recently closed ones, so a
//! late frame is told apart: in flight after our RST_STREAM (ignored), after the client's own
//! END_STREAM or RST_STREAM (STREAM_CLOSED).
//!
//! Owns: per-stream state and window arithmetic. Must not touch: frames, events, what an
//! error means for the connection (`connection/closing.rs` decides).

use std::collections::VecDeque;

use super::connection::StreamId;

/// The client's half of a stream: whether it may still send DATA and trailers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvState {
    /// Open: the client may send body and trailers.
    Open,
    /// The client sent END_STREAM (half-closed remote).
    Ended,
}

/// Our half of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendState {
    /// Open: we may still send HEADERS and DATA.
    Open,
    /// We sent END_STREAM (half-closed local).
    Ended,
}

/// What happens to the body of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyUse {
    /// Handed to the server as `Event::Data`; credit returns by `release_body`.
    Delivered,
    /// The server answers the stream itself (`Event::Refused`): DATA is credited back at once
    /// and not reported.
    Discarded,
}

/// One open or half-closed stream.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    pub(crate) id: StreamId,
    pub(crate) recv: RecvState,
    pub(crate) send: SendState,
    pub(crate) body: BodyUse,
    /// Bytes the client may still send on the stream before we credit more (may go negative
    /// when a smaller SETTINGS_INITIAL_WINDOW_SIZE of ours takes effect, §6.9.2).
    pub(crate) recv_window: i64,
    /// Bytes released by the server and not yet credited with a WINDOW_UPDATE.
    pub(crate) recv_owed: u32,
    /// Bytes we may send (the client's window for the stream).
    pub(crate) send_window: i64,
    /// `content-length` of the request, checked against the DATA received (§8.1.1).
    pub(crate) content_length: Option<u64>,
    pub(crate) received: u64,
}

impl Stream {
    pub(crate) fn new(id: StreamId, recv_window: i64, send_window: i64) -> Stream {
        Stream {
            id,
            recv: RecvState::Open,
            send: SendState::Open,
            body: BodyUse::Delivered,
            recv_window,
            recv_owed: 0,
            send_window,
            content_length: None,
            received: 0,
        }
    }

    /// Both sides ended: the stream is closed (§5.1).
    pub(crate) fn is_done(&self) -> bool {
        self.recv == RecvState::Ended && self.send == SendState::Ended
    }
}

/// The open streams, at most `max_concurrent_streams` of them, in stream-id order (a client's
/// ids only grow, so a new stream goes at the end): found by binary search, which a server
/// framing a page's hundred responses does for every stream on every pass; a vector never
/// allocates once grown.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    open: Vec<Stream>,
}

impl Streams {
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    fn position(&self, id: StreamId) -> Result<usize, usize> {
        self.open.binary_search_by_key(&id, |stream| stream.id)
    }

    pub(crate) fn get(&self, id: StreamId) -> Option<&Stream> {
        self.position(id).ok().map(|at| &self.open[at])
    }

    pub(crate) fn get_mut(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.position(id).ok().map(|at| &mut self.open[at])
    }

    pub(crate) fn insert(&mut self, stream: Stream) {
        match self.position(stream.id) {
            Ok(at) => self.open[at] = stream,
            Err(at) => self.open.insert(at, stream),
        }
    }

    pub(crate) fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let at = self.position(id).ok()?;
        Some(self.open.remove(at))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Stream> {
        self.open.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.open.iter_mut()
    }
}

/// How a stream was closed, which decides what a late frame on it means (§5.1 "closed").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closure {
    /// Both sides sent END_STREAM: more DATA or HEADERS is a connection error STREAM_CLOSED.
    Ended,
    /// The client reset it: more DATA is a stream error STREAM_CLOSED, HEADERS a connection
    /// error.
    ResetByPeer,
    /// We reset it (or refused or ignored it): the client's frames may still be in flight and
    /// are ignored (their HPACK blocks still decoded, their DATA still counted).
    ResetByUs,
}

/// The last `capacity` streams closed, oldest first out. Older ids are still known to be
/// closed (they are below the highest id seen) but not how.
#[derive(Debug)]
pub(crate) struct RecentlyClosed {
    entries: VecDeque<(StreamId, Closure)>,
    capacity: usize,
}

impl RecentlyClosed {
    pub(crate) fn new(capacity: usize) -> RecentlyClosed {
        RecentlyClosed {
            entries: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    pub(crate) fn push(&mut self, id: StreamId, closure: Closure) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back((id, closure));
    }

    pub(crate) fn get(&self, id: StreamId) -> Option<Closure> {
        self.entries
            .iter()
            .rev()
            .find(|entry| entry.0 == id)
            .map(|entry| entry.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closed_set_forgets_the_oldest_beyond_its_capacity() {
        let mut closed = RecentlyClosed::new(2);
        closed.push(1, Closure::Ended);
        closed.push(3, Closure::ResetByPeer);
        closed.push(5, Closure::ResetByUs);
        assert_eq!(closed.get(1), None);
        assert_eq!(closed.get(3), Some(Closure::ResetByPeer));
        assert_eq!(closed.get(5), Some(Closure::ResetByUs));
    }

    #[test]
    fn streams_are_found_and_removed_by_id() {
        let mut streams = Streams::default();
        for id in [1, 3, 5] {
            streams.insert(Stream::new(id, 10, 20));
        }
        assert_eq!(streams.remove(3).map(|s| s.id), Some(3));
        assert!(streams.get(3).is_none());
        assert_eq!(streams.get(5).map(|s| s.send_window), Some(20));
        assert_eq!(streams.len(), 2);
    }
}
