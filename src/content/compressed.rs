//! The compressed cache: static files compressed on the fly, kept so that a file is compressed
//! once per coding and every later response costs what a precompressed `.gz` sibling costs
//! (pre-built head, shared bytes, `Content-Length`).
//!
//! Owns: compressed bodies keyed by the file's `FileKey` (device, inode, size, nanosecond
//! mtime: a file changed on disk has a new key) and the coding, with the level they were made
//! at (a location with another level replaces the entry); LRU by bytes, the budget split evenly
//! over the shards; `forget` for the changes that keep size and mtime (`Caches::on_change`,
//! inotify). And the compression itself (`compress`), which a job runs off the event loop.
//! Must not touch: the disk, the clock; which responses are compressed
//! (`response::compress::policy`).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::file::FileKey;
use super::lru::Lru;
use super::sharded::Sharded;
use crate::response::compress::Encoding;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    file: FileKey,
    encoding: Encoding,
}

#[derive(Debug)]
struct Entry {
    level: u32,
    data: Arc<[u8]>,
}

#[derive(Debug)]
pub struct CompressedCache {
    /// `None`: `compressed_size = 0`, nothing kept.
    shards: Option<Sharded<Lru<Key, Entry>>>,
    max_file: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// A compression done for one response (`Job::Compress`'s answer): the body, or `None` when
/// the file could not be read or compressed (the response then goes out plain).
#[derive(Debug, Clone)]
pub struct Compressed {
    pub file: FileKey,
    pub encoding: Encoding,
    pub level: u32,
    pub data: Option<Arc<[u8]>>,
}

impl CompressedCache {
    /// At most `budget_bytes` in all, split evenly over `shards` (a body larger than one
    /// shard's share is not kept); files larger than `max_file` are not compressed.
    #[must_use]
    pub fn new(budget_bytes: u64, max_file: u64, shards: usize) -> CompressedCache {
        CompressedCache {
            shards: (budget_bytes > 0).then(|| {
                let per_shard = budget_bytes / shards.max(1).next_power_of_two() as u64;
                Sharded::new(shards, || Lru::new(per_shard))
            }),
            max_file,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether a file of `size` bytes is compressed on the fly at all.
    #[must_use]
    pub fn takes(&self, size: u64) -> bool {
        size <= self.max_file
    }

    /// The body of `file` compressed with `encoding` at `level`, if kept. Counts a hit or a
    /// miss (a miss is a compression to come), also when nothing is kept.
    pub fn get(&self, file: &FileKey, encoding: Encoding, level: u32) -> Option<Arc<[u8]>> {
        let key = Key {
            file: *file,
            encoding,
        };
        let found = self.shards.as_ref().and_then(|shards| {
            let mut shard = shards.lock(&key);
            shard
                .get(&key)
                .filter(|entry| entry.level == level)
                .map(|entry| entry.data.clone())
        });
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    pub fn insert(&self, file: FileKey, encoding: Encoding, level: u32, data: Arc<[u8]>) {
        if let Some(shards) = self.shards.as_ref() {
            let key = Key { file, encoding };
            let weight = data.len() as u64;
            let evicted = shards.lock(&key).insert(key, Entry { level, data }, weight);
            drop(evicted);
        }
    }

    /// Drops every coding of `file`.
    pub fn forget(&self, file: &FileKey) {
        if let Some(shards) = self.shards.as_ref() {
            for encoding in Encoding::ALL {
                let key = Key {
                    file: *file,
                    encoding,
                };
                let removed = shards.lock(&key).remove(&key);
                drop(removed);
            }
        }
    }

    pub fn clear(&self) {
        if let Some(shards) = self.shards.as_ref() {
            shards.for_each(|shard| drop(shard.clear()));
        }
    }

    /// Bytes held.
    #[must_use]
    pub fn weight(&self) -> u64 {
        self.shards
            .as_ref()
            .map_or(0, |shards| shards.sum(Lru::weight))
    }

    /// Lookups answered from the cache, and not.
    #[must_use]
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

/// `plain` compressed whole with `encoding` at `level`. Milliseconds per 100 KiB: work for a
/// helper, or for a thread that may block (`Job::Compress`).
///
/// # Errors
/// The codec failed (zstd could not allocate its context).
pub fn compress(plain: &[u8], encoding: Encoding, level: u32) -> io::Result<Arc<[u8]>> {
    let mut encoder = encoding.encoder(level)?;
    let mut out = Vec::with_capacity(plain.len() / 4 + 64);
    encoder.feed(plain, &mut out)?;
    encoder.finish(&mut out)?;
    Ok(Arc::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64) -> FileKey {
        FileKey {
            dev: 1,
            ino,
            size: 100,
            mtime_secs: 1,
            mtime_nanos: 0,
        }
    }

    #[test]
    fn kept_per_file_coding_and_level_and_forgotten_per_file() {
        let cache = CompressedCache::new(1 << 20, 1 << 20, 1);
        let body = compress(&[b'a'; 1000], Encoding::Gzip, 5).unwrap();
        assert!(body.len() < 100);
        cache.insert(key(1), Encoding::Gzip, 5, body.clone());
        cache.insert(key(1), Encoding::Zstd, 3, body.clone());
        assert!(cache.get(&key(1), Encoding::Gzip, 5).is_some());
        assert!(
            cache.get(&key(1), Encoding::Gzip, 9).is_none(),
            "another level"
        );
        assert!(
            cache.get(&key(2), Encoding::Gzip, 5).is_none(),
            "another file"
        );
        assert_eq!(cache.hits_and_misses(), (1, 2));
        assert_eq!(cache.weight(), 2 * body.len() as u64);
        cache.forget(&key(1));
        assert!(cache.get(&key(1), Encoding::Zstd, 3).is_none());
        assert_eq!(cache.weight(), 0);
    }

    #[test]
    fn a_zero_budget_keeps_nothing_but_still_counts() {
        let cache = CompressedCache::new(0, 10, 4);
        cache.insert(key(1), Encoding::Brotli, 4, Arc::from(&b"x"[..]));
        assert!(cache.get(&key(1), Encoding::Brotli, 4).is_none());
        assert_eq!(cache.hits_and_misses(), (0, 1));
        assert!(cache.takes(10) && !cache.takes(11));
    }
}
