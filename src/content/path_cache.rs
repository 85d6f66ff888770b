//! Flash's pathname translation cache (§5.2): request path → what it resolved to, including
//! negative answers, so a hot path costs no `open`/`stat` at all.
//!
//! Owns: the entries and their age, in shards (one for an event loop's own cache, several when
//! threads share it). Entries are dropped by `Caches` when inotify reports a change in their
//! directory, and treated as misses once older than `revalidate_after` (the bound for changes
//! inotify cannot see). One lookup at a time checks a stale entry; the others are served from
//! it while the check is out (for at most another `revalidate_after`), so a hot path costs one
//! check per period rather than one per request that arrives during the check.
//!
//! Every cached file is an open descriptor (and one more per precompressed sibling), so the
//! translations to files are kept apart from the others and bounded by the descriptors they
//! hold, a share of `RLIMIT_NOFILE` (`descriptors.rs`), as well as by entries. Beyond either
//! bound the least recently used go;
//! `relieve` drops the older half of what holds descriptors when opening a file failed with
//! `EMFILE`/`ENFILE` anyway (descriptors held elsewhere, or by responses still sending
//! evicted files).
//! Must not touch: the disk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::file::{Resolution, Resolved};
use super::lru::Lru;
use super::sharded::Sharded;

#[derive(Debug)]
struct Shard {
    /// Translations to open files, weighed by the descriptors each holds (the file and its
    /// precompressed siblings), so the Lru's budget is the descriptor budget.
    files: Lru<String, Arc<Resolved>>,
    /// Everything else (negative answers, redirects to a slash, 403s), one each: they hold no
    /// descriptor, so a flood of files does not push them out, nor they the files.
    others: Lru<String, Arc<Resolved>>,
    /// Stale paths one lookup is checking, and since when.
    checking: Vec<(String, Instant)>,
    hits: u64,
    misses: u64,
}

/// Checks out at once per shard that others wait for; past it a stale lookup checks for
/// itself.
const MAX_CHECKING: usize = 64;

impl Shard {
    fn get(&mut self, path: &str) -> Option<&Arc<Resolved>> {
        if self.files.contains(path) {
            self.files.get(path)
        } else {
            self.others.get(path)
        }
    }

    fn remove(&mut self, path: &str) -> Option<Arc<Resolved>> {
        self.settle_check(path);
        self.files.remove(path).or_else(|| self.others.remove(path))
    }

    /// Whether the lookup that found `path` stale at `now` is the one to check it: no other
    /// check of it is out, or the one out is older than `window` (its answer never came).
    fn claim_check(&mut self, path: &str, now: Instant, window: Duration) -> bool {
        self.checking
            .retain(|(_, since)| now.saturating_duration_since(*since) < window);
        if self.checking.iter().any(|(checked, _)| checked == path) {
            return false;
        }
        if self.checking.len() < MAX_CHECKING {
            self.checking.push((path.to_owned(), now));
        }
        true
    }

    /// The check of `path`, if one was out, is over (its answer was remembered, or the entry
    /// went).
    fn settle_check(&mut self, path: &str) {
        if !self.checking.is_empty() {
            self.checking.retain(|(checked, _)| checked != path);
        }
    }

    /// Drop least recently used files until they hold at most `target` descriptors.
    fn shed_to(&mut self, target: u64) -> Vec<Arc<Resolved>> {
        let mut shed = Vec::new();
        while self.files.weight() > target {
            let Some((_, resolved)) = self.files.pop_oldest() else {
                break;
            };
            shed.push(resolved);
        }
        shed
    }
}

/// Descriptors a translation holds open: the file (each variant) and each precompressed sibling.
#[must_use]
pub fn descriptors_held(resolved: &Resolved) -> u64 {
    match &resolved.resolution {
        Resolution::File(file) => 1 + file.encoded.len() as u64,
        Resolution::Variants(set) => set
            .variants
            .iter()
            .map(|file| 1 + file.encoded.len() as u64)
            .sum(),
        _ => 0,
    }
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
    /// At most `capacity` translations to files, holding at most `descriptors` open files, and
    /// `capacity` other translations, all split evenly over `shards`.
    #[must_use]
    pub fn new(
        enabled: bool,
        capacity: u64,
        descriptors: u64,
        revalidate_after: Duration,
        shards: usize,
    ) -> PathCache {
        PathCache {
            shards: enabled.then(|| {
                let shards_rounded = shards.max(1).next_power_of_two() as u64;
                let per_shard = (capacity / shards_rounded).max(1);
                let descriptors_per_shard = (descriptors / shards_rounded).max(1);
                Sharded::new(shards, || Shard {
                    // Each file weighs at least one: no more files than entries either.
                    files: Lru::new(descriptors_per_shard.min(per_shard)),
                    others: Lru::new(per_shard),
                    checking: Vec::new(),
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
        let found = match shard.get(path) {
            Some(resolved)
                if now.saturating_duration_since(resolved.at) < self.revalidate_after =>
            {
                Lookup::Fresh(resolved.clone())
            }
            Some(resolved) => Lookup::Stale(resolved.clone()),
            None => Lookup::Missing,
        };
        let found = match found {
            Lookup::Stale(resolved) if !shard.claim_check(path, now, self.revalidate_after) => {
                Lookup::Fresh(resolved)
            }
            other => other,
        };
        if matches!(found, Lookup::Fresh(_)) {
            shard.hits += 1;
        } else {
            shard.misses += 1;
        }
        found
    }

    /// Remember a translation. Listings and failures are not remembered.
    pub fn insert(&self, path: String, resolved: Arc<Resolved>) {
        let Some(shards) = self.shards.as_ref() else {
            return;
        };
        if matches!(
            resolved.resolution,
            Resolution::Listing(_) | Resolution::Failed | Resolution::Exhausted
        ) {
            return;
        }
        let held = descriptors_held(&resolved);
        // What leaves the cache is dropped after the lock is released (closing its files).
        let (replaced, evicted) = {
            let mut shard = shards.lock(path.as_str());
            let replaced = shard.remove(&path);
            let evicted = if held == 0 {
                shard.others.insert(path, resolved, 1)
            } else {
                // Beyond the budget (more siblings than descriptors): handed back, not kept.
                shard.files.insert(path, resolved, held)
            };
            (replaced, evicted)
        };
        drop((replaced, evicted));
    }

    pub fn invalidate(&self, path: &str) {
        if let Some(shards) = self.shards.as_ref() {
            let removed = shards.lock(path).remove(path);
            drop(removed);
        }
    }

    /// Opening a file failed for want of descriptors: close the older half of the cached
    /// files (those still being sent close when their responses end). Returns how many
    /// descriptors the cache let go of.
    pub fn relieve(&self) -> u64 {
        let Some(shards) = self.shards.as_ref() else {
            return 0;
        };
        let mut released = 0;
        shards.for_each(|shard| {
            let before = shard.files.weight();
            let shed = shard.shed_to(before / 2);
            released += before - shard.files.weight();
            drop(shed);
        });
        released
    }

    pub fn clear(&self) {
        if let Some(shards) = self.shards.as_ref() {
            shards.for_each(|shard| {
                drop(shard.files.clear());
                drop(shard.others.clear());
            });
        }
    }

    /// Descriptors the cached translations hold open.
    #[must_use]
    pub fn descriptors(&self) -> u64 {
        self.shards
            .as_ref()
            .map_or(0, |shards| shards.sum(|shard| shard.files.weight()))
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.shards.as_ref().map_or(0, |shards| {
            shards.sum(|shard| (shard.files.len() + shard.others.len()) as u64) as usize
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

    /// A translation to an open file (this source file), with `siblings` more descriptors.
    fn open_file(siblings: usize) -> Arc<Resolved> {
        use crate::content::file::{FileKey, OpenFile, Representation, StaticFile};
        use ampd_http::coding::Coding;
        let open = || {
            let file = std::fs::File::open(file!()).unwrap();
            let stat = ampd_sys::file::fstat(std::os::fd::AsFd::as_fd(&file)).unwrap();
            OpenFile::new(file, FileKey::of(&stat))
        };
        Arc::new(Resolved {
            resolution: Resolution::File(Arc::new(StaticFile {
                identity: Representation::new(Coding::Identity, open()),
                encoded: (0..siblings)
                    .map(|_| Representation::new(Coding::Gzip, open()))
                    .collect(),
                content_type: "text/plain",
                directory: None,
                negotiated: None,
            })),
            watch: None,
            at: Instant::now(),
        })
    }

    #[test]
    fn cached_files_stay_within_the_descriptor_budget_least_recently_used_first() {
        let cache = PathCache::new(true, 10_000, 10, Duration::from_secs(60), 1);
        let now = Instant::now();
        for index in 0..100 {
            cache.insert(format!("/{index}"), open_file(0));
            // Negative answers hold no descriptor and do not count against the budget.
            cache.insert(format!("/missing/{index}"), not_found(now));
        }
        assert_eq!(cache.descriptors(), 10);
        assert_eq!(cache.len(), 10 + 100);
        assert!(matches!(cache.lookup("/99", now), Lookup::Fresh(_)));
        assert!(matches!(cache.lookup("/0", now), Lookup::Missing));
        // A file with two siblings counts three.
        cache.insert("/with-siblings".to_owned(), open_file(2));
        assert_eq!(cache.descriptors(), 10);
        // Replacing and invalidating keep the count honest (two older files made room for the
        // three, and stay gone).
        cache.insert("/with-siblings".to_owned(), open_file(0));
        assert_eq!(cache.descriptors(), 8);
        cache.invalidate("/with-siblings");
        assert_eq!(cache.descriptors(), 7);
        assert_eq!(cache.len(), 7 + 100);
        // An entry needing more than the whole budget is not kept.
        let tight = PathCache::new(true, 100, 2, Duration::from_secs(60), 1);
        tight.insert("/big".to_owned(), open_file(2));
        assert!(tight.is_empty());
        assert_eq!(tight.descriptors(), 0);
    }

    #[test]
    fn relieving_drops_the_older_half_of_the_cached_files() {
        let cache = PathCache::new(true, 10_000, 1_000, Duration::from_secs(60), 4);
        for index in 0..64 {
            cache.insert(format!("/{index}"), open_file(0));
        }
        assert_eq!(cache.descriptors(), 64);
        let released = cache.relieve();
        assert!(released >= 32, "released {released}");
        assert_eq!(cache.descriptors(), 64 - released);
        cache.clear();
        assert_eq!(cache.descriptors(), 0);
    }

    #[test]
    fn entries_turn_stale_after_revalidate_after_and_are_kept_for_the_check() {
        let cache = PathCache::new(true, 16, 16, Duration::from_secs(1), 1);
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
    fn one_lookup_checks_a_stale_entry_while_the_others_are_served_from_it() {
        let cache = PathCache::new(true, 16, 16, Duration::from_secs(1), 1);
        let at = Instant::now();
        cache.insert("/a".to_owned(), not_found(at));
        let later = at + Duration::from_secs(2);
        assert!(matches!(cache.lookup("/a", later), Lookup::Stale(_)));
        assert!(matches!(cache.lookup("/a", later), Lookup::Fresh(_)));
        assert!(matches!(cache.lookup("/a", later), Lookup::Fresh(_)));
        // The check's answer is remembered: fresh, and the next staleness is checked again.
        cache.insert("/a".to_owned(), not_found(later));
        let next = later + Duration::from_secs(2);
        assert!(matches!(cache.lookup("/a", next), Lookup::Stale(_)));
        assert!(matches!(cache.lookup("/a", next), Lookup::Fresh(_)));
        // A check whose answer never comes (not remembered) lets another lookup check once
        // `revalidate_after` has passed again.
        let abandoned = next + Duration::from_secs(1);
        assert!(matches!(cache.lookup("/a", abandoned), Lookup::Stale(_)));
        // An entry dropped while its check is out is a miss, and its next check is claimed
        // afresh.
        cache.invalidate("/a");
        assert!(matches!(cache.lookup("/a", abandoned), Lookup::Missing));
        cache.insert("/a".to_owned(), not_found(abandoned));
        let last = abandoned + Duration::from_secs(2);
        assert!(matches!(cache.lookup("/a", last), Lookup::Stale(_)));
    }

    #[test]
    fn a_disabled_cache_holds_nothing() {
        let cache = PathCache::new(false, 16, 16, Duration::from_secs(1), 1);
        cache.insert("/a".to_owned(), not_found(Instant::now()));
        assert!(matches!(
            cache.lookup("/a", Instant::now()),
            Lookup::Missing
        ));
    }
}
