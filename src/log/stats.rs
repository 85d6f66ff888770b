//! The scoreboard (Abyss §4, Apache's mod_status): counters and gauges that loops bump as they
//! work and the metrics location reads.
//!
//! Owns: `Stats` (the whole server's board) and `LoopStats` (one slot of it per loop, thread
//! group or process, 512 bytes on cache lines of its own, so that loops never write the same
//! line: every bump is an uncontended relaxed atomic). The board lives in memory that forked
//! processes share (`ampd_sys::shared`), as Apache prefork's scoreboard does: under `mp` every
//! worker writes its own slot and any worker's status location reports the whole server.
//! Readers sum over slots; a reading is a consistent-enough snapshot, not an atomic one.
//! Must not touch: anything but counters.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Connection states of the scoreboard, in the order of `Phase::index`.
pub const STATES: [&str; 6] = ["idle", "reading", "busy", "sending", "closing", "upstream"];
/// Upper bounds (seconds) of the latency histogram's buckets; one more bucket is `+Inf`.
pub const LATENCY_BOUNDS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// The three Flash caches, in the order `LoopStats::publish_cache` takes them.
pub const CACHES: [&str; 4] = ["path", "header", "file", "compressed"];

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

/// Why a connection was closed before its PROXY protocol header was used.
#[derive(Clone, Copy, Debug)]
pub enum ProxyRefusal {
    /// It came from a source outside `proxy_protocol_from` (closed at accept).
    Untrusted,
    /// Its header was malformed or never came (closed without a response).
    Invalid,
}

/// Cells of one slot (a power of two, 512 bytes: whole cache lines).
const SLOT: usize = 64;
// Where each counter sits in a slot.
const CONNECTIONS: usize = 0; // 6 gauges (`STATES`), stored as two's complement
const ACCEPTED: usize = 45;
const RESPONSES: usize = 6; // 5 status classes
const BYTES: usize = 11;
const LATENCY: usize = 12; // 13 buckets, the last +Inf
const LATENCY_MICROS: usize = 25;
const CACHE_COUNTERS: usize = 26; // 3 caches × (hits, misses, size)
const COMPRESSED_CACHE: usize = 47; // the 4th cache's (hits, misses, size)
const HELPER_QUEUE: usize = 35;
const HELPER_BUSY: usize = 36;
const SHED: usize = 37; // 3 reasons
/// The configuration generation the process owning this slot serves (`mp` workers: their
/// master waits for it after passing a reload on).
const INSTALLED: usize = 40;
const DROPPED: usize = 41; // 3 reasons (as SHED): closed without an answer
const INTERNAL_ERRORS: usize = 44; // responses 500
const PROXY_REFUSED: usize = 56; // 2 reasons
/// Nonzero once the process owning this slot has begun its graceful stop (`mp` workers: their
/// master waits for it before it reports the stop begun).
const STOP_BEGUN: usize = 46;
/// Cells before the slots: whole-server values.
const HEADER: usize = SLOT;
const RELOADS: usize = 0;
const RELOAD_FAILURES: usize = 1;
const GENERATION: usize = 2;
const NEXT_SLOT: usize = 3;

/// One loop's slot of the board.
#[derive(Clone, Copy, Debug)]
pub struct LoopStats {
    cells: &'static [AtomicU64; SLOT],
}

impl LoopStats {
    fn bump(&self, cell: usize, by: u64) {
        self.cells[cell].fetch_add(by, Ordering::Relaxed);
    }

    fn read(&self, cell: usize) -> u64 {
        self.cells[cell].load(Ordering::Relaxed)
    }

    /// One response of `status`, `bytes` long, `latency` after its request head arrived.
    pub fn response(&self, status: u16, bytes: u64, latency: Duration) {
        let class = usize::from((status / 100).clamp(1, 5) - 1);
        self.bump(RESPONSES + class, 1);
        if status == 500 {
            self.bump(INTERNAL_ERRORS, 1);
        }
        self.bump(BYTES, bytes);
        let seconds = latency.as_secs_f64();
        let bucket = LATENCY_BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BOUNDS.len());
        self.bump(LATENCY + bucket, 1);
        self.bump(
            LATENCY_MICROS,
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
        );
    }

    /// A connection was accepted.
    pub fn accepted(&self) {
        self.bump(ACCEPTED, 1);
    }

    /// A connection moved between scoreboard states (`None`: opened or closed).
    pub fn connection_moved(&self, from: Option<usize>, to: Option<usize>) {
        if let Some(from) = from {
            self.cells[CONNECTIONS + from].fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(to) = to {
            self.bump(CONNECTIONS + to, 1);
        }
    }

    /// A connection or request turned away for `why` (answered `503`/`429`, or dropped).
    pub fn shed(&self, why: Shed) {
        self.bump(SHED + why as usize, 1);
    }

    /// A connection closed before its PROXY protocol header was used.
    pub fn proxy_refused(&self, why: ProxyRefusal) {
        self.bump(PROXY_REFUSED + why as usize, 1);
    }

    /// A connection closed without an answer, far over a cap (counted by `shed` as well).
    pub fn dropped(&self, why: Shed) {
        self.bump(DROPPED + why as usize, 1);
    }

    /// What a cache holds and has counted (`cache` in the order of `CACHES`); its owner copies
    /// it here a few times a second.
    pub fn publish_cache(&self, cache: usize, hits: u64, misses: u64, size: u64) {
        let base = cache_cells(cache);
        self.cells[base].store(hits, Ordering::Relaxed);
        self.cells[base + 1].store(misses, Ordering::Relaxed);
        self.cells[base + 2].store(size, Ordering::Relaxed);
    }

    pub fn publish_helpers(&self, queued: u64, busy: u64) {
        self.cells[HELPER_QUEUE].store(queued, Ordering::Relaxed);
        self.cells[HELPER_BUSY].store(busy, Ordering::Relaxed);
    }

    /// Open connections in state `index` (of `STATES`).
    #[must_use]
    pub fn connections(&self, index: usize) -> i64 {
        self.read(CONNECTIONS + index) as i64
    }

    #[must_use]
    pub fn accepted_total(&self) -> u64 {
        self.read(ACCEPTED)
    }

    /// Responses of status class `class` (0 for 1xx … 4 for 5xx).
    #[must_use]
    pub fn responses(&self, class: usize) -> u64 {
        self.read(RESPONSES + class)
    }

    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.read(BYTES)
    }

    /// Responses in latency bucket `index` (not cumulative; the last is `+Inf`).
    #[must_use]
    pub fn latency(&self, index: usize) -> u64 {
        self.read(LATENCY + index)
    }

    #[must_use]
    pub fn latency_micros(&self) -> u64 {
        self.read(LATENCY_MICROS)
    }

    /// `(hits, misses, size)` of `cache`.
    #[must_use]
    pub fn cache(&self, cache: usize) -> (u64, u64, u64) {
        let base = cache_cells(cache);
        (self.read(base), self.read(base + 1), self.read(base + 2))
    }

    #[must_use]
    pub fn helper_queue(&self) -> u64 {
        self.read(HELPER_QUEUE)
    }

    #[must_use]
    pub fn helper_busy(&self) -> u64 {
        self.read(HELPER_BUSY)
    }

    /// Turned away for reason `index` (a `Shed` as usize).
    #[must_use]
    pub fn shed_total(&self, index: usize) -> u64 {
        self.read(SHED + index)
    }

    /// Connections closed for PROXY protocol reason `index` (a `ProxyRefusal` as usize).
    #[must_use]
    pub fn proxy_refused_total(&self, index: usize) -> u64 {
        self.read(PROXY_REFUSED + index)
    }

    /// Connections dropped for reason `index` (a `Shed` as usize).
    #[must_use]
    pub fn dropped_total(&self, index: usize) -> u64 {
        self.read(DROPPED + index)
    }

    /// Responses `500` (the server's own failures).
    #[must_use]
    pub fn internal_errors(&self) -> u64 {
        self.read(INTERNAL_ERRORS)
    }

    /// A process that takes over this slot (a replaced `mp` worker) starts with no open
    /// connections and nothing published; counters keep counting from where they were.
    pub fn set_installed(&self, generation: u64) {
        self.cells[INSTALLED].store(generation, Ordering::Release);
    }

    #[must_use]
    pub fn installed(&self) -> u64 {
        self.cells[INSTALLED].load(Ordering::Acquire)
    }

    /// The owning process has begun a graceful stop: its health answers `503` from now on.
    pub fn set_stop_begun(&self) {
        self.cells[STOP_BEGUN].store(1, Ordering::Release);
    }

    #[must_use]
    pub fn stop_begun(&self) -> bool {
        self.cells[STOP_BEGUN].load(Ordering::Acquire) != 0
    }

    fn reset_gauges(&self) {
        for cell in (CONNECTIONS..CONNECTIONS + STATES.len())
            .chain(CACHE_COUNTERS..CACHE_COUNTERS + 9)
            .chain(COMPRESSED_CACHE..COMPRESSED_CACHE + 3)
            .chain([HELPER_QUEUE, HELPER_BUSY])
        {
            self.cells[cell].store(0, Ordering::Relaxed);
        }
    }
}

/// Where `cache`'s three cells start (the compressed cache came after the slot's layout was
/// set, and sits in cells that were free).
fn cache_cells(cache: usize) -> usize {
    if cache < 3 {
        CACHE_COUNTERS + 3 * cache
    } else {
        COMPRESSED_CACHE
    }
}

/// The whole server's board.
#[derive(Debug)]
pub struct Stats {
    header: &'static [AtomicU64],
    slots: Vec<LoopStats>,
    pub started: Instant,
    /// The process that made the board: under `mp` the master, whose workers inherit the
    /// board (and this value) when forked. The `process_*` metrics cover it and every process
    /// below it.
    pub server_pid: u32,
}

impl Stats {
    /// A board with `slots` slots, in memory shared with processes forked later.
    ///
    /// # Errors
    /// The shared mapping cannot be made (out of memory).
    pub fn new(slots: usize) -> io::Result<Stats> {
        let slots = slots.max(1);
        let cells = ampd_sys::shared::atomics(HEADER + slots * SLOT)?;
        let (header, rest) = cells.split_at(HEADER);
        let slots = rest
            .chunks_exact(SLOT)
            .map(|chunk| LoopStats {
                cells: chunk.try_into().expect("chunks are SLOT long"),
            })
            .collect();
        let stats = Stats {
            header,
            slots,
            started: Instant::now(),
            server_pid: std::process::id(),
        };
        stats.set_generation(1);
        Ok(stats)
    }

    /// The next free slot, for a new loop (or group of threads). If more loops join than the
    /// board has slots, they share slots: every bump is still counted once.
    #[must_use]
    pub fn add_loop(&self) -> LoopStats {
        let next = self.header[NEXT_SLOT].fetch_add(1, Ordering::Relaxed);
        self.slots[usize::try_from(next).unwrap_or(0) % self.slots.len()]
    }

    /// Slot `index`, taken over by a process that replaces the one that had it (`mp`).
    #[must_use]
    pub fn claim(&self, index: usize) -> LoopStats {
        let slot = self.slots[index % self.slots.len()];
        slot.reset_gauges();
        slot.cells[STOP_BEGUN].store(0, Ordering::Release);
        slot
    }

    /// Every slot (unused ones read zero).
    #[must_use]
    pub fn loops(&self) -> &[LoopStats] {
        &self.slots
    }

    pub fn count_reload(&self, succeeded: bool) {
        let cell = if succeeded { RELOADS } else { RELOAD_FAILURES };
        self.header[cell].fetch_add(1, Ordering::Relaxed);
    }

    #[must_use]
    pub fn reloads(&self) -> u64 {
        self.header[RELOADS].load(Ordering::Relaxed)
    }

    #[must_use]
    pub fn reload_failures(&self) -> u64 {
        self.header[RELOAD_FAILURES].load(Ordering::Relaxed)
    }

    pub fn set_generation(&self, number: u64) {
        self.header[GENERATION].store(number, Ordering::Relaxed);
    }

    #[must_use]
    pub fn generation(&self) -> u64 {
        self.header[GENERATION].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_apart_and_sum_together() {
        let stats = Stats::new(2).unwrap();
        let (first, second) = (stats.add_loop(), stats.add_loop());
        first.response(200, 10, Duration::from_micros(50));
        second.response(404, 5, Duration::from_secs(2));
        first.connection_moved(None, Some(0));
        first.connection_moved(Some(0), Some(3));
        second.connection_moved(None, Some(0));
        second.connection_moved(Some(0), None);
        let sum = |read: fn(&LoopStats) -> u64| stats.loops().iter().map(read).sum::<u64>();
        assert_eq!(sum(|slot| slot.responses(1)), 1);
        assert_eq!(sum(|slot| slot.responses(3)), 1);
        assert_eq!(sum(LoopStats::bytes), 15);
        assert_eq!(first.latency(0), 1);
        assert_eq!(second.latency(LATENCY_BOUNDS.len()), 1);
        assert_eq!(first.connections(3), 1);
        assert_eq!(second.connections(0), 0);
        // A third loop shares a slot rather than go uncounted.
        stats.add_loop().accepted();
        assert_eq!(sum(LoopStats::accepted_total), 1);
        let claimed = stats.claim(0);
        assert_eq!(claimed.connections(3), 0);
        assert_eq!(claimed.responses(1), 1);
        assert_eq!(stats.generation(), 1);
    }
}
