//! The scoreboard (Abyss §4, Apache's mod_status): counters and gauges that loops bump as they
//! work and the metrics location reads.
//!
//! Owns: `Stats` (process-wide) and `LoopStats` (one per loop, on its own cache lines, so that
//! loops never write the same line: every bump is an uncontended relaxed atomic). Readers sum
//! over loops; a reading is a consistent-enough snapshot, not an atomic one.
//! Must not touch: anything but counters.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Connection states of the scoreboard, in the order of `LoopStats::connections`.
pub const STATES: [&str; 5] = ["idle", "reading", "busy", "sending", "closing"];
/// Upper bounds (seconds) of the latency histogram's buckets; one more bucket is `+Inf`.
pub const LATENCY_BOUNDS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// The three Flash caches, in the order of `LoopStats::caches`.
pub const CACHES: [&str; 3] = ["path", "header", "file"];

/// Why a request or connection was turned away.
#[derive(Clone, Copy, Debug)]
pub enum Shed {
    /// The global connection cap (`503`).
    Connections,
    /// The per-address connection cap (`503`).
    Address,
    /// The per-address request rate (`429`).
    Rate,
}

#[derive(Debug, Default)]
pub struct CacheCounters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Entries (path, header) or bytes (file) held.
    pub size: AtomicU64,
}

#[derive(Debug, Default)]
#[repr(align(128))]
pub struct LoopStats {
    pub connections: [AtomicI64; 5],
    pub accepted: AtomicU64,
    /// Responses by status class, 1xx..5xx.
    pub responses: [AtomicU64; 5],
    /// Response bytes queued (heads and bodies).
    pub bytes: AtomicU64,
    /// Per-bucket (not cumulative) counts; the last is `+Inf`.
    pub latency: [AtomicU64; 13],
    pub latency_micros: AtomicU64,
    pub caches: [CacheCounters; 3],
    pub helper_queue: AtomicU64,
    pub helper_busy: AtomicU64,
    /// By `Shed` variant.
    pub shed: [AtomicU64; 3],
}

impl LoopStats {
    /// One response of `status`, `bytes` long, `latency` after its request head arrived.
    pub fn response(&self, status: u16, bytes: u64, latency: Duration) {
        let class = usize::from((status / 100).clamp(1, 5) - 1);
        self.responses[class].fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        let seconds = latency.as_secs_f64();
        let bucket = LATENCY_BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BOUNDS.len());
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_micros.fetch_add(
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// A connection moved between scoreboard states (`None`: opened or closed).
    pub fn connection_moved(&self, from: Option<usize>, to: Option<usize>) {
        if let Some(from) = from {
            self.connections[from].fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(to) = to {
            self.connections[to].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn shed(&self, why: Shed) {
        self.shed[why as usize].fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Debug)]
pub struct Stats {
    loops: Mutex<Vec<Arc<LoopStats>>>,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    pub generation: AtomicU64,
    pub started: Instant,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            loops: Mutex::new(Vec::new()),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            generation: AtomicU64::new(1),
            started: Instant::now(),
        }
    }
}

impl Stats {
    /// A fresh shard for a new loop.
    pub fn add_loop(&self) -> Arc<LoopStats> {
        let shard = Arc::new(LoopStats::default());
        self.loops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(shard.clone());
        shard
    }

    #[must_use]
    pub fn loops(&self) -> Vec<Arc<LoopStats>> {
        self.loops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
