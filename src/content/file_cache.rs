//! Flash's file data cache (§5.4): the bytes of small files, in memory, LRU by bytes.
//!
//! Owns: file contents keyed by `FileKey` (device, inode, size, nanosecond mtime), so a file
//! changed on disk has a new key; changes that keep size and mtime are dropped through
//! `Caches::on_change` (inotify). The byte budget is split evenly over the shards. Large files
//! are not copied here: they go by `sendfile` from the open descriptor, with residency tested
//! first (see `engine`), which is where this departs from Flash's mapped chunks — reading a
//! mapping of a file that someone truncates raises SIGBUS.
//! Must not touch: the disk.

use std::sync::Arc;

use super::file::FileKey;
use super::lru::Lru;
use super::sharded::Sharded;

#[derive(Debug)]
struct Shard {
    entries: Lru<FileKey, Arc<[u8]>>,
    hits: u64,
    misses: u64,
}

#[derive(Debug)]
pub struct FileCache {
    shards: Option<Sharded<Shard>>,
}

impl FileCache {
    /// At most `budget_bytes` in all, split evenly over `shards` (a file larger than one shard's
    /// share is not cached; it is sent from its descriptor).
    #[must_use]
    pub fn new(enabled: bool, budget_bytes: u64, shards: usize) -> FileCache {
        FileCache {
            shards: enabled.then(|| {
                let per_shard = budget_bytes / shards.max(1).next_power_of_two() as u64;
                Sharded::new(shards, || Shard {
                    entries: Lru::new(per_shard),
                    hits: 0,
                    misses: 0,
                })
            }),
        }
    }

    #[must_use]
    pub fn enabled(&self) -> bool {
        self.shards.is_some()
    }

    pub fn get(&self, key: &FileKey) -> Option<Arc<[u8]>> {
        let mut shard = self.shards.as_ref()?.lock(key);
        let found = shard.entries.get(key).cloned();
        if found.is_some() {
            shard.hits += 1;
        } else {
            shard.misses += 1;
        }
        found
    }

    pub fn insert(&self, key: FileKey, data: Arc<[u8]>) {
        if let Some(shards) = self.shards.as_ref() {
            let weight = data.len() as u64;
            let evicted = shards.lock(&key).entries.insert(key, data, weight);
            drop(evicted);
        }
    }

    pub fn forget(&self, key: &FileKey) {
        if let Some(shards) = self.shards.as_ref() {
            let removed = shards.lock(key).entries.remove(key);
            drop(removed);
        }
    }

    pub fn clear(&self) {
        if let Some(shards) = self.shards.as_ref() {
            shards.for_each(|shard| drop(shard.entries.clear()));
        }
    }

    /// Bytes held.
    #[must_use]
    pub fn weight(&self) -> u64 {
        self.shards
            .as_ref()
            .map_or(0, |shards| shards.sum(|shard| shard.entries.weight()))
    }

    /// Lookups answered from the cache, and not.
    #[must_use]
    pub fn hits_and_misses(&self) -> (u64, u64) {
        self.shards.as_ref().map_or((0, 0), |shards| {
            (
                shards.sum(|shard| shard.hits),
                shards.sum(|shard| shard.misses),
            )
        })
    }
}
