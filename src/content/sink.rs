//! What a static response is written into and under: the `Sink` a response goes to (a head
//! buffer, then body segments), whether the deciding thread may block on disk (`DiskAccess`),
//! and the per-response facts the engine and connection supply (`ResponseContext`).
//!
//! Owns: that vocabulary, shared by `serve` (files), `autoindex` (listings) and the connection.
//! Must not touch: the caches, jobs, the disk (it names `OpenFile` only as a body segment).

use std::sync::Arc;

use super::file::OpenFile;
use crate::response::{Head, HeadContext, Http1Framing};

/// Where the response goes: a head, then body bytes and segments, in order.
pub trait Sink {
    /// Start the response head: fill what this returns, then `end_head`.
    fn begin_head(&mut self, status: u16) -> &mut Head;
    /// Queue the head begun, serialised per the connection's protocol (`framing` is what an
    /// HTTP/1 connection adds to it).
    fn end_head(&mut self, framing: Http1Framing);
    /// A buffer for an HTTP/1 head already serialised (the header cache's), `None` where
    /// heads go as data (HTTP/2); `end_http1_head` ends it.
    fn http1_head(&mut self) -> Option<&mut Vec<u8>>;
    fn end_http1_head(&mut self);
    /// Bytes appended here are sent before any body segment pushed after them.
    fn bytes(&mut self) -> &mut Vec<u8>;
    fn shared(&mut self, data: Arc<[u8]>, start: usize, end: usize);
    fn file(&mut self, file: Arc<OpenFile>, start: u64, end: u64);
}

/// Whether the event loop may block on disk (`sped`) or must hand it to helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskAccess {
    Inline,
    Helpers,
}

/// Per-response facts that the engine and connection supply.
#[derive(Debug)]
pub struct ResponseContext<'a> {
    /// What every head says (`crate::response`).
    pub head: HeadContext<'a>,
    pub disk: DiskAccess,
    /// `caches.residency_test`: under `DiskAccess::Helpers`, ask the page cache before reading.
    pub residency_test: bool,
    pub sendfile_threshold: u64,
    pub max_ranges: usize,
}
