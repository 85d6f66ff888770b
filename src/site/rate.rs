//! Request rate limits per client address: a token bucket per address (nginx `limit_req`,
//! without its queueing: a request over the limit is answered `429` at once).
//!
//! Owns: the buckets. They are shared by all loops (one client may reach several), in shards so
//! that two loops rarely take the same lock; each shard forgets its full buckets when it grows
//! past a bound, so a scan of many addresses cannot grow memory without limit.
//! Must not touch: sockets, the response.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::Admission;

const SHARDS: usize = 16;
/// Addresses tracked per shard before full buckets are dropped.
const SHARD_BOUND: usize = 4096;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Debug)]
pub struct RateLimiter {
    /// Tokens added per second; 0 switches the limiter off.
    rate: f64,
    burst: f64,
    shards: Vec<Mutex<HashMap<IpAddr, Bucket>>>,
}

impl RateLimiter {
    #[must_use]
    pub fn new(admission: &Admission) -> RateLimiter {
        RateLimiter {
            rate: admission.requests_per_second,
            burst: f64::from(admission.burst.max(1)),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    #[must_use]
    pub fn enabled(&self) -> bool {
        self.rate > 0.0
    }

    /// Take a token for a request from `address` at `now`: `Ok` to serve it, `Err(wait)` with
    /// the time until the next token when the bucket is empty.
    ///
    /// # Errors
    /// The address is over its rate.
    pub fn take(&self, address: IpAddr, now: Instant) -> Result<(), Duration> {
        if !self.enabled() {
            return Ok(());
        }
        let shard = &self.shards[shard_of(address)];
        let mut buckets = shard.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= SHARD_BOUND && !buckets.contains_key(&address) {
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, bucket| refill(bucket, now, rate, burst) < burst);
        }
        let bucket = buckets.entry(address).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let tokens = refill(bucket, now, self.rate, self.burst);
        if tokens >= 1.0 {
            bucket.tokens = tokens - 1.0;
            Ok(())
        } else {
            bucket.tokens = tokens;
            Err(Duration::from_secs_f64((1.0 - tokens) / self.rate))
        }
    }
}

fn refill(bucket: &mut Bucket, now: Instant, rate: f64, burst: f64) -> f64 {
    let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
    bucket.at = now;
    bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
    bucket.tokens
}

fn shard_of(address: IpAddr) -> usize {
    let folded = match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    };
    (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 64) as usize % SHARDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let limiter = RateLimiter::new(&Admission {
            max_connections: 1,
            max_connections_per_address: 0,
            requests_per_second: 10.0,
            burst: 3,
            retry_after: Duration::from_secs(1),
        });
        let address: IpAddr = "192.0.2.1".parse().unwrap();
        let start = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take(address, start).is_ok());
        }
        let wait = limiter.take(address, start).unwrap_err();
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(limiter
            .take(address, start + Duration::from_millis(100))
            .is_ok());
        assert!(limiter.take("192.0.2.2".parse().unwrap(), start).is_ok());
    }
}
