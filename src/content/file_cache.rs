//! Flash's file data cache (§5.4): the bytes of small files, in memory, LRU by bytes.
//!
//! Owns: file contents keyed by `FileKey` (device, inode, size, nanosecond mtime), so a file
//! changed on disk has a new key; changes that keep size and mtime are dropped through
//! `Caches::on_change` (inotify). Large files are not copied here: they go by `sendfile` from
//! the open descriptor, with residency tested first (see `engine`), which is where this departs
//! from Flash's mapped chunks — reading a mapping of a file that someone truncates raises SIGBUS.
//! Must not touch: the disk.

use std::sync::Arc;

use super::file::FileKey;
use super::lru::Lru;

#[derive(Debug)]
pub struct FileCache {
    entries: Option<Lru<FileKey, Arc<[u8]>>>,
    pub hits: u64,
    pub misses: u64,
}

impl FileCache {
    #[must_use]
    pub fn new(enabled: bool, budget_bytes: u64) -> FileCache {
        FileCache {
            entries: enabled.then(|| Lru::new(budget_bytes)),
            hits: 0,
            misses: 0,
        }
    }

    #[must_use]
    pub fn enabled(&self) -> bool {
        self.entries.is_some()
    }

    pub fn get(&mut self, key: &FileKey) -> Option<Arc<[u8]>> {
        let found = self.entries.as_mut()?.get(key).cloned();
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        found
    }

    pub fn insert(&mut self, key: FileKey, data: Arc<[u8]>) {
        if let Some(entries) = self.entries.as_mut() {
            let weight = data.len() as u64;
            entries.insert(key, data, weight);
        }
    }

    pub fn forget(&mut self, key: &FileKey) {
        if let Some(entries) = self.entries.as_mut() {
            entries.remove(key);
        }
    }

    pub fn clear(&mut self) {
        if let Some(entries) = self.entries.as_mut() {
            entries.clear();
        }
    }

    /// Bytes held.
    #[must_use]
    pub fn weight(&self) -> u64 {
        self.entries.as_ref().map_or(0, Lru::weight)
    }
}
