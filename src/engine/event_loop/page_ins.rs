//! Which files the loops' helpers are paging in right now.
//!
//! Why: the residency test (`cachestat`, `serve::range_resident`) counts a page as cached from
//! the moment its read is *started*, so a second connection asking for a file that a helper is
//! still reading in is told "resident", and the loop's `sendfile` then sleeps until the read
//! completes, stalling every connection of the loop. On the FUSE latency device of
//! bench/disk_bound.sh the `amped` loop thread was found asleep in `folio_wait_bit_common` in
//! 69% of samples (docs/research/architectures.md). A range of a file listed here goes to a helper as
//! well; its read then waits for the one in flight, on the helper, not on the loop.
//!
//! Owns: a count of page-ins in flight per file, shared by the loops of one server (`reactor`'s
//! loops have their own caches and descriptors, but a file's identity is the same in all).
//! Nothing in flight, the usual state of a cached working set, costs one atomic load per test.
//! Must not touch: connections or helpers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::content::file::FileKey;
use crate::sync::lock;

#[derive(Debug, Default)]
pub struct PagesInFlight {
    /// Page-ins in flight in all; zero lets `reading` skip the lock.
    total: AtomicUsize,
    counts: Mutex<HashMap<FileKey, u32>>,
}

impl PagesInFlight {
    pub fn started(&self, key: FileKey) {
        let mut counts = lock(&self.counts);
        *counts.entry(key).or_insert(0) += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    pub fn finished(&self, key: FileKey) {
        let mut counts = lock(&self.counts);
        if let Some(count) = counts.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&key);
            }
            self.total.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether a helper is paging in some range of the file `key` names. A page-in that starts
    /// on another loop just after a `false` is a race this table does not close: at worst one
    /// `sendfile` waits for that read.
    #[must_use]
    pub fn reading(&self, key: &FileKey) -> bool {
        self.total.load(Ordering::Relaxed) != 0 && lock(&self.counts).contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64) -> FileKey {
        FileKey {
            dev: 1,
            ino,
            size: 100,
            mtime_secs: 0,
            mtime_nanos: 0,
        }
    }

    #[test]
    fn a_file_is_read_until_its_last_page_in_finishes() {
        let flight = PagesInFlight::default();
        flight.started(key(1));
        flight.started(key(1));
        assert!(flight.reading(&key(1)));
        assert!(!flight.reading(&key(2)));
        flight.finished(key(1));
        assert!(flight.reading(&key(1)));
        flight.finished(key(1));
        assert!(!flight.reading(&key(1)));
        assert!(
            flight.counts.lock().unwrap().is_empty(),
            "no entry is left behind"
        );
        assert_eq!(flight.total.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn finishing_an_unknown_file_changes_nothing() {
        let flight = PagesInFlight::default();
        flight.finished(key(3));
        assert!(!flight.reading(&key(3)));
        flight.started(key(4));
        flight.finished(key(3));
        assert!(flight.reading(&key(4)));
        assert_eq!(flight.total.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn loops_on_other_threads_see_each_others_reads() {
        let flight = std::sync::Arc::new(PagesInFlight::default());
        let other = flight.clone();
        std::thread::spawn(move || other.started(key(5)))
            .join()
            .unwrap();
        assert!(flight.reading(&key(5)));
    }
}
