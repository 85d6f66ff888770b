//! The three caches of one event loop, and how they learn that the disk changed.
//!
//! Owns: `Caches` (path, head, file) and the inotify registry that maps a watched directory to
//! the entries its changes invalidate. Freshness bound: a change made through the local
//! filesystem is seen by the next request that arrives after it (the loop reads the inotify
//! descriptor before it handles requests in the same wake-up); anything inotify cannot report
//! is seen within `revalidate_after` (default 1 s). See docs/architecture.md.
//! Must not touch: sockets; the disk beyond reading inotify events (never blocks).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ampd_sys::inotify::{self, Inotify};

use super::file::{FileKey, Resolution, Resolved};
use super::file_cache::FileCache;
use super::head_cache::HeadCache;
use super::path_cache::PathCache;
use crate::config::CacheOptions;

#[derive(Debug, PartialEq, Eq, Hash)]
enum Dependent {
    Path(String),
    File(FileKey),
}

#[derive(Debug)]
pub struct Caches {
    pub paths: PathCache,
    pub heads: HeadCache,
    pub files: FileCache,
    /// Shared with the helpers, which add watches before they look (see `resolve`).
    pub watcher: Option<Arc<Inotify>>,
    dependents: HashMap<i32, HashSet<Dependent>>,
    pub invalidations: u64,
    /// Reused to build `root id:path` keys without allocating per lookup.
    key: String,
}

/// The path-cache key of `path` under the document root `root` (a `DocRoot::id`): locations
/// with different roots or options never share a translation.
fn write_key(key: &mut String, root: u64, path: &str) {
    use std::fmt::Write;
    key.clear();
    let _ = write!(key, "{root}:");
    key.push_str(path);
}

impl Caches {
    /// The caches for one loop. Without inotify (limit reached, or not supported), entries are
    /// still bounded in age by `revalidate_after`.
    #[must_use]
    pub fn new(options: &CacheOptions) -> Caches {
        let any = options.path_cache || options.header_cache || options.file_cache;
        let watcher = if any {
            Inotify::new().ok().map(Arc::new)
        } else {
            None
        };
        Caches {
            paths: PathCache::new(
                options.path_cache,
                options.path_cache_entries,
                options.revalidate_after,
            ),
            heads: HeadCache::new(options.header_cache, options.header_cache_entries),
            files: FileCache::new(options.file_cache, options.file_cache_bytes),
            watcher,
            dependents: HashMap::new(),
            invalidations: 0,
            key: String::new(),
        }
    }

    /// The cached translation of `path` below root `root`, if fresh.
    pub fn lookup(
        &mut self,
        root: u64,
        path: &str,
        now: std::time::Instant,
    ) -> Option<Arc<Resolved>> {
        let mut key = std::mem::take(&mut self.key);
        write_key(&mut key, root, path);
        let found = self.paths.lookup(&key, now);
        self.key = key;
        found
    }

    /// Record a fresh translation of `path` below root `root`.
    pub fn remember(&mut self, root: u64, path: &str, resolved: &Arc<Resolved>) {
        let mut key = String::with_capacity(path.len() + 8);
        write_key(&mut key, root, path);
        let path = key.as_str();
        if matches!(
            resolved.resolution,
            Resolution::Listing(_) | Resolution::Failed
        ) {
            return;
        }
        // Unwatched entries live only until `revalidate_after`; caching them is still safe.
        if let Some(watch) = resolved.watch {
            self.dependents
                .entry(watch)
                .or_default()
                .insert(Dependent::Path(path.to_owned()));
        }
        self.paths.insert(path.to_owned(), resolved.clone());
    }

    /// Record file data loaded for a file that lives in the directory watched by `watch`.
    pub fn remember_data(&mut self, key: FileKey, data: Arc<[u8]>, watch: Option<i32>) {
        if !self.files.enabled() {
            return;
        }
        if let Some(watch) = watch {
            self.dependents
                .entry(watch)
                .or_default()
                .insert(Dependent::File(key));
        }
        self.files.insert(key, data);
    }

    /// Drain inotify and drop everything that depends on a directory that changed. Cheap when
    /// nothing changed (one `read` returning `EAGAIN`).
    pub fn on_change(&mut self) {
        let Some(watcher) = self.watcher.clone() else {
            return;
        };
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
                if let Some(dependents) = self.dependents.remove(&event.wd) {
                    self.invalidations += dependents.len() as u64;
                    for dependent in dependents {
                        match dependent {
                            Dependent::Path(path) => self.paths.invalidate(&path),
                            Dependent::File(key) => {
                                self.files.forget(&key);
                            }
                        }
                    }
                }
            }
        }
    }

    pub fn clear(&mut self) {
        self.paths.clear();
        self.heads.clear();
        self.files.clear();
        self.dependents.clear();
    }
}
