//! Flash's pathname translation cache (§5.2): request path → what it resolved to, including
//! negative answers, so a hot path costs no `open`/`stat` at all.
//!
//! Owns: the entries and their age, in shards (one for an event loop's own cache, several when
//! threads share it). Entries are dropped by `Caches` when inotify reports a change in their
//! directory, and treated as misses once older than `revalidate_after` (the bound for changes
//! inotify cannot see).
//! Must not touch: the disk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::file::{Resolution, Resolved};
use super::lru::Lru;
use super::sharded::Sharded;

#[derive(Debug)]
struct Shard {
    entries: Lru<String, Arc<Resolved>>,
    hits: u64,
    misses: u64,
}

/// What the path cache holds for a path.
#[derive(Debug)]
pub enum Lookup {
    Fresh(Arc<Resolved>),
    /// Older than `revalidate_after`: to be checked (`resolve::revalidate`) or redone.
    Stale(Arc<Resolved>),
    Missing,
}

#[derive(Debug)]
pub struct PathCache {
    shards: Option<Sharded<Shard>>,
    revalidate_after: Duration,
}

impl PathCache {
    /// At most `capacity` entries in all, split evenly over `shards`.
    #[must_use]
    pub fn new(
        enabled: bool,
        capacity: u64,
        revalidate_after: Duration,
        shards: usize,
    ) -> PathCache {
        PathCache {
            shards: enabled.then(|| {
                let per_shard = (capacity / shards.max(1).next_power_of_two() as u64).max(1);
                Sharded::new(shards, || Shard {
                    entries: Lru::new(per_shard),
                    hits: 0,
                    misses: 0,
                })
            }),
            revalidate_after,
        }
    }

    /// The cached translation of `path`: fresh, too old to trust without a check, or none.
    pub fn lookup(&self, path: &str, now: Instant) -> Lookup {
        let Some(shards) = self.shards.as_ref() else {
            return Lookup::Missing;
        };
        let mut shard = shards.lock(path);
        let found = match shard.entries.get(path) {
            Some(resolved)
                if now.saturating_duration_since(resolved.at) < self.revalidate_after =>
            {
                Lookup::Fresh(resolved.clone())
            }
            Some(resolved) => Lookup::Stale(resolved.clone()),
            None => Lookup::Missing,
        };
        if matches!(found, Lookup::Fresh(_)) {
            shard.hits += 1;
        } else {
            shard.misses += 1;
        }
        found
    }

    /// Remember a translation. Listings and internal failures are not remembered.
    pub fn insert(&self, path: String, resolved: Arc<Resolved>) {
        let Some(shards) = self.shards.as_ref() else {
            return;
        };
        if matches!(
            resolved.resolution,
            Resolution::Listing(_) | Resolution::Failed
        ) {
            return;
        }
        // Evicted entries are dropped after the lock is released (closing their files).
        let evicted = shards.lock(path.as_str()).entries.insert(path, resolved, 1);
        drop(evicted);
    }

    pub fn invalidate(&self, path: &str) {
        if let Some(shards) = self.shards.as_ref() {
            let removed = shards.lock(path).entries.remove(path);
            drop(removed);
        }
    }

    pub fn clear(&self) {
        if let Some(shards) = self.shards.as_ref() {
            shards.for_each(|shard| drop(shard.entries.clear()));
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.shards.as_ref().map_or(0, |shards| {
            shards.sum(|shard| shard.entries.len() as u64) as usize
        })
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::file::Resolution;

    fn not_found(at: Instant) -> Arc<Resolved> {
        Arc::new(Resolved {
            resolution: Resolution::NotFound,
            watch: None,
            at,
        })
    }

    #[test]
    fn entries_turn_stale_after_revalidate_after_and_are_kept_for_the_check() {
        let cache = PathCache::new(true, 16, Duration::from_secs(1), 1);
        let at = Instant::now();
        cache.insert("/a".to_owned(), not_found(at));
        assert!(matches!(cache.lookup("/a", at), Lookup::Fresh(_)));
        let later = at + Duration::from_secs(2);
        assert!(matches!(cache.lookup("/a", later), Lookup::Stale(_)));
        assert!(matches!(cache.lookup("/b", at), Lookup::Missing));
        // Only a fresh answer counts as a hit.
        assert_eq!(cache.hits_and_misses(), (1, 2));
        // A renewed translation is fresh again.
        cache.insert("/a".to_owned(), not_found(later));
        assert!(matches!(cache.lookup("/a", later), Lookup::Fresh(_)));
    }

    #[test]
    fn a_disabled_cache_holds_nothing() {
        let cache = PathCache::new(false, 16, Duration::from_secs(1), 1);
        cache.insert("/a".to_owned(), not_found(Instant::now()));
        assert!(matches!(
            cache.lookup("/a", Instant::now()),
            Lookup::Missing
        ));
    }
}
