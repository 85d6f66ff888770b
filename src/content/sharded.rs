//! A value split into independently locked shards chosen by key hash, so threads that share a
//! cache (`mt`, `tpc`) touch different locks for different keys, and an event loop that owns its
//! cache alone pays one uncontended lock.
//!
//! Owns: the shards and the choice of shard for a key. Must not touch: what a shard holds.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};

use crate::sync::lock;

/// One shard on a cache line (two, for CPUs that prefetch pairs) of its own, so locking one
/// shard does not bounce its neighbour's line between cores.
#[repr(align(128))]
struct Padded<T>(Mutex<T>);

pub struct Sharded<T> {
    shards: Box<[Padded<T>]>,
    hasher: RandomState,
}

impl<T: std::fmt::Debug> std::fmt::Debug for Sharded<T> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Sharded")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl<T> Sharded<T> {
    /// `count` shards (rounded up to a power of two, at least one), each made by `make`.
    #[must_use]
    pub fn new(count: usize, mut make: impl FnMut() -> T) -> Sharded<T> {
        let count = count.max(1).next_power_of_two();
        Sharded {
            shards: (0..count).map(|_| Padded(Mutex::new(make()))).collect(),
            hasher: RandomState::new(),
        }
    }

    #[must_use]
    pub fn count(&self) -> usize {
        self.shards.len()
    }

    /// The shard that holds `key`, locked. A panic while a shard was locked leaves its data as
    /// it was (every cache operation is complete or not started), so poisoning is ignored.
    pub fn lock<K: Hash + ?Sized>(&self, key: &K) -> MutexGuard<'_, T> {
        let index = if self.shards.len() == 1 {
            0
        } else {
            (self.hasher.hash_one(key) as usize) & (self.shards.len() - 1)
        };
        lock(&self.shards[index].0)
    }

    /// Every shard in turn, each locked while `visit` runs.
    pub fn for_each(&self, mut visit: impl FnMut(&mut T)) {
        for shard in self.shards.iter() {
            visit(&mut lock(&shard.0));
        }
    }

    /// Sum of `measure` over the shards.
    pub fn sum(&self, measure: impl Fn(&T) -> u64) -> u64 {
        self.shards
            .iter()
            .map(|shard| measure(&lock(&shard.0)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_land_in_stable_shards_and_counts_round_up() {
        let sharded = Sharded::new(3, Vec::<u32>::new);
        assert_eq!(sharded.count(), 4);
        for key in 0..100u32 {
            sharded.lock(&key).push(key);
        }
        for key in 0..100u32 {
            assert!(sharded.lock(&key).contains(&key));
        }
        assert_eq!(sharded.sum(|shard| shard.len() as u64), 100);
        sharded.for_each(Vec::clear);
        assert_eq!(sharded.sum(|shard| shard.len() as u64), 0);
        assert_eq!(Sharded::new(0, || 0u8).count(), 1);
    }
}
