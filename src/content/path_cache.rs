//! Flash's pathname translation cache (§5.2): request path → what it resolved to, including
//! negative answers, so a hot path costs no `open`/`stat` at all.
//!
//! Owns: the entries and their age. Entries are dropped by `Caches` when inotify reports a
//! change in their directory, and treated as misses once older than `revalidate_after` (the
//! bound for changes inotify cannot see).
//! Must not touch: the disk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::file::{Resolution, Resolved};
use super::lru::Lru;

#[derive(Debug)]
pub struct PathCache {
    entries: Option<Lru<String, Arc<Resolved>>>,
    revalidate_after: Duration,
    pub hits: u64,
    pub misses: u64,
}

impl PathCache {
    #[must_use]
    pub fn new(enabled: bool, capacity: u64, revalidate_after: Duration) -> PathCache {
        PathCache {
            entries: enabled.then(|| Lru::new(capacity)),
            revalidate_after,
            hits: 0,
            misses: 0,
        }
    }

    /// The cached translation of `path`, unless absent or too old to trust.
    pub fn lookup(&mut self, path: &str, now: Instant) -> Option<Arc<Resolved>> {
        let entries = self.entries.as_mut()?;
        let fresh = entries
            .get(path)
            .filter(|resolved| now.saturating_duration_since(resolved.at) < self.revalidate_after)
            .cloned();
        if fresh.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        fresh
    }

    /// Remember a translation. Listings and internal failures are not remembered.
    pub fn insert(&mut self, path: String, resolved: Arc<Resolved>) {
        let Some(entries) = self.entries.as_mut() else {
            return;
        };
        if matches!(
            resolved.resolution,
            Resolution::Listing(_) | Resolution::Failed
        ) {
            return;
        }
        entries.insert(path, resolved, 1);
    }

    pub fn invalidate(&mut self, path: &str) {
        if let Some(entries) = self.entries.as_mut() {
            entries.remove(path);
        }
    }

    pub fn clear(&mut self) {
        if let Some(entries) = self.entries.as_mut() {
            entries.clear();
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.as_ref().map_or(0, Lru::len)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
