//! What one set of caches may hold: descriptors (`descriptors.rs`) and file-cache bytes
//! (`memory.rs`), decided once when the engine starts its loops, rings or processes.
//!
//! Owns: putting the two together, and the start-up line that says how the file cache was
//! sized when a memory limit made it smaller. Must not touch: the caches themselves.

use super::descriptors::cache_descriptors;
use super::memory::{cgroup_memory_limit, FileCacheSize};
use crate::config::{Config, Level};
use crate::log::error;

/// One set of caches' limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheBudget {
    /// Most files the path cache holds open.
    pub descriptors: u64,
    pub file_cache: FileCacheSize,
}

impl CacheBudget {
    /// The budget of one set of caches among `in_process` in this process (they share its
    /// descriptor limit) and `in_all` in the server (they share its memory: `mp`'s processes
    /// are one cgroup).
    #[must_use]
    pub fn of(config: &Config, in_process: usize, in_all: usize) -> CacheBudget {
        CacheBudget {
            descriptors: cache_descriptors(
                config.admission.max_connections,
                config.descriptors_per_connection(),
                in_process,
            ),
            file_cache: FileCacheSize::choose(
                config.caches.file_cache_bytes,
                cgroup_memory_limit(),
                in_all,
            ),
        }
    }

    /// Say at start-up (an info line in the error log) that a memory limit made the file
    /// cache smaller than its default; `unit` names what owns a set ("loop", "process").
    pub fn announce(&self, sets: usize, unit: &str) {
        if let FileCacheSize::Limited { bytes, limit } = &self.file_cache {
            error::log(
                Level::Info,
                format_args!(
                    "memory limit {} MiB ({}): file cache {} MiB per {unit} ({} MiB in all), \
                     the rest left for the page cache",
                    limit.bytes >> 20,
                    limit.file.display(),
                    bytes >> 20,
                    (bytes * sets as u64) >> 20
                ),
            );
        }
    }
}
