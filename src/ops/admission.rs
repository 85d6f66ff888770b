//! Admission control for connections: a global cap and a per-client-address cap, counted
//! across all loops. Past a cap a connection is still accepted, to be answered `503` with
//! `Retry-After` (a reply the client can read) and closed; far past it (an eighth more) it is
//! closed at once, so a flood cannot use up descriptors with polite refusals either.
//!
//! Owns: the counts. Each admitted connection holds a `Ticket` that gives its place back when
//! dropped, however the connection ends. Request-rate limits are per location and live in
//! `site::rate`, where `conn` can reach them.
//! Must not touch: sockets (the engine accepts and closes), HTTP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::config;
use crate::log::stats::Shed;

#[derive(Debug, Default)]
pub struct Admission {
    open: AtomicUsize,
    per_address: Mutex<HashMap<IpAddr, usize>>,
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
    address: Option<IpAddr>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.open.fetch_sub(1, Ordering::Relaxed);
        if let Some(address) = self.address {
            let mut counts = self
                .admission
                .per_address
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(count) = counts.get_mut(&address) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(&address);
                }
            }
        }
    }
}

impl Admission {
    #[must_use]
    pub fn new() -> Admission {
        Admission::default()
    }

    /// Keep the global cap below what the descriptor limit allows: half of `RLIMIT_NOFILE`,
    /// the other half left for open files, cached descriptors, helpers and logs.
    pub fn limit_descriptors(&self, nofile: u64) {
        let cap = usize::try_from(nofile / 2).unwrap_or(usize::MAX).max(16);
        self.descriptor_cap.store(cap, Ordering::Relaxed);
    }

    /// Open connections now.
    #[must_use]
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Count a new connection from `address` under the caps of `limits`.
    pub fn admit(self: &Arc<Self>, address: IpAddr, limits: &config::Admission) -> Admit {
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        let mut cap = limits.max_connections;
        let descriptors = self.descriptor_cap.load(Ordering::Relaxed);
        if descriptors > 0 {
            cap = cap.min(descriptors);
        }
        let hard = cap + cap / 8 + 16;
        if open > hard {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return Admit::Drop(Shed::Connections);
        }
        let mut ticket = Ticket {
            admission: self.clone(),
            address: None,
        };
        let mut over_address = false;
        if limits.max_connections_per_address > 0 {
            let mut counts = self
                .per_address
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let count = counts.entry(address).or_insert(0);
            *count += 1;
            ticket.address = Some(address);
            over_address = *count > limits.max_connections_per_address;
            if *count > limits.max_connections_per_address * 9 / 8 + 16 {
                drop(counts);
                return Admit::Drop(Shed::Address);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn caps_refuse_then_drop_and_tickets_give_places_back() {
        let admission = Arc::new(Admission::new());
        let limits = config::Admission {
            max_connections: 100,
            max_connections_per_address: 2,
            requests_per_second: 0.0,
            burst: 1,
            retry_after: Duration::from_secs(1),
        };
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
    }
}
