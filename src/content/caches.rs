//! The three caches, and how they learn that the disk changed. One `Caches` belongs to each
//! event loop (or `mp` process), or is shared by all the threads of `mt` and `tpc`: every method
//! takes `&self`, and the caches are split into locked shards (`sharded.rs`) — one shard for a
//! loop's own caches, several when threads share them.
//!
//! Owns: `Caches` (path, head, file, and the compressed bodies of static files), the inotify registry that maps a watched directory to
//! the entries its changes invalidate, and the process's list of path caches, which any of
//! them that runs out of descriptors relieves all at once (`relieve`). Freshness bound: a change made through the local
//! filesystem is seen by the next request that arrives after it (an event loop reads the inotify
//! descriptor before it handles requests in the same wake-up; a blocking engine calls
//! `on_change` after it reads a request and before it looks anything up); anything inotify
//! cannot report is seen within `revalidate_after` (default 1 s). See docs/architecture.md.
//! Must not touch: sockets; the disk beyond reading inotify events (never blocks).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Instant;

use ampd_sys::inotify::{self, Inotify};

use super::budget::CacheBudget;
use super::compressed::CompressedCache;
use super::file::{FileKey, Resolution, Resolved};
use super::file_cache::FileCache;
use super::head_cache::HeadCache;
use super::path_cache::{Lookup, PathCache};
use crate::config::{CacheOptions, Level};
use crate::log::error::Throttle;
use crate::log::stats::LoopStats;
use crate::response::compress::Encoding;

#[derive(Debug, PartialEq, Eq, Hash)]
enum Dependent {
    Path(String),
    File(FileKey),
}

#[derive(Debug)]
pub struct Caches {
    /// Shared with `PATH_CACHES`, so that any loop out of descriptors can close files cached
    /// by the others.
    pub paths: Arc<PathCache>,
    pub heads: HeadCache,
    pub files: FileCache,
    pub compressed: CompressedCache,
    /// Shared with the helpers, which add watches before they look (see `resolve`).
    pub watcher: Option<Arc<Inotify>>,
    dependents: Mutex<HashMap<i32, HashSet<Dependent>>>,
    /// Held while inotify is read and what it said is applied: a thread that finds nothing to
    /// read must not look up an entry that another thread has read the change for but not yet
    /// dropped, so reading and applying are one step.
    reading_changes: Mutex<()>,
    invalidations: AtomicU64,
}

/// Every path cache of this process: few (one per loop, ring or shared set, plus those of
/// earlier configurations until dropped), and read only when descriptors run out.
static PATH_CACHES: Mutex<Vec<Weak<PathCache>>> = Mutex::new(Vec::new());

thread_local! {
    /// Reused to build `root id:path` keys without allocating per lookup (one per thread,
    /// since threads of `mt` and `tpc` share one `Caches`).
    static KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The path-cache key of `path` under the document root `root` (a `DocRoot::id`): locations
/// with different roots or options never share a translation.
fn write_key(key: &mut String, root: u64, path: &str) {
    key.clear();
    // Hex digits by hand: `write!` went through `fmt` (2.5 % of a cached response's
    // instructions, callgrind).
    let digits = (u64::BITS - root.leading_zeros()).div_ceil(4).max(1);
    for shift in (0..digits).rev() {
        let digit = ((root >> (shift * 4)) & 0xf) as u8;
        key.push(char::from(if digit < 10 {
            b'0' + digit
        } else {
            b'a' + digit - 10
        }));
    }
    key.push(':');
    key.push_str(path);
}

impl Caches {
    /// The caches for one loop or process (`shards` = 1), or for threads that share them (more
    /// shards, fewer collisions on a lock), within `budget` (files held open, file-cache
    /// bytes). Without inotify (limit reached, or not supported), entries are still bounded in
    /// age by `revalidate_after`.
    #[must_use]
    pub fn new(options: &CacheOptions, shards: usize, budget: &CacheBudget) -> Caches {
        let any = options.path_cache
            || options.header_cache
            || options.file_cache
            || options.compressed_size > 0;
        let watcher = if any {
            Inotify::new().ok().map(Arc::new)
        } else {
            None
        };
        let paths = Arc::new(PathCache::new(
            options.path_cache,
            options.path_cache_entries,
            budget.descriptors,
            options.revalidate_after,
            shards,
        ));
        let mut registry = PATH_CACHES.lock().unwrap_or_else(PoisonError::into_inner);
        registry.retain(|cache| cache.strong_count() > 0);
        registry.push(Arc::downgrade(&paths));
        drop(registry);
        Caches {
            paths,
            heads: HeadCache::new(options.header_cache, options.header_cache_entries, shards),
            files: FileCache::new(options.file_cache, budget.file_cache.bytes(), shards),
            compressed: CompressedCache::new(
                options.compressed_size,
                options.compressed_max_file,
                shards,
            ),
            watcher,
            dependents: Mutex::new(HashMap::new()),
            reading_changes: Mutex::new(()),
            invalidations: AtomicU64::new(0),
        }
    }

    /// The cached translation of `path` below root `root`.
    pub fn lookup(&self, root: u64, path: &str, now: Instant) -> Lookup {
        KEY.with(|key| match key.try_borrow_mut() {
            Ok(mut key) => {
                write_key(&mut key, root, path);
                self.paths.lookup(&key, now)
            }
            // Not reachable (no lookup calls another), but never worth a panic.
            Err(_) => {
                let mut key = String::new();
                write_key(&mut key, root, path);
                self.paths.lookup(&key, now)
            }
        })
    }

    /// Record a fresh translation of `path` below root `root`.
    pub fn remember(&self, root: u64, path: &str, resolved: &Arc<Resolved>) {
        let mut key = String::with_capacity(path.len() + 8);
        write_key(&mut key, root, path);
        let path = key.as_str();
        if matches!(
            resolved.resolution,
            Resolution::Listing(_) | Resolution::Failed | Resolution::Exhausted
        ) {
            // Not kept; a stale translation it replaces goes, so no lookup is served from it
            // while another check would be out.
            self.paths.invalidate(path);
            return;
        }
        // Unwatched entries live only until `revalidate_after`; caching them is still safe.
        if let Some(watch) = resolved.watch {
            self.dependents()
                .entry(watch)
                .or_default()
                .insert(Dependent::Path(path.to_owned()));
        }
        self.paths.insert(path.to_owned(), resolved.clone());
    }

    /// Record file data loaded for a file that lives in the directory watched by `watch`.
    pub fn remember_data(&self, key: FileKey, data: Arc<[u8]>, watch: Option<i32>) {
        if !self.files.enabled() {
            return;
        }
        if let Some(watch) = watch {
            self.dependents()
                .entry(watch)
                .or_default()
                .insert(Dependent::File(key));
        }
        self.files.insert(key, data);
    }

    /// Record `data`, the file `key` compressed with `encoding` at `level`; the file lives in
    /// the directory watched by `watch`.
    pub fn remember_compressed(
        &self,
        key: FileKey,
        encoding: Encoding,
        level: u32,
        data: Arc<[u8]>,
        watch: Option<i32>,
    ) {
        if let Some(watch) = watch {
            self.dependents()
                .entry(watch)
                .or_default()
                .insert(Dependent::File(key));
        }
        self.compressed.insert(key, encoding, level, data);
    }

    /// Drain inotify and drop everything that depends on a directory that changed. Cheap when
    /// nothing changed (one `read` returning `EAGAIN`).
    pub fn on_change(&self) {
        let Some(watcher) = self.watcher.as_ref() else {
            return;
        };
        let _reading = self
            .reading_changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut buffer = [0u8; 4096];
        loop {
            let events = match watcher.read_events(&mut buffer) {
                Ok(events) if !events.is_empty() => events,
                _ => return,
            };
            for event in events {
                if event.mask & inotify::IN_Q_OVERFLOW != 0 {
                    self.clear();
                    continue;
                }
                let removed = self.dependents().remove(&event.wd);
                if let Some(dependents) = removed {
                    self.invalidations
                        .fetch_add(dependents.len() as u64, Ordering::Relaxed);
                    for dependent in dependents {
                        match dependent {
                            Dependent::Path(path) => self.paths.invalidate(&path),
                            Dependent::File(key) => {
                                self.files.forget(&key);
                                self.compressed.forget(&key);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The process ran out of descriptors (`EMFILE`/`ENFILE` from `open` or `accept`): close
    /// the older half of the files cached by every set of caches in the process (the limit is
    /// the process's, and another loop's cache may hold what this one lacks), and say so in
    /// the error log (at most once per interval, with the count of the times not reported).
    /// Returns the descriptors released.
    pub fn relieve(&self, what: &str) -> u64 {
        static EXHAUSTED: Throttle = Throttle::new();
        let others: Vec<Arc<PathCache>> = PATH_CACHES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut released = self.paths.relieve();
        for cache in others
            .iter()
            .filter(|cache| !Arc::ptr_eq(cache, &self.paths))
        {
            released += cache.relieve();
        }
        EXHAUSTED.log(
            Level::Warn,
            format_args!(
                "{what}: out of file descriptors (RLIMIT_NOFILE); closed {released} cached files"
            ),
        );
        released
    }

    pub fn clear(&self) {
        self.paths.clear();
        self.heads.clear();
        self.files.clear();
        self.compressed.clear();
        self.dependents().clear();
    }

    /// Copy the caches' counts and sizes to a scoreboard slot (in `log::stats::CACHES` order);
    /// their owner does it a few times a second.
    pub fn publish(&self, stats: &LoopStats) {
        let (hits, misses) = self.paths.hits_and_misses();
        stats.publish_cache(0, hits, misses, self.paths.len() as u64);
        let (hits, misses) = self.heads.hits_and_misses();
        stats.publish_cache(1, hits, misses, self.heads.len() as u64);
        let (hits, misses) = self.files.hits_and_misses();
        stats.publish_cache(2, hits, misses, self.files.weight());
        let (hits, misses) = self.compressed.hits_and_misses();
        stats.publish_cache(3, hits, misses, self.compressed.weight());
    }

    /// Entries dropped because inotify reported a change.
    #[must_use]
    pub fn invalidations(&self) -> u64 {
        self.invalidations.load(Ordering::Relaxed)
    }

    fn dependents(&self) -> std::sync::MutexGuard<'_, HashMap<i32, HashSet<Dependent>>> {
        self.dependents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::write_key;

    #[test]
    fn a_key_names_its_root_in_hex_before_the_path() {
        let mut key = String::from("left over");
        for (root, path, expected) in [
            (0, "/a", "0:/a"),
            (1, "/a", "1:/a"),
            (16, "/a", "10:/a"),
            (255, "/b:c", "ff:/b:c"),
            (u64::MAX, "/", "ffffffffffffffff:/"),
        ] {
            write_key(&mut key, root, path);
            assert_eq!(key, expected);
        }
    }
}
