//! What a static response is written into and under: the `Sink` a response goes to (a head
//! buffer, then body segments), whether the deciding thread may block on disk (`DiskAccess`),
//! and the per-response facts the engine and connection supply (`ResponseContext`).
//!
//! Owns: that vocabulary, shared by `serve` (files), `autoindex` (listings) and the connection.
//! Must not touch: the caches, jobs, the disk (it names `OpenFile` only as a body segment).

use std::sync::Arc;

use super::file::OpenFile;
use crate::response::HeadContext;

/// Where the response goes: a head buffer and body segments, in order.
pub trait Sink {
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
