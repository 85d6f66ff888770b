//! Request rate limits per client address (nginx `limit_req`, without its queueing: a request
//! over the limit is answered `429` at once), as the generic cell rate algorithm: a token
//! bucket of `burst` tokens refilled at `requests_per_second`, kept as one number per address —
//! the time at which its bucket would be full again ("theoretical arrival time").
//!
//! Owns: the per-address times. One number per address is what lets them live in memory shared
//! by forked processes (`ampd_sys::shared`) and be updated with one compare-and-swap, so under
//! `mp` a client is limited across all workers, and under threaded engines no lock is taken.
//! The table outlives reloads (a reload that changes the rate applies it to the same clients).
//! An address's entry is found in a small window of the table; when the window is full, the
//! entry whose bucket is fullest is given to the new address, so a scan of many addresses
//! cannot grow memory and forgets only the clients least limited.
//! Must not touch: sockets, the response.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::Admission;

/// Addresses tracked (a power of two).
const ENTRIES: usize = 1 << 14;
/// Entries probed for one address.
const WINDOW: usize = 8;

#[derive(Debug)]
pub struct RateLimiter {
    /// `ENTRIES` pairs of cells: the address's key (never 0), and its time in microseconds
    /// since `epoch`.
    cells: &'static [AtomicU64],
    /// Made before any fork: every process keys and times an address alike (`Instant` is the
    /// monotonic clock, the same in every process).
    hasher: RandomState,
    epoch: Instant,
}

impl RateLimiter {
    /// # Errors
    /// The shared mapping cannot be made.
    pub fn new() -> io::Result<RateLimiter> {
        Ok(RateLimiter {
            cells: ampd_sys::shared::atomics(2 * ENTRIES)?,
            hasher: RandomState::new(),
            epoch: Instant::now(),
        })
    }

    /// Take a token for a request from `address` at `now` under `limits`: `Ok` to serve it,
    /// `Err(wait)` with the time until the next token when the bucket is empty.
    ///
    /// # Errors
    /// The address is over its rate.
    pub fn take(&self, address: IpAddr, now: Instant, limits: &Admission) -> Result<(), Duration> {
        if limits.requests_per_second <= 0.0 {
            return Ok(());
        }
        // One token every `interval`; a full bucket lets `burst` through at once.
        let interval = (1e6 / limits.requests_per_second).max(1.0) as u64;
        let tolerance = interval * u64::from(limits.burst.max(1) - 1);
        let now = micros(now.saturating_duration_since(self.epoch)) + 1;
        let time = &self.cells[2 * self.entry(address, now) + 1];
        let mut stored = time.load(Ordering::Acquire);
        loop {
            let arrival = stored.max(now);
            if arrival - now > tolerance {
                return Err(Duration::from_micros(arrival - now - tolerance));
            }
            match time.compare_exchange_weak(
                stored,
                arrival + interval,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(current) => stored = current,
            }
        }
    }

    /// The entry of `address`: the one keyed by it in its window, else the window's free or
    /// fullest-bucket entry, taken over (its time reset: a full bucket).
    fn entry(&self, address: IpAddr, now: u64) -> usize {
        let hash = self.hasher.hash_one(address);
        let key = hash | 1;
        let mut oldest = (0, u64::MAX);
        for offset in 0..WINDOW {
            let entry = (hash as usize).wrapping_add(offset) & (ENTRIES - 1);
            if self.cells[2 * entry].load(Ordering::Acquire) == key {
                return entry;
            }
            let time = self.cells[2 * entry + 1].load(Ordering::Relaxed);
            if time < oldest.1 {
                oldest = (entry, time);
            }
        }
        let entry = oldest.0;
        let previous = self.cells[2 * entry].swap(key, Ordering::AcqRel);
        if previous != key {
            // A bucket of someone else's: start this address with a full one. (Two processes
            // taking over the same entry at once both get a full bucket: a moment's leniency.)
            self.cells[2 * entry + 1].store(now.saturating_sub(1), Ordering::Release);
        }
        entry
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let limiter = RateLimiter::new().unwrap();
        let limits = Admission {
            max_connections: 1,
            max_connections_per_address: 0,
            requests_per_second: 10.0,
            burst: 3,
            retry_after: Duration::from_secs(1),
        };
        let address: IpAddr = "192.0.2.1".parse().unwrap();
        let start = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take(address, start, &limits).is_ok());
        }
        let wait = limiter.take(address, start, &limits).unwrap_err();
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(limiter
            .take(address, start + Duration::from_millis(100), &limits)
            .is_ok());
        assert!(limiter
            .take("192.0.2.2".parse().unwrap(), start, &limits)
            .is_ok());
        let off = Admission {
            requests_per_second: 0.0,
            ..limits
        };
        for _ in 0..10 {
            assert!(limiter.take(address, start, &off).is_ok());
        }
    }
}
