//! Admission control for connections: a global cap and a per-client-address cap, counted
//! across all loops and, under `mp`, across all worker processes. Past a cap a connection is
//! still accepted, to be answered `503` with `Retry-After` (a reply the client can read) and
//! closed; far past it (an eighth more) it is closed at once, so a flood cannot use up
//! descriptors with polite refusals either.
//!
//! Owns: the counts. They live in memory shared with forked processes (`ampd_sys::shared`),
//! one table per process: a process writes only its own (so a worker that dies can be wiped
//! clean by the master, `forget_process`) and reads everyone's. A table is an open-addressed
//! array of cells, each `fingerprint << 24 | count` for one address, claimed and updated with
//! compare-and-swap (no lock anywhere). Each admitted connection holds a `Ticket` that gives
//! its place back when dropped, however the connection ends. Request-rate limits are per
//! location and live in `site::rate`, where `conn` can reach them.
//! Must not touch: sockets (the engine accepts and closes), HTTP.
//!
//! Between processes the caps are exact up to races: two workers admitting at the same instant
//! may each see the count before the other's connection, so a cap can be passed by at most one
//! connection per process for a moment.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config;
use crate::log::stats::Shed;

/// Cells of address tables in all (split between processes; at least `MIN_TABLE` each).
const TABLE_CELLS: usize = 1 << 16;
const MIN_TABLE: usize = 1 << 12;
/// Cells probed for one address: an address lives in the first free cell of its window.
const WINDOW: usize = 16;
/// Low bits of a cell: the count; the rest: the address's fingerprint (never 0).
const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Compare-and-swap attempts before giving up on a window that keeps changing.
const ATTEMPTS: usize = 8;

#[derive(Debug)]
pub struct Admission {
    /// One open-connection count per process.
    open: &'static [AtomicU64],
    /// One address table per process.
    tables: Vec<&'static [AtomicU64]>,
    /// Which of them this process writes.
    mine: usize,
    /// Created before any fork, so every process fingerprints an address the same way.
    hasher: RandomState,
    /// The cap the descriptor limit allows (see `limit_descriptors`); 0 is unknown.
    descriptor_cap: AtomicUsize,
}

/// The outcome of `admit`.
#[derive(Debug)]
pub enum Admit {
    Yes(Ticket),
    /// Serve it a `503` and close.
    Refuse(Ticket, Shed),
    /// Close it at once.
    Drop(Shed),
}

/// One connection's place in the counts.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    /// The address cell this connection counts in.
    cell: Option<usize>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let admission = &self.admission;
        admission.open[admission.mine].fetch_sub(1, Ordering::Relaxed);
        if let Some(cell) = self.cell {
            // The cell cannot change hands while it counts this connection.
            admission.tables[admission.mine][cell].fetch_sub(1, Ordering::Release);
        }
    }
}

impl Admission {
    /// The counts of a server of `processes` processes (1 unless `mp`), in shared memory.
    ///
    /// # Errors
    /// The shared mapping cannot be made.
    pub fn new(processes: usize) -> io::Result<Admission> {
        let processes = processes.max(1);
        let per_table = (TABLE_CELLS / processes).next_power_of_two().max(MIN_TABLE);
        let cells = ampd_sys::shared::atomics(processes * (1 + per_table))?;
        let (open, tables) = cells.split_at(processes);
        Ok(Admission {
            open,
            tables: tables.chunks_exact(per_table).collect(),
            mine: 0,
            hasher: RandomState::new(),
            descriptor_cap: AtomicUsize::new(0),
        })
    }

    /// This process is worker `index` (`mp`): it counts in table `index`. Called once, in the
    /// worker, before it admits anything.
    #[must_use]
    pub fn for_process(&self, index: usize) -> Admission {
        Admission {
            open: self.open,
            tables: self.tables.clone(),
            mine: index % self.tables.len(),
            hasher: self.hasher.clone(),
            descriptor_cap: AtomicUsize::new(self.descriptor_cap.load(Ordering::Relaxed)),
        }
    }

    /// Wipe what worker `index` counted: it died, and its connections with it (the master,
    /// before it starts a replacement).
    pub fn forget_process(&self, index: usize) {
        let index = index % self.tables.len();
        self.open[index].store(0, Ordering::Relaxed);
        for cell in self.tables[index] {
            cell.store(0, Ordering::Relaxed);
        }
    }

    /// Keep the global cap below what the descriptor limit allows: connections whose
    /// `per_connection` descriptors each fit in half of `RLIMIT_NOFILE` per process
    /// (`content::descriptors::connection_cap`), the other half left for open files, cached
    /// descriptors, helpers and logs. Returns the cap now in force (also `max_connections`,
    /// when that is lower).
    pub fn limit_descriptors(
        &self,
        nofile: u64,
        processes: usize,
        per_connection: u64,
        limits: &config::Admission,
    ) -> usize {
        let per_process = crate::content::descriptors::connection_cap(nofile, per_connection);
        let cap = usize::try_from(per_process)
            .unwrap_or(usize::MAX)
            .saturating_mul(processes.max(1));
        self.descriptor_cap.store(cap, Ordering::Relaxed);
        self.cap(limits)
    }

    /// The global connection cap in force: `max_connections`, lowered by the descriptor limit
    /// (`limit_descriptors`).
    #[must_use]
    pub fn cap(&self, limits: &config::Admission) -> usize {
        match self.descriptor_cap.load(Ordering::Relaxed) {
            0 => limits.max_connections,
            descriptors => limits.max_connections.min(descriptors),
        }
    }

    /// Open connections now, in all processes.
    #[must_use]
    pub fn open(&self) -> usize {
        let open: u64 = self
            .open
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum();
        usize::try_from(open).unwrap_or(usize::MAX)
    }

    /// Count a new connection from `address` under the caps of `limits`.
    pub fn admit(self: &Arc<Self>, address: IpAddr, limits: &config::Admission) -> Admit {
        self.open[self.mine].fetch_add(1, Ordering::Relaxed);
        let mut ticket = Ticket {
            admission: self.clone(),
            cell: None,
        };
        let open = self.open();
        let cap = self.cap(limits);
        if open > cap + cap / 8 + 16 {
            return Admit::Drop(Shed::Connections);
        }
        let per_address = limits.max_connections_per_address;
        let mut over_address = false;
        if per_address > 0 {
            match self.count_address(address) {
                Some((cell, count)) => {
                    ticket.cell = Some(cell);
                    if count > per_address * 9 / 8 + 16 {
                        return Admit::Drop(Shed::Address);
                    }
                    over_address = count > per_address;
                }
                // Every cell of the window counts another address: refuse rather than let
                // this one go uncounted.
                None => over_address = true,
            }
        }
        if open > cap {
            Admit::Refuse(ticket, Shed::Connections)
        } else if over_address {
            Admit::Refuse(ticket, Shed::Address)
        } else {
            Admit::Yes(ticket)
        }
    }

    /// Add one to `address`'s count in this process's table; its cell and the count over all
    /// processes, or `None` when its window is full.
    fn count_address(&self, address: IpAddr) -> Option<(usize, usize)> {
        let hash = self.hasher.hash_one(address);
        let fingerprint = (hash >> COUNT_BITS) | 1;
        let table = self.tables[self.mine];
        let start = hash as usize;
        let cell = 'claimed: {
            for _ in 0..ATTEMPTS {
                let mut free = None;
                let mut changed = false;
                for offset in 0..WINDOW {
                    let index = start.wrapping_add(offset) & (table.len() - 1);
                    let value = table[index].load(Ordering::Acquire);
                    if value >> COUNT_BITS == fingerprint {
                        if table[index]
                            .compare_exchange(value, value + 1, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                        {
                            break 'claimed index;
                        }
                        changed = true;
                        break;
                    }
                    if value & COUNT_MASK == 0 && free.is_none() {
                        free = Some((index, value));
                    }
                }
                if changed {
                    continue;
                }
                let (index, value) = free?;
                let claimed = (fingerprint << COUNT_BITS) | 1;
                if table[index]
                    .compare_exchange(value, claimed, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    break 'claimed index;
                }
            }
            return None;
        };
        let count = self
            .tables
            .iter()
            .map(|table| window_count(table, start, fingerprint))
            .sum();
        Some((cell, count))
    }
}

/// `fingerprint`'s count in one table's window.
fn window_count(table: &[AtomicU64], start: usize, fingerprint: u64) -> usize {
    (0..WINDOW)
        .map(|offset| table[start.wrapping_add(offset) & (table.len() - 1)].load(Ordering::Acquire))
        .filter(|value| value >> COUNT_BITS == fingerprint)
        .map(|value| (value & COUNT_MASK) as usize)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(max_connections: usize, per_address: usize) -> config::Admission {
        config::Admission {
            max_connections,
            max_connections_per_address: per_address,
            requests_per_second: 0.0,
            burst: 1,
            retry_after: Duration::from_secs(1),
        }
    }

    #[test]
    fn caps_refuse_then_drop_and_tickets_give_places_back() {
        let admission = Arc::new(Admission::new(1).unwrap());
        let limits = limits(100, 2);
        let address: IpAddr = "192.0.2.1".parse().unwrap();
        let first = admission.admit(address, &limits);
        let second = admission.admit(address, &limits);
        assert!(matches!(first, Admit::Yes(_)) && matches!(second, Admit::Yes(_)));
        assert!(matches!(
            admission.admit(address, &limits),
            Admit::Refuse(_, Shed::Address)
        ));
        assert!(matches!(
            admission.admit("192.0.2.2".parse().unwrap(), &limits),
            Admit::Yes(_)
        ));
        drop(first);
        assert_eq!(admission.open(), 1);
        assert!(matches!(admission.admit(address, &limits), Admit::Yes(_)));
        let many: Vec<Admit> = (0..20).map(|_| admission.admit(address, &limits)).collect();
        assert!(matches!(many.last(), Some(Admit::Drop(Shed::Address))));
    }

    #[test]
    fn processes_count_apart_and_together_and_a_dead_one_is_forgotten() {
        let board = Admission::new(2).unwrap();
        let (first, second) = (
            Arc::new(board.for_process(0)),
            Arc::new(board.for_process(1)),
        );
        let address: IpAddr = "2001:db8::1".parse().unwrap();
        let held = first.admit(address, &limits(10, 1));
        assert!(matches!(held, Admit::Yes(_)));
        // The other process sees this process's connection from the same address.
        assert!(matches!(
            second.admit(address, &limits(10, 1)),
            Admit::Refuse(_, Shed::Address)
        ));
        let also_held = second.admit("192.0.2.9".parse().unwrap(), &limits(2, 0));
        assert!(matches!(also_held, Admit::Yes(_)));
        assert!(matches!(
            first.admit("192.0.2.10".parse().unwrap(), &limits(2, 0)),
            Admit::Refuse(_, Shed::Connections)
        ));
        assert_eq!(board.open(), 2);
        // Process 0 dies holding its connection: its ticket is never dropped.
        std::mem::forget(held);
        board.forget_process(0);
        assert_eq!(board.open(), 1);
        assert!(matches!(
            second.admit(address, &limits(10, 1)),
            Admit::Yes(_)
        ));
        drop(also_held);
    }
}
